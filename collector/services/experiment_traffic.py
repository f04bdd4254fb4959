"""Which logged records are a client-run experiment's traffic (docs/api-notes.md,
"Environments").

``promptrail.run_experiment`` runs its task in the caller's process, labelling every record
with ``metadata.experiment_id``; the records arrive in whatever environment the caller logs
under. The service, not the client, decides they are its experiments' traffic: a record whose
``experiment_id`` names an experiment of its project run by the client is stored under
``promptrail-experiment``. Ingest asks this module for every batch, so the answer comes from
memory: the ids found in the store are kept per project (an experiment's task never changes),
and so, for a while, are the ids not found (``promptrail.run_experiment`` creates its
experiment before any task runs, and the service makes its ids, so an id unknown now stays
unknown; it is looked up again after ``miss_seconds``, in case a server store's replica had not
yet seen the experiment). Both sets are bounded; an id that falls out is read
again from the store once.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ..models.requests import EXPERIMENT_ENVIRONMENT

# (project, ids) -> those of ids naming a client experiment of project (ExperimentStore.client_ids)
Lookup = Callable[[str, Sequence[str]], set[str]]


class ExperimentTraffic:
    """Moves a client experiment's records to ``promptrail-experiment`` at ingest."""

    def __init__(
        self,
        lookup: Lookup,
        max_ids: int = 100_000,
        miss_seconds: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Read unknown ids through ``lookup``; keep at most ``max_ids`` known and as many
        missing ids (least recently seen dropped first), a missing one for ``miss_seconds``."""
        self._lookup = lookup
        self._max = max_ids
        self._miss_seconds = miss_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._known: OrderedDict[tuple[str, str], None] = OrderedDict()
        self._missing: OrderedDict[tuple[str, str], float] = OrderedDict()

    def mark(self, project: str, rows: Iterable[dict[str, Any]]) -> None:
        """Set ``environment`` of the rows (a record's stored values) that are a client
        experiment's traffic to ``promptrail-experiment``; others keep theirs."""
        labelled: list[tuple[dict[str, Any], str]] = []
        for row in rows:
            metadata = row["metadata"]
            if isinstance(metadata, dict):
                experiment_id = metadata.get("experiment_id")
                if isinstance(experiment_id, str) and experiment_id:
                    labelled.append((row, experiment_id))
        if not labelled:
            return
        experiments = self._client_experiments(project, {eid for _, eid in labelled})
        for row, experiment_id in labelled:
            if experiment_id in experiments:
                row["environment"] = EXPERIMENT_ENVIRONMENT

    def _client_experiments(self, project: str, ids: set[str]) -> set[str]:
        """Those of ``ids`` naming a client experiment of ``project``; the store is read only
        for ids neither known nor recently missed."""
        now = self._clock()
        found: set[str] = set()
        unknown: list[str] = []
        with self._lock:
            for experiment_id in ids:
                key = (project, experiment_id)
                if key in self._known:
                    self._known.move_to_end(key)
                    found.add(experiment_id)
                    continue
                missed = self._missing.get(key)
                if missed is None or now - missed >= self._miss_seconds:
                    unknown.append(experiment_id)
        if not unknown:
            return found
        # Read outside the lock: other batches go on from memory meanwhile.
        stored = self._lookup(project, sorted(unknown))
        with self._lock:
            for experiment_id in unknown:
                key = (project, experiment_id)
                if experiment_id in stored:
                    self._missing.pop(key, None)
                    _keep(self._known, key, None, self._max)
                else:
                    self._missing.pop(key, None)
                    _keep(self._missing, key, now, self._max)
        return found | stored


def _keep(
    entries: OrderedDict[tuple[str, str], Any], key: tuple[str, str], value: Any, bound: int
) -> None:
    """Add ``key`` as the most recent entry, dropping the least recent past ``bound``."""
    entries[key] = value
    entries.move_to_end(key)
    while len(entries) > bound:
        entries.popitem(last=False)
