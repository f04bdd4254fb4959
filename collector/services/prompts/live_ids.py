"""Which prompt and version a path addresses, per project, kept in memory on the embedded store.

A cold read of a version first resolves the path's name (or id) to the live prompt's id, a
``prompts FINAL`` lookup, and then picks the version: the newest by sorting the prompt's
versions, a label's through a ``prompt_labels FINAL`` subquery. On the embedded store this
process is the only writer, so it can know all of that exactly: on the first lookup of a
project the index reads every live prompt of the project (its id, newest version number and
labels), and from then on every write that changes an answer updates it as it is stored. A cold
read is then one point read of ``prompt_versions`` on its full sorting key.

Collectors sharing a ClickHouse server do not see each other's writes as they happen, so there
the index is *polled* (:meth:`LiveIdIndex.poll`): every few moments it reads what any writer
stored in its loaded projects since its last poll and applies it, and a read it cannot answer
(a prompt, version or label it does not know) asks the store rather than answering "not found"
from a possibly stale index. A write of another collector reaches this index within one poll
interval plus one poll's duration (collector/services/prompts/DESIGN.md, "Freshness across
collectors").

The writes that update the index: a create's name claim, a delete, a new version (update or
rollback; also a version another writer won, seen by the loser's read-back), and a label move or
removal. Exactness under concurrency:

- each write is stored first and applied to the index afterwards, under one lock per project,
  so the index applies them in the order the store took them. Claims, deletes and label moves
  are stored under that lock too; a version insert is not (the store's compare-and-set orders
  racing versions), but its apply is, and it raises the newest number only (a max), so versions
  applied in any order give the same index. A version is applied only after its insert is
  durable, a label only after its version was read back from the store, and a label's apply
  raises the newest number to its version too, so a label never points past the versions the
  index knows are stored;
- label moves are last-writer-wins by ``updated_at`` in the store; under the lock each move takes
  a stamp later than every earlier move of the project (:meth:`LiveIdIndex.stamp`), so the
  store's winner is the index's last apply;
- while a project loads, every write applied to it is also recorded, and replayed in order on
  what the load read before it is installed: a write the load's read already saw is applied
  twice, which changes nothing (claims take the newest generation, versions raise the newest
  number only, label moves apply in the order the store took them), and one it did not see
  is in the replay. So a load under a steady stream of writes is installed at once (it used
  to be dropped whenever a write landed during its read: under 8 writing clients the index
  was almost never loaded and every write read the store). A write that lands after the
  install is applied to the installed index;
- a write that fails between its store and its apply drops the project's index (the next read
  loads it again), so an unknown outcome never leaves it stale.

This module holds the index's locks, loads, replays, polls and eviction; one project's state
and its idempotent changes are :mod:`.live_state`'s.
"""

from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import TypeVar

from ...store.prompts import LiveState, PromptRef, PromptVersionRow, RegistryChanges
from .live_state import IndexedProject

# A project with more live prompts than this is not indexed: its reads ask the store.
_MAX_PROJECT_PROMPTS = 200_000
# Live prompts kept over all indexed projects; the least recently used projects go first.
_MAX_TOTAL_PROMPTS = 1_000_000
_TICK = timedelta(microseconds=1)
# Writers of one name (a create) or one prompt (a new version) take one of these locks, picked
# by hash: writers of different prompts rarely share one, so they are not serialised.
_STRIPES = 256

Loader = Callable[[str, int], LiveState | None]
# Reads what was stored in some projects since a time (``PromptStore.changes``).
ChangeReader = Callable[[list[str], datetime], RegistryChanges]
T = TypeVar("T")


