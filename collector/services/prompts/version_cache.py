"""Prompt version reads kept in memory until this process writes to the project.

Get and template fetches are the hot reads of the registry; each costs a ClickHouse round trip
(~5-10 ms on the embedded store). The cache is exact only where this process is the only
writer, so it is enabled for the embedded store alone (one process owns it); collectors
sharing a ClickHouse server read through every time.

Exactness under concurrency: every write bumps the project's generation after it is stored;
a read keeps its result only if the generation did not move while it was reading. Each entry
carries the generation it was read at, and a lookup serves it only at that generation: a
write forgets its project's rows in O(1), where a scan of every entry (20,000 at most) held
the lock that every read takes for ~1-2 ms per write. Forgotten rows age out of the LRU.
"""

from __future__ import annotations

import threading
from collections import OrderedDict, defaultdict
from collections.abc import Hashable

from ...store.prompts import PromptVersionRow

_MAX_ENTRIES = 20_000


class VersionCache:
    """LRU of version lookups per project, cleared by the project's writes."""

    def __init__(self, enabled: bool, max_entries: int = _MAX_ENTRIES) -> None:
        self.enabled = enabled
        self._max = max_entries
        self._entries: OrderedDict[tuple[str, Hashable], tuple[int, PromptVersionRow]] = (
            OrderedDict()
        )
        self._generations: defaultdict[str, int] = defaultdict(int)
        self._lock = threading.Lock()

    def lookup(self, project: str, key: Hashable) -> tuple[int, PromptVersionRow | None]:
        """Return the project's generation and the cached row, if any."""
        with self._lock:
            generation = self._generations[project]
            entry = self._entries.get((project, key)) if self.enabled else None
            if entry is None:
                return generation, None
            if entry[0] != generation:  # read before a write since: forgotten
                del self._entries[(project, key)]
                return generation, None
            self._entries.move_to_end((project, key))
            return generation, entry[1]

    def keep(self, project: str, key: Hashable, generation: int, row: PromptVersionRow) -> None:
        """Cache a row read at ``generation`` unless the project was written since."""
        if not self.enabled:
            return
        with self._lock:
            if self._generations[project] != generation:
                return
            self._entries[(project, key)] = (generation, row)
            self._entries.move_to_end((project, key))
            while len(self._entries) > self._max:
                self._entries.popitem(last=False)

    def invalidate(self, project: str) -> None:
        """Forget the project's rows (after any write to it)."""
        with self._lock:
            self._generations[project] += 1
