"""docs/deploy.md's settings table names every environment variable the collector reads."""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import AliasChoices

from promptrail.collector.config import Settings

ROOT = Path(__file__).resolve().parents[3]
# Read by the embedded engine, not by the settings model: tuning.py sets its default.
ENGINE_VARIABLES = {"JE_MALLOC_CONF": ROOT / "collector" / "tuning.py"}


def documented() -> set[str]:
    """The variables named in the first column of the settings table of docs/deploy.md."""
    text = (ROOT / "docs" / "deploy.md").read_text()
    section = text.split("## Settings", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    return {name for row in rows for name in re.findall(r"`([A-Z][A-Z0-9_]*)`", row.split("|")[1])}


def read_by_settings() -> set[str]:
    """The variable names the settings model reads, prefix and aliases included."""
    prefix = Settings.model_config.get("env_prefix", "")
    names = set()
    for name, info in Settings.model_fields.items():
        alias = info.validation_alias
        if isinstance(alias, AliasChoices):
            names |= {c for c in alias.choices if isinstance(c, str) and c.isupper()}
        else:
            names.add(f"{prefix}{name}".upper())
    return names


def test_the_settings_table_lists_exactly_the_variables_the_collector_reads() -> None:
    for name, reader in ENGINE_VARIABLES.items():
        assert name in reader.read_text(), f"{name} is no longer read: drop it here and in docs"

    assert documented() == read_by_settings() | set(ENGINE_VARIABLES)
