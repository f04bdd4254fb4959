"""Collector settings, read from ``PROMPTRAIL_*`` environment variables."""

from __future__ import annotations

import base64
import re
from pathlib import Path

from pydantic import AliasChoices, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from .access.principal import ROLES
from .models.rate_limit_settings import ProjectLimitOverride, check_limit

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
    cursor_secret: str = "promptrail-cursor-v1"
    max_batch_records: int = 10_000
    # Backpressure (docs/deploy.md, "When the store stalls").
    # Twice the request-log journal's largest insert (store/writes/log_journal.py).
    ingest_buffer_bytes: int = Field(default=128 << 20, ge=1024)
    ingest_wait_seconds: float = Field(default=5.0, ge=0)
    # The embedded store answers records once in the log's journal, stored right behind
    # (docs/deploy.md, "What acknowledged means"); off: once inserted.
    request_journal: bool = True
    store_retry_after_seconds: int = Field(default=2, ge=1, le=3600)
    fault_injection: bool = False
    export_dir: Path | None = None
    export_retention_days: float = 7.0
    # Analytics rollup (docs/architecture.md): an hour is summed once no insert touched it for
    # the settle time; the sealer looks for such hours every interval.
    rollup_settle_seconds: float = Field(default=60.0, ge=0)
    rollup_interval_seconds: float = Field(default=30.0, gt=0)
    # On a ClickHouse server, how often each collector reads the prompt registry's changes
    # into its in-memory index (collector/services/prompts/DESIGN.md, "Freshness across
    # collectors"); 0 turns the registry's reads from memory off there. Unused on the embedded
    # store.
    registry_poll_seconds: float = Field(default=1.0, ge=0)
    # How often online evaluation's worker looks for newly arrived records while a rule is
    # enabled (collector/services/evaluation/worker.py); tests shorten it to wait less.
    evaluation_poll_seconds: float = Field(default=0.5, gt=0)
    # Model providers for runs. The provider variables keep their usual names (no prefix), as
    # the providers' own SDKs read them; unset base URLs mean the providers' own.
    openai_api_key: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("openai_api_key", "OPENAI_API_KEY")
    )
    openai_base_url: str | None = Field(
        default=None, validation_alias=AliasChoices("openai_base_url", "OPENAI_BASE_URL")
    )
    anthropic_api_key: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("anthropic_api_key", "ANTHROPIC_API_KEY")
    )
    anthropic_base_url: str | None = Field(
        default=None, validation_alias=AliasChoices("anthropic_base_url", "ANTHROPIC_BASE_URL")
    )
    provider_connect_timeout: float = Field(default=5.0, gt=0)
    provider_read_timeout: float = Field(default=120.0, gt=0)
    provider_max_retries: int = Field(default=2, ge=0, le=10)
    provider_retry_base_delay: float = Field(default=0.5, ge=0)
    provider_retry_max_delay: float = Field(default=8.0, ge=0)
    provider_max_connections: int = Field(default=1000, ge=1)
    # Limits per project (docs/security.md), in the ``limits`` notation; empty: no limit.
    limit_requests: str = ""
    limit_records: str = ""
    limit_bytes: str = ""
    project_limits: dict[str, ProjectLimitOverride] = Field(default_factory=dict)
    # Provider connections' secrets are sealed under this key (32 bytes, base64); without it
    # the embedded store makes a key file in the data dir (docs/security.md, Connections).
    # The previous keys (comma-separated) still open what they sealed: a rotation.
    secret_key: SecretStr | None = None
    secret_key_previous: SecretStr | None = None

    # The first instance admin, made at start-up if no user has this e-mail address
    # (docs/security.md, "Accounts"); both or neither.
    init_admin_email: str | None = None
    init_admin_password: SecretStr | None = None

    # Single sign-on with OpenID Connect (docs/security.md, "SSO"): on when the issuer, the
    # client id and its secret are set. The role map is JSON {"<group>": "<project>:<role>"};
    # allowed domains are comma-separated (empty: any); the public URL is the collector's
    # address as browsers see it (default: the request's).
    oidc_issuer: str | None = None
    oidc_client_id: str | None = None
    oidc_client_secret: SecretStr | None = None
    oidc_role_claim: str = "groups"
    oidc_role_map: dict[str, str] = Field(default_factory=dict)
    oidc_allowed_domains: str = ""
    oidc_scopes: str = "openid email profile"
    public_url: str | None = None

    @field_validator("database")
    @classmethod
    def _database_is_identifier(cls, value: str) -> str:
        # The database name is spliced into SQL as an identifier, so it must be one.
        if not _IDENTIFIER.match(value):
            raise ValueError("database must match [A-Za-z_][A-Za-z0-9_]*")
        return value

    @field_validator("limit_requests", "limit_records", "limit_bytes")
    @classmethod
    def _is_limit(cls, value: str) -> str:
        return check_limit(value)

    @field_validator("secret_key", "secret_key_previous")
    @classmethod
    def _is_secret_key(cls, value: SecretStr | None) -> SecretStr | None:
        for key in value.get_secret_value().split(",") if value else []:
            try:
                raw = base64.b64decode(key.strip(), validate=True)
            except ValueError:
                raw = b""
            if len(raw) != 32:
                raise ValueError("a secret key is 32 bytes in base64 (openssl rand -base64 32)")
        return value

    @field_validator("oidc_role_map")
    @classmethod
    def _is_role_map(cls, value: dict[str, str]) -> dict[str, str]:
        for group, target in value.items():
            project, _, role = target.rpartition(":")
            if not project or role not in ROLES:
                raise ValueError(
                    f"group {group!r} maps to {target!r}: each value is '<project>:<role>', "
                    f"the role one of {', '.join(ROLES)}"
                )
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