class LiveIdIndex:
    """Name/id -> live prompt, newest version and labels per project, exact where this process
    is the only writer."""

    def __init__(
        self,
        enabled: bool,
        max_project_prompts: int = _MAX_PROJECT_PROMPTS,
        max_total_prompts: int = _MAX_TOTAL_PROMPTS,
        polled: bool = False,
    ) -> None:
        self.enabled = enabled
        # Other processes write the store too (a ClickHouse server): :meth:`poll` keeps the
        # index fresh, and what it does not know is asked of the store (see the module doc).
        self.polled = polled
        self._max_project = max_project_prompts
        self._max_total = max_total_prompts
        self._projects: OrderedDict[str, IndexedProject] = OrderedDict()
        self._total = 0
        # Bumped by every forget (and poll): a load under way when the project is forgotten
        # is dropped, since a write of unknown outcome may be missing from what it read.
        self._generations: defaultdict[str, int] = defaultdict(int)
        # The writes applied to each project while it loads, replayed on what the load read.
        self._recording: dict[str, list[Callable[[IndexedProject], None]]] = {}
        self._stamps: dict[str, datetime] = {}
        self._lock = threading.Lock()
        self._write_locks: defaultdict[str, threading.Lock] = defaultdict(threading.Lock)
        self._load_locks: defaultdict[str, threading.Lock] = defaultdict(threading.Lock)
        self._stripes = [threading.Lock() for _ in range(_STRIPES)]

    # -- reads -----------------------------------------------------------------------------

    def resolve(self, project: str, ref: PromptRef, load: Loader) -> tuple[bool, str | None]:
        """Return (known, live prompt id or None) for a path's prompt.

        ``known`` is False when the index cannot answer (disabled, the project too big, or a
        write or another thread's load under way); the caller then asks the store.
        ``load(project, limit)`` returns every live prompt of the project, claims in
        (name, generation) order, or None past ``limit``.
        """
        return self._answer(project, load, lambda indexed: indexed.lookup(ref))

    def locate(
        self, project: str, ref: PromptRef, number: int | None, label: str | None, load: Loader
    ) -> tuple[bool, str | None, int | None]:
        """Return (known, live prompt id or None, version number or None) for a version read.

        The version is the newest when neither ``number`` nor ``label`` is given. It is None
        when the prompt is live but has no such version or label (a stored version the index
        does not know yet is one whose write has not returned).
        """
        known, found = self._answer(
            project, load, lambda indexed: indexed.locate(ref, number, label)
        )
        if not known or found is None:
            return known, None, None
        return True, found[0], found[1]

    def find(
        self, project: str, ref: PromptRef, number: int | None, label: str | None, load: Loader
    ) -> tuple[bool, str | None, int | None, PromptVersionRow | None]:
        """Like :meth:`locate`, with the version's row when the index holds it (the newest
        and labeled versions): such a read needs no query at all."""
        known, found = self._answer(
            project, load, lambda indexed: indexed.located_row(ref, number, label)
        )
        if not known or found is None:
            return known, None, None, None
        return True, found[0], found[1], found[2]

    def peek(
        self, project: str, ref: PromptRef, number: int | None, label: str | None
    ) -> PromptVersionRow | None:
        """The row a read asks for if the project is loaded and holds it; never loads."""
        if not self.enabled:
            return None
        with self._lock:
            indexed = self._projects.get(project)
            return indexed.located_row(ref, number, label)[2] if indexed is not None else None

    def claim_state(self, project: str, name: str, load: Loader) -> tuple[bool, int, str | None]:
        """Return (known, highest generation the name claimed, live prompt id or None): what a
        create needs to decide, from memory."""
        known, found = self._answer(
            project,
            load,
            lambda indexed: (indexed.generations.get(name, 0), indexed.by_name.get(name)),
        )
        if not known or found is None:
            return False, 0, None
        return True, found[0], found[1]

    def newest_rows(self, project: str, load: Loader) -> list[PromptVersionRow] | None:
        """Return the newest version of every live prompt of the project (what the list shows),
        or None when the index cannot answer or does not hold every such row."""

        def rows(indexed: IndexedProject) -> list[PromptVersionRow] | None:
            found = [live.rows.get(live.newest) for live in indexed.prompts.values()]
            return None if any(row is None for row in found) else [r for r in found if r]

        return self._answer(project, load, rows)[1]

    @contextlib.contextmanager
    def holding(self, project: str, key: str) -> Iterator[None]:
        """Serialise the writers of one name or prompt (``key``) of a project, so they decide
        from state no other writer of it is changing; writers of other keys run at once.

        Unlike :meth:`writing` it drops nothing when the block raises: the writer applies (or
        forgets) each store write itself, inside :meth:`writing`.
        """
        with self._stripes[hash((project, key)) % _STRIPES]:
            yield

    def _answer(
        self, project: str, load: Loader, ask: Callable[[IndexedProject], T]
    ) -> tuple[bool, T | None]:
        """Apply ``ask`` to the project's index, loading it first if needed."""
        if not self.enabled:
            return False, None
        with self._lock:
            indexed = self._projects.get(project)
            if indexed is not None:
                self._projects.move_to_end(project)
                return True, ask(indexed)
            generation = self._generations[project]
            loading = self._load_locks[project]
        if not loading.acquire(blocking=False):
            return False, None
        with self._lock:
            # Recorded from before the read starts: a write the read misses is replayed.
            self._recording[project] = []
        try:
            started = datetime.now(UTC)
            state = load(project, self._max_project)
            if state is None:
                return False, None
            built = IndexedProject.loaded(state, started)
            if built is None:
                return False, None  # a claim without a version: not a state to trust
            with self._lock:
                replay = self._recording.pop(project, [])
                if self._generations[project] != generation or project in self._projects:
                    return False, None
                for change in replay:
                    change(built)
                if len(built.prompts) > self._max_project:
                    return False, None
                self._projects[project] = built
                if state.label_stamp is not None:
                    self._stamps[project] = max(
                        state.label_stamp, self._stamps.get(project, state.label_stamp)
                    )
                self._total += len(built.prompts)
                self._evict()
                return True, ask(built)
        finally:
            with self._lock:
                self._recording.pop(project, None)
            loading.release()

    # -- writes ----------------------------------------------------------------------------

    @contextlib.contextmanager
    def writing(self, project: str) -> Iterator[None]:
        """Hold the project's write lock around a write and its index update.

        If the block raises, the write may or may not be stored: the project's index is
        dropped, and the next read loads it again. Expected refusals (a name taken, a prompt
        gone) belong after the block.
        """
        if not self.enabled:
            yield
            return
        with self._lock:
            lock = self._write_locks[project]
        with lock:
            try:
                yield
            except BaseException:
                self.forget(project)
                raise

    def stamp(self, project: str) -> datetime:
        """Return the time of a label move: later than every earlier move of the project.

        Call inside :meth:`writing`, so the store's last-writer-wins order is the order in which
        the index applies the moves.
        """
        now = datetime.now(UTC)
        if not self.enabled:
            return now
        with self._lock:
            last = self._stamps.get(project)
            if last is not None and now <= last:
                now = last + _TICK
            self._stamps[project] = now
            return now

    def created(
        self,
        project: str,
        name: str,
        prompt_id: str,
        row: PromptVersionRow | None = None,
        generation: int | None = None,
    ) -> None:
        """Record a stored claim of ``name``'s ``generation`` by a new prompt, at version 1
        (``row``; under :meth:`writing` or :meth:`holding` the name)."""
        self._apply(
            project,
            lambda indexed: indexed.created(name, prompt_id, 1, row, generation),
        )

    def deleted(self, project: str, name: str, prompt_id: str) -> None:
        """Record a stored soft delete of ``prompt_id`` (inside :meth:`writing`)."""
        self._apply(project, lambda indexed: indexed.deleted(name, prompt_id, self.polled))

    def stored_version(
        self, project: str, prompt_id: str, version: int, row: PromptVersionRow | None = None
    ) -> None:
        """Record that ``version`` of the prompt (``row``, if known) is durably stored."""
        self._apply(project, lambda indexed: indexed.stored(prompt_id, version, row))

    def labeled(
        self,
        project: str,
        prompt_id: str,
        label: str,
        version: int,
        row: PromptVersionRow | None = None,
        at: datetime | None = None,
    ) -> None:
        """Record a stored label move to a stored ``version`` (``row``, if known; 0 removes the
        label; ``at``, its ``updated_at``; inside :meth:`writing`)."""
        self._apply(project, lambda indexed: indexed.labeled(prompt_id, label, version, row, at))

    def forget(self, project: str) -> None:
        """Drop the project's index (loads in flight are discarded too)."""
        with self._lock:
            self._generations[project] += 1
            dropped = self._projects.pop(project, None)
            if dropped is not None:
                self._total -= len(dropped.prompts)

    def _apply(self, project: str, change: Callable[[IndexedProject], None]) -> None:
        """Apply ``change`` to the project's index if loaded, or record it for the load under
        way."""
        with self._lock:
            recording = self._recording.get(project)
            if recording is not None:
                recording.append(change)
            indexed = self._projects.get(project)
            if indexed is not None:
                self._total -= len(indexed.prompts)
                change(indexed)
                self._total += len(indexed.prompts)
                if len(indexed.prompts) > self._max_project:
                    # Grown past the limit a load refuses: read it from the store from now on.
                    del self._projects[project]
                    self._total -= len(indexed.prompts)
                self._evict()

    def poll(self, read: ChangeReader, overlap: timedelta) -> int:
        """Apply what any writer stored in the loaded projects since their last read; return
        how many rows the poll applied.

        One ``read`` for every loaded project, from ``overlap`` before the oldest of their
        last reads (the rows' times are their writers' clocks, and a row may be stored a
        little after its time). Applying a row twice changes nothing: claims of a name apply
        in generation order, versions raise the newest number only, labels take the store's
        current pointer. The poll holds the write locks of the projects it reads (in sorted
        order), so no write of this process lands between its read and its apply: a write it
        did not see comes after, and is applied after it.
        """
        if not self.enabled:
            return 0
        with self._lock:
            names = sorted(self._projects)
            locks = [self._write_locks[project] for project in names]
        if not names:
            return 0
        with contextlib.ExitStack() as held:
            for lock in locks:
                held.enter_context(lock)
            with self._lock:
                loaded = {p: self._projects[p] for p in names if p in self._projects}
            if not loaded:
                return 0
            started = datetime.now(UTC)
            since = min(indexed.polled_at for indexed in loaded.values()) - overlap
            found = read(sorted(loaded), since)
            rows = {(p, row.prompt_id, row.version): row for p, row in found.versions}
            # Each project's rows, in the order read (claims by name and generation).
            claims_of: defaultdict[str, list[tuple[str, int, str, bool]]] = defaultdict(list)
            for project, name, generation, prompt_id, deleted in found.claims:
                claims_of[project].append((name, generation, prompt_id, deleted))
            versions_of: defaultdict[str, list[PromptVersionRow]] = defaultdict(list)
            for project, version_row in found.versions:
                versions_of[project].append(version_row)
            labels_of: defaultdict[str, list[tuple[str, str, int, datetime]]] = defaultdict(list)
            for project, prompt_id, label, version, at in found.labels:
                labels_of[project].append((prompt_id, label, version, at))
            applied = 0
            with self._lock:
                for project, indexed in loaded.items():
                    if self._projects.get(project) is not indexed:
                        continue  # dropped meanwhile: its next load reads the store
                    claims = claims_of.get(project, [])
                    versions = versions_of.get(project, [])
                    labels = labels_of.get(project, [])
                    indexed.polled_at = started
                    if not (claims or versions or labels):
                        continue
                    self._generations[project] += 1
                    self._total -= len(indexed.prompts)
                    for name, generation, prompt_id, deleted in claims:
                        indexed.polled_claim(name, generation, prompt_id, deleted)
                    for row in versions:
                        indexed.stored(row.prompt_id, row.version, row)
                    for prompt_id, label, version, at in labels:
                        target = rows.get((project, prompt_id, version))
                        indexed.labeled(prompt_id, label, version, target, at)
                        # This process's next move must win over the moves it has seen.
                        self._stamps[project] = max(at, self._stamps.get(project, at))
                    applied += len(claims) + len(versions) + len(labels)
                    self._total += len(indexed.prompts)
                    if len(indexed.prompts) > self._max_project:
                        del self._projects[project]
                        self._total -= len(indexed.prompts)
                self._evict()
            return applied

    def reload(self, load: Loader) -> int:
        """Read every loaded project afresh from the store (``load``); return how many loaded.

        A polled index's safety net: a row no poll read (its writer's clock or a replica
        further behind than the poll's overlap) is in the store, so the reload has it. While a
        project loads, its reads ask the store.
        """
        if not self.enabled:
            return 0
        with self._lock:
            names = list(self._projects)
        for project in names:
            self.forget(project)
            self._answer(project, load, lambda indexed: None)
        return len(names)

    def indexed(self, project: str) -> bool:
        """Whether the project's live prompts are in memory (for tests and diagnostics)."""
        with self._lock:
            return project in self._projects

    def describe(
        self, project: str
    ) -> tuple[dict[str, str], dict[str, tuple[int, dict[str, int]]]] | None:
        """Return the project's index as (name -> id, id -> (newest, labels)), or None if it is
        not loaded (for tests and diagnostics)."""
        with self._lock:
            indexed = self._projects.get(project)
            if indexed is None:
                return None
            return dict(indexed.by_name), {
                prompt_id: (live.newest, dict(live.labels or {}))
                for prompt_id, live in indexed.prompts.items()
            }

    def _evict(self) -> None:
        """Drop the least recently used projects past the total (holding ``_lock``)."""
        while self._total > self._max_total and len(self._projects) > 1:
            _, dropped = self._projects.popitem(last=False)
            self._total -= len(dropped.prompts)
