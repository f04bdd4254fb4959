"""The REST client's resources: ``client.prompts`` and ``client.requests``."""

from __future__ import annotations

from .prompts import AsyncPrompts, Prompts
from .requests import AsyncRequests, Requests

__all__ = ["AsyncPrompts", "AsyncRequests", "Prompts", "Requests"]
