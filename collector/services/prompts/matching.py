"""Linking records that name no prompt to the chat version their messages match.

A record that arrives without a ``prompt_name`` (an OTLP span of another SDK, messages an app
built by hand) whose ``input`` is a list of chat messages is compared with the chat versions of
its project, compiled into patterns (:mod:`.matching_patterns`: literal text equal, a variable
or a section any text, a placeholder any number of messages, roles equal and in order). The
most recently created matching version wins, whichever prompt it belongs to
(docs/api-notes.md, "Chat prompts").

Cost: nothing is read or compiled for a batch without a candidate record, nor matched for a
project without chat versions. Each version is filed under its first message's role and the
text before its first tag, so a record is tried only against the versions whose first message
could be its first message (plus those that begin with a placeholder); a bucket is compiled
the first time a record needs it (:mod:`.matching_index`).

Warm-up: a collector whose copies stay exact (an embedded store, or a server it polls) reads
the chat versions of every project that has an API key at start, before it serves, in one
read (:meth:`ChatLinks.start_warming`), then compiles them in the background; a version
this collector stores later is compiled on that write. A batch finds them read, and compiles
at most the buckets the background pass has not reached. A
candidate record that arrives while that read is under way (a caller of the services before
the collector serves) waits for it, never a second read: it is linked before it is stored,
since a stored record's row is never written again.

Freshness: a project the warm-up did not read is read from the store on its first candidate
record (one read of its versions, claims and labels: ``PromptStore.changes`` from the epoch).
Either way its copy is then kept up to date by the registry's own writes on this collector (a
create or new version is added, a delete drops the prompt, a write of unknown outcome drops the
project so it is read again), and on a ClickHouse server by the registry's poll
(:meth:`ChatLinks.poll_with`: the same read the live-id index polls with, so the bound is the
same, about one poll interval), with the 10-minute reload as the safety net. Without polling on
a server, a project is read again when its copy is older than ``max_age`` seconds (and nothing
is warmed: it would be read again seconds later).
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Collection, Sequence
from datetime import UTC, datetime, timedelta
from time import monotonic
from typing import Any

from ...store.prompts import PromptStore, PromptVersionRow, RegistryChanges
from .matching_index import ProjectVersions
from .matching_patterns import compile_version, record_messages

# Versions kept over all projects; the least recently used projects are dropped first.
_MAX_PATTERNS = 200_000
# Projects kept (most hold no chat version: an empty entry says so without a read).
_MAX_PROJECTS = 100_000
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

_log = logging.getLogger(__name__)
# Reads what was stored in some projects since a time (``PromptStore.changes``).
ChangeReader = Callable[[list[str], datetime], RegistryChanges]


class ChatLinks:
    """The chat versions of each project, compiled to link the records that name no prompt."""

    def __init__(
        self,
        store: PromptStore,
        max_age: float | None = None,
        max_patterns: int = _MAX_PATTERNS,
    ) -> None:
        """Read versions from ``store``; ``max_age`` (seconds): read a project again when its
        copy is older (a server without polling; None: never, its writes and polls keep it)."""
        self._store = store
        self._max_age = max_age
        self._max_patterns = max_patterns
        self._projects: OrderedDict[str, ProjectVersions] = OrderedDict()
        self._total = 0  # versions held over all projects
        self._lock = threading.Lock()
        self._load_locks: defaultdict[str, threading.Lock] = defaultdict(threading.Lock)
        # Changes applied while a project loads, replayed on what the load read.
        self._recording: dict[str, list[Callable[[ProjectVersions], None]]] = {}
        # Set while the warm-up's read is under way: a project not held yet waits for it.
        self._warming: threading.Event | None = None
        self.warmed = threading.Event()  # the warm-up's read is over (read, failed or skipped)
        self._warmer: threading.Thread | None = None
        self._stopping = threading.Event()

    # -- warm-up ----------------------------------------------------------------------------

    def start_warming(self, projects: Callable[[], Collection[str]]) -> threading.Thread | None:
        """Read the chat versions of ``projects()`` (every project with a key) now, in one
        read, then compile them in a thread (returned); None (nothing read) where copies are
        read again anyway. Called before the collector serves, so no record waits for it."""
        if self._max_age is not None:
            self.warmed.set()
            return None
        held = self.warm(projects)
        thread = threading.Thread(
            target=self._compile, args=(held,), name="promptrail-chat-links", daemon=True
        )
        self._warmer = thread
        thread.start()
        return thread

    def stop(self) -> None:
        """Stop the start's background compiling and wait for its thread, so the store can
        be closed under it."""
        self._stopping.set()
        if self._warmer is not None:
            self._warmer.join()

    def warm(self, projects: Callable[[], Collection[str]]) -> list[ProjectVersions]:
        """Read the versions of ``projects()`` in one read and hold them (a record of one of
        them needing them meanwhile waits for this read); return them, to compile."""
        with self._lock:
            self._warming = threading.Event()
        held: list[ProjectVersions] = []
        try:
            held = self._warm_read(projects)
        except Exception:
            # As a batch's own read failing: each project is read on its first candidate.
            _log.warning("chat versions not read at start; read on first use", exc_info=True)
        finally:
            with self._lock:
                warming, self._warming = self._warming, None
            if warming is not None:
                warming.set()
            self.warmed.set()
        return held

    def _compile(self, held: list[ProjectVersions]) -> None:
        for loaded in held:
            if self._stopping.is_set():
                return
            loaded.index.compile_all(self._stopping)

    def _warm_read(self, projects: Callable[[], Collection[str]]) -> list[ProjectVersions]:
        names = sorted(projects())
        with self._lock:
            # A project loading on its own (a batch came first) keeps that load.
            wanted = [
                name for name in names if name not in self._recording and name not in self._projects
            ]
            for name in wanted:
                self._recording[name] = []
        try:
            loaded = self._read(wanted) if wanted else {}
        except BaseException:
            with self._lock:
                for name in wanted:
                    del self._recording[name]
            raise
        with self._lock:
            for name in wanted:
                self._install(name, loaded[name])
        return list(loaded.values())

    # -- linking ----------------------------------------------------------------------------

    def link(self, project: str, rows: Sequence[dict[str, Any]]) -> int:
        """Link each stored-values row (``ingest.record_values``) that names no prompt and
        whose input matches a chat version of the project; return how many were linked.

        A linked row takes the version's prompt name and number and ``metadata.prompt_link =
        "matched"``, and, when it has none, ``input_variables`` from the text each plain
        variable stood for."""
        candidates = [
            row for row in rows if not row["prompt_name"] and type(row["input"]) in (list, dict)
        ]
        if not candidates:
            return 0
        try:
            index = self._project(project).index
        except Exception:
            # Linking is a convenience: a store that cannot answer now must not cost the
            # records, which are stored unlinked (the next batch tries the read again).
            _log.warning(
                "chat versions of project %s unreadable; its records are stored unlinked",
                project,
                exc_info=True,
            )
            return 0
        if index.empty:
            return 0
        linked = 0
        for row in candidates:
            messages = record_messages(row["input"])
            if messages is None:
                continue
            found = index.find(messages)
            if found is None:
                continue
            version, values = found
            row["prompt_name"] = version.name
            row["version"] = version.version
            row["metadata"] = {**(row["metadata"] or {}), "prompt_link": "matched"}
            if not row["input_variables"]:
                row["input_variables"] = values
            linked += 1
        return linked

    def compiled(self, project: str) -> int | None:
        """How many of the project's versions are compiled (None: the project is not held)."""
        with self._lock:
            held = self._projects.get(project)
        return None if held is None else held.index.held_compiled()

    def _project(self, project: str) -> ProjectVersions:
        while True:
            with self._lock:
                held = self._projects.get(project)
                if held is not None and not self._expired(held):
                    self._projects.move_to_end(project)
                    return held
                warming = self._warming
            if warming is not None:
                # The warm-up is reading every project's versions: wait for that read rather
                # than read the same rows a second time.
                warming.wait()
                continue
            loaded = self._load(project)
            if loaded is not None:
                return loaded

    def _load(self, project: str) -> ProjectVersions | None:
        """Read the project alone; None when a warm-up began meanwhile (wait for it)."""
        with self._load_locks[project]:
            with self._lock:
                held = self._projects.get(project)
                if held is not None and not self._expired(held):
                    return held
                if self._warming is not None:
                    return None
                self._recording[project] = []
            try:
                loaded = self._read([project])[project]
            except BaseException:
                with self._lock:
                    del self._recording[project]
                raise
            with self._lock:
                self._install(project, loaded)
            return loaded

    def _install(self, project: str, loaded: ProjectVersions) -> None:
        """Replay the changes made during its read on ``loaded`` and hold it (under _lock)."""
        for change in self._recording.pop(project):
            change(loaded)
        replaced = self._projects.pop(project, None)
        self._total -= len(replaced.versions) if replaced is not None else 0
        self._projects[project] = loaded
        self._total += len(loaded.versions)
        self._evict()

    def _expired(self, held: ProjectVersions) -> bool:
        if held.stale:
            return True
        return self._max_age is not None and monotonic() - held.loaded_at > self._max_age

    def _read(self, projects: list[str]) -> dict[str, ProjectVersions]:
        """Read the projects' versions and deleted prompts from the store (one read)."""
        started = datetime.now(UTC)
        now = monotonic()
        loaded = {name: ProjectVersions(polled_at=started, loaded_at=now) for name in projects}
        found = self._store.changes(projects, _EPOCH)
        gone: defaultdict[str, list[str]] = defaultdict(list)
        for project, _, _, prompt_id, deleted in found.claims:
            if deleted:
                gone[project].append(prompt_id)
        rows: defaultdict[str, list[PromptVersionRow]] = defaultdict(list)
        for project, row in found.versions:
            rows[project].append(row)
        for name, held in loaded.items():
            held.drop(gone.get(name, []))
            held.add(rows.get(name, []))
        return loaded

    # -- what the registry's writes and polls tell it ----------------------------------------

    def stored(self, project: str, row: PromptVersionRow) -> None:
        """A version (or a create's version 1) this collector stored: compiled now, on the
        write, so no batch compiles it (on a project held or being read)."""
        with self._lock:
            wanted = project in self._projects or project in self._recording
        compiled = {(row.prompt_id, row.version): compile_version(row)} if wanted else {}
        self._apply(project, lambda held: held.add([row], compiled))

    def deleted(self, project: str, prompt_id: str) -> None:
        """A prompt this collector deleted."""
        self._apply(project, lambda held: held.drop([prompt_id]))

    def forget(self, project: str) -> None:
        """Drop the project's copy (a write of unknown outcome): its next use reads it again."""
        with self._lock:
            dropped = self._projects.pop(project, None)
            self._total -= len(dropped.versions) if dropped is not None else 0
            if project in self._recording:
                # The load under way may have missed that write: its copy serves this use
                # only, and the next reads the store again.
                self._recording[project].append(lambda held: setattr(held, "stale", True))

    def reload(self) -> None:
        """Drop every project's copy (the registry's periodic reload on a server)."""
        with self._lock:
            self._projects.clear()
            self._total = 0

    def poll_with(
        self, read: ChangeReader, projects: Sequence[str], since: datetime, overlap: timedelta
    ) -> RegistryChanges:
        """Read what was stored in ``projects`` and in this object's projects (from ``overlap``
        before their last poll), apply it here and return it for the live-id index's poll."""
        started = datetime.now(UTC)
        with self._lock:
            mine = dict(self._projects)
        oldest = min((held.polled_at for held in mine.values()), default=since + overlap)
        names = sorted(set(projects) | set(mine))
        found = read(names, min(since, oldest - overlap))
        gone: defaultdict[str, list[str]] = defaultdict(list)
        for project, _, _, prompt_id, deleted in found.claims:
            if deleted:
                gone[project].append(prompt_id)
        rows: defaultdict[str, list[PromptVersionRow]] = defaultdict(list)
        for project, row in found.versions:
            rows[project].append(row)
        with self._lock:
            for project, held in mine.items():
                if self._projects.get(project) is not held:
                    continue  # dropped meanwhile: its next use reads the store
                before = len(held.versions)
                held.drop(gone.get(project, []))
                held.add(rows.get(project, []))
                held.polled_at = started
                self._total += len(held.versions) - before
            self._evict()
        return found

    def poll(self, read: ChangeReader, overlap: timedelta) -> None:
        """Apply what was stored in this object's projects since their last poll."""
        with self._lock:
            if not self._projects:
                return
        self.poll_with(read, [], datetime.now(UTC), overlap)

    def _apply(self, project: str, change: Callable[[ProjectVersions], None]) -> None:
        with self._lock:
            recording = self._recording.get(project)
            if recording is not None:
                recording.append(change)
            held = self._projects.get(project)
            if held is not None:
                before = len(held.versions)
                change(held)
                self._total += len(held.versions) - before
                self._evict()

    def _evict(self) -> None:
        """Drop the least recently used projects past the limits (holding ``_lock``)."""
        while len(self._projects) > 1 and (
            self._total > self._max_patterns or len(self._projects) > _MAX_PROJECTS
        ):
            _, dropped = self._projects.popitem(last=False)
            self._total -= len(dropped.versions)
