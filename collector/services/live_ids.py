"""Which prompt a name or id addresses, per project, kept in memory on the embedded store.

A cold read of a version first resolves the path's name (or id) to the live prompt's id, a
``prompts FINAL`` lookup that costs about half of the read. On the embedded store this process
is the only writer, so it can know the answer exactly: on the first lookup of a project the
index reads every live claim of the project in one query, and from then on the two writes that
change what a name addresses, a create's claim and a delete, update it as they are stored.
Collectors sharing a ClickHouse server do not see each other's writes, so there the index is
disabled and every read asks the store.

Exactness under concurrency:

- the create claim and the delete are each stored and applied to the index under one lock per
  project, so the index applies them in the order the store took them;
- a project's load records the project's generation, which every such write bumps, and installs
  what it read only if no write happened meanwhile. A write that lands after the install is
  applied to the installed index, and applying a write twice changes nothing.
"""

from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from ..store.prompts import PromptRef

# A project with more live prompts than this is not indexed: its reads ask the store.
_MAX_PROJECT_PROMPTS = 200_000
# Live prompts kept over all indexed projects; the least recently used projects go first.
_MAX_TOTAL_PROMPTS = 1_000_000

Loader = Callable[[str, int], list[tuple[str, str]] | None]


@dataclass
class _Project:
    """The live prompts of one project: name -> id, and the set of live ids."""

    by_name: dict[str, str] = field(default_factory=dict)
    ids: set[str] = field(default_factory=set)

    def lookup(self, ref: PromptRef) -> str | None:
        if ref.by_id:
            return ref.value if ref.value in self.ids else None
        return self.by_name.get(ref.value)

    def created(self, name: str, prompt_id: str) -> None:
        self.by_name[name] = prompt_id
        self.ids.add(prompt_id)

    def deleted(self, name: str, prompt_id: str) -> None:
        if self.by_name.get(name) == prompt_id:
            del self.by_name[name]
        self.ids.discard(prompt_id)


class LiveIdIndex:
    """Name/id -> live prompt id per project, exact where this process is the only writer."""

    def __init__(
        self,
        enabled: bool,
        max_project_prompts: int = _MAX_PROJECT_PROMPTS,
        max_total_prompts: int = _MAX_TOTAL_PROMPTS,
    ) -> None:
        self.enabled = enabled
        self._max_project = max_project_prompts
        self._max_total = max_total_prompts
        self._projects: OrderedDict[str, _Project] = OrderedDict()
        self._total = 0
        self._generations: defaultdict[str, int] = defaultdict(int)
        self._lock = threading.Lock()
        self._write_locks: defaultdict[str, threading.Lock] = defaultdict(threading.Lock)
        self._load_locks: defaultdict[str, threading.Lock] = defaultdict(threading.Lock)

    def resolve(self, project: str, ref: PromptRef, load: Loader) -> tuple[bool, str | None]:
        """Return (known, live prompt id or None) for a path's prompt.

        ``known`` is False when the index cannot answer (disabled, the project too big, or a
        write or another thread's load under way); the caller then asks the store.
        ``load(project, limit)`` returns every live (name, prompt_id) claim of the project, in
        (name, generation) order, or None past ``limit``.
        """
        if not self.enabled:
            return False, None
        with self._lock:
            indexed = self._projects.get(project)
            if indexed is not None:
                self._projects.move_to_end(project)
                return True, indexed.lookup(ref)
            generation = self._generations[project]
            loading = self._load_locks[project]
        if not loading.acquire(blocking=False):
            return False, None
        try:
            claims = load(project, self._max_project)
            if claims is None:
                return False, None
            built = _Project()
            for name, prompt_id in claims:
                built.created(name, prompt_id)
            with self._lock:
                if self._generations[project] != generation or project in self._projects:
                    return False, None
                self._projects[project] = built
                self._total += len(built.ids)
                self._evict()
                return True, built.lookup(ref)
        finally:
            loading.release()

    @contextlib.contextmanager
    def writing(self, project: str) -> Iterator[None]:
        """Hold the project's write lock around a claim or delete and its index update."""
        if not self.enabled:
            yield
            return
        with self._lock:
            lock = self._write_locks[project]
        with lock:
            yield

    def created(self, project: str, name: str, prompt_id: str) -> None:
        """Record a stored claim of ``name`` by ``prompt_id`` (inside :meth:`writing`)."""
        self._apply(project, lambda indexed: indexed.created(name, prompt_id))

    def deleted(self, project: str, name: str, prompt_id: str) -> None:
        """Record a stored soft delete of ``prompt_id`` (inside :meth:`writing`)."""
        self._apply(project, lambda indexed: indexed.deleted(name, prompt_id))

    def _apply(self, project: str, change: Callable[[_Project], None]) -> None:
        """Bump the project's generation and apply ``change`` to its index, if loaded."""
        with self._lock:
            self._generations[project] += 1
            indexed = self._projects.get(project)
            if indexed is not None:
                self._total -= len(indexed.ids)
                change(indexed)
                self._total += len(indexed.ids)
                self._evict()

    def indexed(self, project: str) -> bool:
        """Whether the project's live prompts are in memory (for tests and diagnostics)."""
        with self._lock:
            return project in self._projects

    def _evict(self) -> None:
        """Drop the least recently used projects past the total (holding ``_lock``)."""
        while self._total > self._max_total and len(self._projects) > 1:
            _, dropped = self._projects.popitem(last=False)
            self._total -= len(dropped.ids)
