"""The prompt registry on ClickHouse: names, immutable versions, heads and labels.

One room per concern, so a change touches the module it is about:

- :mod:`.tables` the DDL of the four tables and the heads' view;
- :mod:`.rows` the row types and their encoding (a version's fields in one place);
- :mod:`.group_commit` the embedded store's slot table, on the write path's group commit
  and journal (:mod:`..writes`);
- :mod:`.base` the shared client, table names and insert plumbing;
- :mod:`.reads` and :mod:`.writes` the queries, which :class:`PromptStore` joins.
"""

from __future__ import annotations

from .group_commit import journal_path
from .reads import PromptReads
from .rows import (
    ListFilter,
    LivePrompt,
    LiveState,
    PromptHeadRow,
    PromptRef,
    PromptVersionRow,
    RegistryChanges,
)
from .tables import PROMPT_HEADS, PROMPT_HEADS_MV, PROMPT_LABELS, PROMPT_VERSIONS, PROMPTS
from .writes import PromptWrites


class PromptStore(PromptWrites, PromptReads):
    """Every query of the prompt tables: the writes and the reads over one client."""


__all__ = [
    "PROMPTS",
    "PROMPT_HEADS",
    "PROMPT_HEADS_MV",
    "PROMPT_LABELS",
    "PROMPT_VERSIONS",
    "ListFilter",
    "LivePrompt",
    "LiveState",
    "PromptHeadRow",
    "PromptRef",
    "PromptStore",
    "PromptVersionRow",
    "RegistryChanges",
    "journal_path",
]
