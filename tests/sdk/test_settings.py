"""The SDK's ``PROMPTRAIL_*`` settings (issue 46.2): one module reads them, each variable does
what docs/sdk.md says, read when ``init`` runs, and an argument given in code beats it."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

import promptrail
from promptrail import _runtime
from promptrail._disk import scope_of
from promptrail.testing import free_port
from tests.keys import DEFAULT_KEY

SDK = Path(promptrail.__file__).resolve().parent


@pytest.fixture(autouse=True)
def capture() -> Iterator[None]:
    _runtime.reset_stats()
    yield
    promptrail.shutdown()


def test_no_sdk_module_but_the_settings_reads_the_environment() -> None:
    readers = sorted(
        str(path.relative_to(SDK))
        for path in SDK.rglob("*.py")
        if "collector" not in path.relative_to(SDK).parts
        and re.search(r"os\.environ|os\.getenv|getenv\(", path.read_text())
    )
    assert readers == ["_settings.py"]


def test_the_variables_set_the_key_the_url_and_the_spool(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv("PROMPTRAIL_API_KEY", f"  {DEFAULT_KEY}  ")
    monkeypatch.setenv("PROMPTRAIL_BASE_URL", url + "/")
    monkeypatch.setenv("PROMPTRAIL_CACHE_DIR", str(tmp_path / "cache"))

    promptrail.init()  # after the variables were set: read now, not at import

    spool = tmp_path / "cache" / "spool" / scope_of(url, DEFAULT_KEY) / "records"
    assert promptrail.stats()["spool"] == str(spool)
    assert _runtime.configured_api_key() == DEFAULT_KEY


def test_arguments_beat_the_variables(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv("PROMPTRAIL_API_KEY", "pr-from-the-environment")
    monkeypatch.setenv("PROMPTRAIL_BASE_URL", "http://127.0.0.1:1")
    monkeypatch.setenv("PROMPTRAIL_MAX_QUEUE_BYTES", "not a number")

    promptrail.init(
        api_key=DEFAULT_KEY, base_url=url, cache_dir=tmp_path / "mine", max_queue_bytes=1 << 20
    )

    spool = tmp_path / "mine" / "spool" / scope_of(url, DEFAULT_KEY) / "records"
    assert promptrail.stats()["spool"] == str(spool)
    assert _runtime.configured_api_key() == DEFAULT_KEY


@pytest.mark.parametrize("off", ["0", "false", " OFF ", "no"])
def test_disk_cache_off_keeps_records_in_memory(monkeypatch: pytest.MonkeyPatch, off: str) -> None:
    monkeypatch.setenv("PROMPTRAIL_DISK_CACHE", off)
    promptrail.init(api_key=DEFAULT_KEY, base_url=f"http://127.0.0.1:{free_port()}")
    assert promptrail.stats()["spool"] is None


@pytest.mark.parametrize(
    ("variable", "message"),
    [
        ("PROMPTRAIL_MAX_QUEUE_BYTES", "PROMPTRAIL_MAX_QUEUE_BYTES must be a number of bytes"),
        ("PROMPTRAIL_SPOOL_MAX_BYTES", "PROMPTRAIL_SPOOL_MAX_BYTES must be a number of bytes"),
    ],
)
def test_a_size_that_is_no_number_is_refused_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, variable: str, message: str
) -> None:
    monkeypatch.setenv(variable, "64MB")
    with pytest.raises(ValueError, match=message):
        promptrail.init(api_key=DEFAULT_KEY, base_url=f"http://127.0.0.1:{free_port()}")


def test_enabled_false_captures_nothing_without_init(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROMPTRAIL_ENABLED", "False")
    promptrail.shutdown()  # no pipeline: the first capture configures from the environment

    assert promptrail.observe(name="work")(lambda: 7)() == 7

    assert _runtime.score_shipper() is None  # disabled: nothing is captured or scored
    assert promptrail.stats()["captured"] == 0
