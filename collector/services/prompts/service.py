"""The prompt registry's service: :class:`PromptService` joins its parts and polls the store.

The rules live in one room each, joined here by inheritance (as ``PromptStore`` joins the
store's reads and writes), so routes and other services call one object:

- :mod:`.base` the store, caches and cursors, and which prompt and version a path addresses;
- :mod:`.fields` a version's fields: each write's body validated and its version built;
- :mod:`.writes` create, PATCH, rollback and delete (numbering, races, store then index);
- :mod:`.labels` listing, moving and removing labels;
- :mod:`.reads` a prompt, its versions and the list;
- :mod:`.matching` the chat versions compiled to link records that name no prompt.

This module keeps what is the service's own: where several collectors share one store, the
thread that polls the store for the live-id index (collector/services/prompts/DESIGN.md,
"Freshness across collectors").
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import datetime, timedelta

from ...store.prompts import PromptStore, RegistryChanges
from .base import LATEST, prompt_ref
from .live_ids import LiveIdIndex
from .matching import ChatLinks
from .reads import LabeledVersion, PromptPage, PromptReads, VersionPage
from .version_cache import VersionCache
from .writes import PromptWrites

# A poll reads rows stamped from this long before its last read: the stamps are the writers'
# clocks, taken just before the insert, so this covers clock skew and slow inserts.
POLL_OVERLAP = timedelta(seconds=10)
# How often a polling collector reads its loaded projects afresh, in case a row came later
# than the overlap: the bound on staleness when clocks or replicas are further apart.
RELOAD_SECONDS = 600.0
_log = logging.getLogger(__name__)

__all__ = [
    "LATEST",
    "POLL_OVERLAP",
    "RELOAD_SECONDS",
    "LabeledVersion",
    "PromptPage",
    "PromptService",
    "VersionPage",
    "prompt_ref",
]


class PromptService(PromptWrites, PromptReads):
    """Create, read, version, label and delete prompts of one project at a time."""

    def __init__(
        self,
        store: PromptStore,
        cursor_secret: str,
        cache: VersionCache | None = None,
        live_ids: LiveIdIndex | None = None,
        links: ChatLinks | None = None,
    ) -> None:
        super().__init__(store, cursor_secret, cache, live_ids, links)
        self._stop_polling = threading.Event()
        self._poller: threading.Thread | None = None

    # -- polling (several collectors on one store) -----------------------------------------

    def poll(self) -> int:
        """Apply to the live-id index what any collector stored in its loaded projects since
        its last read; return how many rows it applied (three queries, none when no project
        is loaded). The chat versions kept for linking (:mod:`.matching`) take the same read,
        widened to their projects (its own, when the index has no project loaded)."""
        polled = False

        def read(projects: list[str], since: datetime) -> RegistryChanges:
            nonlocal polled
            polled = True
            return self.links.poll_with(self._store.changes, projects, since, POLL_OVERLAP)

        applied = self._ids.poll(read, POLL_OVERLAP)
        if not polled:
            self.links.poll(self._store.changes, POLL_OVERLAP)
        return applied

    def reload(self) -> int:
        """Read every loaded project's index afresh from the store (see
        :meth:`LiveIdIndex.reload`); return how many were loaded. The linking's chat versions
        are dropped, to be read again on their next use."""
        self.links.reload()
        return self._ids.reload(self._store.live_prompts)

    def start_polling(self, interval: float) -> None:
        """Poll every ``interval`` seconds in a daemon thread until :meth:`close`."""
        if self._poller is not None or interval <= 0:
            return

        def run() -> None:
            reloaded = time.monotonic()
            failed = 0  # polls failed in a row
            while not self._stop_polling.wait(interval):
                try:
                    if time.monotonic() - reloaded >= RELOAD_SECONDS:
                        reloaded = time.monotonic()
                        self.reload()
                    else:
                        self.poll()
                except Exception:
                    # The index keeps its last poll's state and the next poll reads from it
                    # again. One warning per streak: a store away for an hour would otherwise
                    # log a traceback every interval.
                    failed += 1
                    if failed == 1:
                        _log.warning(
                            "registry poll failed; reads from memory keep the last poll's "
                            "state until a poll succeeds (retrying every %s s)",
                            interval,
                            exc_info=True,
                        )
                    continue
                if failed:
                    _log.info("registry poll succeeded again after %d failed polls", failed)
                    failed = 0

        self._poller = threading.Thread(target=run, name="registry-poll", daemon=True)
        self._poller.start()

    def close(self) -> None:
        """Stop polling (waits for a poll under way)."""
        self._stop_polling.set()
        if self._poller is not None:
            self._poller.join()
            self._poller = None
