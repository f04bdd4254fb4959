"""The REST client's resources: ``client.prompts``, ``client.requests`` and ``client.scores``."""

from __future__ import annotations

from .prompts import AsyncPrompts, Prompts
from .requests import AsyncRequests, Requests
from .scores import AsyncScores, Scores

__all__ = ["AsyncPrompts", "AsyncRequests", "AsyncScores", "Prompts", "Requests", "Scores"]
