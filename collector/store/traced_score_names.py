"""Which score names have a score on a trace, per project, known to the process.

A score filter or a score analytics query leaves the trace half out for a name never scored
on a trace (see ``store.scores.score_clauses``): the store says so in one key read per name
(``traced_names``), ~3 ms of every filtered list page. The answer rarely changes, so it is
kept here:

- a name seen with a trace score stays known for good: a stale "yes" (its trace scores all
  deleted since) only reads the trace half for nothing, never a wrong page;
- a "no" is kept only where this process is the store's one writer (the embedded store):
  every score insert goes through :meth:`note` before it reaches the store, so no reader can
  miss a trace score its cached "no" would hide. A ClickHouse server may have other
  collectors writing, so there each name not yet known is asked of the store every time.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence


class TracedScoreNames:
    """The score names with a score on a trace, per project (see the module's docstring)."""

    def __init__(
        self, read: Callable[[str, Sequence[str]], Iterable[str]], sole_writer: bool
    ) -> None:
        """``read(project, names)``: which of ``names`` the store has on a trace;
        ``sole_writer``: every score write of the store goes through this process."""
        self._read = read
        self._sole_writer = sole_writer
        self._lock = threading.Lock()
        self._traced: dict[str, set[str]] = {}
        self._asked: dict[str, set[str]] = {}  # sole writer: names whose answer is known

    def note(self, project: str, names: Iterable[str]) -> None:
        """Learn that ``names`` get scores on traces: called before their insert."""
        with self._lock:
            self._traced.setdefault(project, set()).update(names)

    def of(self, project: str, names: Iterable[str]) -> frozenset[str]:
        """Which of ``names`` have a score on a trace in ``project``."""
        wanted = set(names)
        with self._lock:
            traced = self._traced.get(project, set())
            unknown = wanted - traced - self._asked.get(project, set())
        if unknown:
            found = set(self._read(project, sorted(unknown)))
            with self._lock:
                self._traced.setdefault(project, set()).update(found)
                if self._sole_writer:
                    # A note that landed during the read is in _traced: the answer below
                    # reads it there, whatever the read saw.
                    self._asked.setdefault(project, set()).update(unknown)
        with self._lock:
            return frozenset(wanted & self._traced.get(project, set()))
