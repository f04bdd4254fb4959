"""Collector settings, read from ``PROMPTRAIL_*`` environment variables."""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


class Settings(BaseSettings):
    """Every knob of the collector; each field maps to ``PROMPTRAIL_<FIELD>``."""

    model_config = SettingsConfigDict(env_prefix="PROMPTRAIL_", extra="ignore")

    clickhouse_url: str | None = None
    clickhouse_cluster: str | None = None
    data_dir: Path = Path("data")
    database: str = "promptrail"
    init_api_key: str | None = None
    host: str = "127.0.0.1"
    port: int = 8000
    max_body_bytes: int = 10 * 1024 * 1024
    max_template_chars: int = 1024 * 1024
    cursor_secret: str = "promptrail-cursor-v1"
    max_batch_records: int = 10_000
    export_dir: Path | None = None
    export_retention_days: float = 7.0

    @field_validator("database")
    @classmethod
    def _database_is_identifier(cls, value: str) -> str:
        # The database name is spliced into SQL as an identifier, so it must be one.
        if not _IDENTIFIER.match(value):
            raise ValueError("database must match [A-Za-z_][A-Za-z0-9_]*")
        return value

    @field_validator("clickhouse_cluster")
    @classmethod
    def _cluster_is_identifier(cls, value: str | None) -> str | None:
        if value is not None and not _IDENTIFIER.match(value):
            raise ValueError("cluster must match [A-Za-z_][A-Za-z0-9_]*")
        return value

    @property
    def store_url(self) -> str:
        """The ClickHouse URL: the configured one, or the embedded store under the data dir."""
        if self.clickhouse_url:
            return self.clickhouse_url
        return f"chdb://{(self.data_dir / 'clickhouse').resolve()}"

    @property
    def exports_path(self) -> Path:
        """Where export files go: a directory every collector of a deployment reaches."""
        return (self.export_dir or self.data_dir / "exports").resolve()

    @property
    def is_embedded(self) -> bool:
        """Whether the store is chDB running inside this process."""
        return self.store_url.startswith("chdb://")
