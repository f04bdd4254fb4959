"""The SDK's settings from the environment: the one module that reads ``PROMPTRAIL_*``.

As the collector's ``Settings`` (``promptrail.collector.config``) is its one reader, this is
the SDK's: ``init``, the clients and the disk cache ask :func:`current` (or the helpers below)
and never ``os.environ``. The environment is read when asked, not at import: an application
(or a test) may set a variable after importing promptrail, and an ``init`` or a client made
later sees it. An argument given in code always beats its variable (docs/sdk.md).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

DEFAULT_BASE_URL = "http://127.0.0.1:8000"
_OFF = {"0", "false", "no", "off"}


@dataclass(frozen=True)
class Settings:
    """The ``PROMPTRAIL_*`` variables as the SDK reads them (unset: empty text)."""

    api_key: str = ""  # PROMPTRAIL_API_KEY, as given
    base_url: str = ""  # PROMPTRAIL_BASE_URL, as given
    enabled: bool = True  # PROMPTRAIL_ENABLED: anything but "false" captures
    disk_cache: bool = True  # PROMPTRAIL_DISK_CACHE: 0/false/no/off keeps all in memory
    cache_dir: str = ""  # PROMPTRAIL_CACHE_DIR, stripped
    max_queue_bytes: str = ""  # PROMPTRAIL_MAX_QUEUE_BYTES, stripped (checked by byte_setting)
    spool_max_bytes: str = ""  # PROMPTRAIL_SPOOL_MAX_BYTES, stripped
    environment: str = ""  # PROMPTRAIL_ENVIRONMENT, stripped

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Read the variables from ``environ`` (the process's environment by default)."""
        env = os.environ if environ is None else environ
        return cls(
            api_key=env.get("PROMPTRAIL_API_KEY", ""),
            base_url=env.get("PROMPTRAIL_BASE_URL", ""),
            enabled=env.get("PROMPTRAIL_ENABLED", "true").lower() != "false",
            disk_cache=env.get("PROMPTRAIL_DISK_CACHE", "").strip().lower() not in _OFF,
            cache_dir=env.get("PROMPTRAIL_CACHE_DIR", "").strip(),
            max_queue_bytes=env.get("PROMPTRAIL_MAX_QUEUE_BYTES", "").strip(),
            spool_max_bytes=env.get("PROMPTRAIL_SPOOL_MAX_BYTES", "").strip(),
            environment=env.get("PROMPTRAIL_ENVIRONMENT", "").strip(),
        )

    def text_of(self, variable: str) -> str:
        """The stripped value of a byte-size variable this class reads."""
        return {
            "PROMPTRAIL_MAX_QUEUE_BYTES": self.max_queue_bytes,
            "PROMPTRAIL_SPOOL_MAX_BYTES": self.spool_max_bytes,
        }[variable]


def current() -> Settings:
    """The settings as the environment holds them now."""
    return Settings.from_environment()


def api_key_or_environment(api_key: str | None) -> str:
    """``api_key``, else ``PROMPTRAIL_API_KEY``, stripped ("" when neither is set)."""
    return (api_key or current().api_key).strip()


def base_url_or_environment(base_url: str | None) -> str:
    """``base_url``, else ``PROMPTRAIL_BASE_URL``, else the local collector's default URL."""
    return base_url or current().base_url or DEFAULT_BASE_URL


# An environment's name as the collector takes it (docs/api-notes.md, Environments); names
# starting ``promptrail-`` are the service's own.
_ENVIRONMENT = re.compile(r"[a-z0-9_-]{1,40}")
DEFAULT_ENVIRONMENT = "production"


def environment_setting(environment: str | None) -> str:
    """The environment every captured record is logged in: ``environment``, else
    ``PROMPTRAIL_ENVIRONMENT``, else ``production``.

    Refused (ValueError naming ``environment``) when it is not 1-40 of ``[a-z0-9_-]`` or is
    one of the service's own ``promptrail-...`` names: the collector would refuse every
    record.
    """
    value = environment if environment is not None else current().environment
    value = value or DEFAULT_ENVIRONMENT
    if not _ENVIRONMENT.fullmatch(value):
        raise ValueError(
            f"environment must be 1-40 characters of a-z, 0-9, _ and - (got {value!r}; "
            "PROMPTRAIL_ENVIRONMENT when not passed)"
        )
    if value.startswith("promptrail-"):
        raise ValueError(
            f"environment {value!r}: names starting 'promptrail-' are the service's own"
        )
    return value


def byte_setting(value: int | None, variable: str, default: int, name: str) -> int:
    """A size bound: ``value``, else the environment ``variable``, else ``default``.

    Refused (ValueError) when it is not a number of bytes or not more than 0; ``name`` is the
    ``init`` argument the message names.
    """
    if value is None:
        text = current().text_of(variable)
        try:
            value = int(text) if text else default
        except ValueError:
            raise ValueError(f"{variable} must be a number of bytes, not {text!r}") from None
    if value <= 0:
        raise ValueError(f"{name} must be more than 0")
    return value


def default_cache_dir() -> Path:
    """The user's cache directory + ``/promptrail`` (XDG, macOS's Caches, LocalAppData)."""
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or str(Path.home() / "AppData" / "Local")
    elif sys.platform == "darwin":
        base = str(Path.home() / "Library" / "Caches")
    else:
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "promptrail"
