"""Deterministic sampling of a rule's targets (docs/api-notes.md, "Online evaluation").

A target is in a rule's sample when a hash of (rule id, target id), read as a fraction in
[0, 1), falls under the rule's ``sampling``: the live path, a retry, a restart and a backfill
all decide alike, with no state kept.
"""

from __future__ import annotations

import hashlib

_SCALE = float(1 << 64)


def sample_point(rule_id: str, target_id: str) -> float:
    """Where (rule, target) falls in [0, 1): the first 8 bytes of SHA-256 of both ids."""
    digest = hashlib.sha256(f"{rule_id}\x00{target_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / _SCALE


def in_sample(rule_id: str, target_id: str, sampling: float) -> bool:
    """Whether the target is in the rule's sample (``sampling`` 1 takes every target, 0
    none)."""
    return sample_point(rule_id, target_id) < sampling
