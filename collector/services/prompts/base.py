"""What every part of the prompt service shares: its store, caches and cursors, and which
prompt and version a path addresses.

:class:`PromptServiceBase` holds the store, the version cache, the live-id index and the
cursor codecs, and answers the addressing every route needs before it reads or writes: a
path segment as an id or a name (:func:`prompt_ref`), the live prompt it names, and the
version a read (newest, by number, by label) or a write resolves to. Reads ask the index
and the cache first and the store when they cannot answer; writes resolve their prompt from
the store where other collectors write (:meth:`PromptServiceBase._write_id`). The reads
(:mod:`.reads`), the label moves (:mod:`.labels`) and the new versions and deletes
(:mod:`.writes`) build on it; ``PromptService`` (:mod:`.service`) joins them.
"""

from __future__ import annotations

import re

from ...errors import LabelNotFound, PromptNotFound, VersionNotFound
from ...store.prompts import PromptRef, PromptStore, PromptVersionRow
from ..cursors import CursorCodec
from .encoded import EncodedBodies
from .live_ids import LiveIdIndex
from .matching import ChatLinks
from .version_cache import VersionCache

_ID = re.compile(r"^prompt_([0-9a-f]{32})$")
LATEST = "latest"


def prompt_ref(value: str) -> PromptRef:
    """Interpret a path segment as a prompt id or a prompt name."""
    match = _ID.match(value)
    return PromptRef(match.group(1), by_id=True) if match else PromptRef(value, by_id=False)


class PromptServiceBase:
    """The prompt service's store, caches and cursors, and path addressing (see the module)."""

    def __init__(
        self,
        store: PromptStore,
        cursor_secret: str,
        cache: VersionCache | None = None,
        live_ids: LiveIdIndex | None = None,
        links: ChatLinks | None = None,
    ) -> None:
        self._store = store
        self._cursors = CursorCodec(cursor_secret, "prompts")
        self._version_cursors = CursorCodec(cursor_secret, "prompt-versions")
        self._cache = cache or VersionCache(enabled=False)
        self._ids = live_ids or LiveIdIndex(enabled=False)
        # The chat versions compiled for linking unnamed records (kept up to date by the writes).
        self.links = links or ChatLinks(store)
        self.encoded = EncodedBodies()

    @property
    def live_ids(self) -> LiveIdIndex:
        """The in-memory live-id index (on the embedded store; polled on a server)."""
        return self._ids

    def resolve_version(
        self, project: str, ref_text: str, number: int | None = None, label: str | None = None
    ) -> PromptVersionRow:
        """Return the version a path addresses: newest, by number, or by label."""
        ref = prompt_ref(ref_text)
        if label == LATEST:
            label = None
        row = self._read_version(project, ref, number, label)
        if row is not None:
            return row
        if self._live_prompt_id(project, ref) is None:
            raise PromptNotFound(ref_text)
        if label is not None:
            raise LabelNotFound(ref_text, label)
        raise VersionNotFound(ref_text, number or 0)

    def _read_version(
        self, project: str, ref: PromptRef, number: int | None, label: str | None
    ) -> PromptVersionRow | None:
        key = (ref, number, label)
        generation, cached = self._cache.lookup(project, key)
        if cached is not None:
            return cached
        row = self._stored_version(project, ref, number, label)
        if row is not None:
            self._cache.keep(project, key, generation, row)
        return row

    def _stored_version(
        self, project: str, ref: PromptRef, number: int | None = None, label: str | None = None
    ) -> PromptVersionRow | None:
        """Read a version: from memory when the index holds it (the newest and labeled
        versions), else one point read when the index knows which, else the store's lookup."""
        known, prompt_id, version, held = self._ids.find(
            project, ref, number, label, self._store.live_prompts
        )
        if known and (prompt_id is None or version is None):
            if not self._ids.polled:
                return None
            # A polled index may not know yet what another collector just stored.
            known = False
        if known and prompt_id is not None and version is not None:
            if held is not None:
                return held
            row = self._store.version_at(project, prompt_id, version)
            if row is not None:
                return row
            # The index holds only versions read back from the store; should one be missing
            # anyway, stop trusting the project's index rather than answer from it.
            self._ids.forget(project)
        return self._store.version(project, ref, number=number, label=label)

    def _live_prompt_id(self, project: str, ref: PromptRef) -> str | None:
        known, prompt_id = self._ids.resolve(project, ref, self._store.live_prompts)
        if known and (prompt_id is not None or not self._ids.polled):
            return prompt_id
        return self._store.live_prompt_id(project, ref)

    def _live_id(self, project: str, ref_text: str) -> str:
        prompt_id = self._live_prompt_id(project, prompt_ref(ref_text))
        if prompt_id is None:
            raise PromptNotFound(ref_text)
        return prompt_id

    def _write_id(self, project: str, ref_text: str) -> str:
        """The live prompt a write addresses: from the index where it is exact (the embedded
        store), from the store where other collectors write, so that an index a poll has not
        refreshed yet never sends a write to a prompt another collector deleted."""
        if not self._ids.polled:
            return self._live_id(project, ref_text)
        prompt_id = self._store.live_prompt_id(project, prompt_ref(ref_text))
        if prompt_id is None:
            raise PromptNotFound(ref_text)
        return prompt_id

    def _version_for_write(self, project: str, ref_text: str, number: int) -> PromptVersionRow:
        """The version ``number`` of the prompt a write addresses (see :meth:`_write_id`)."""
        if not self._ids.polled:
            return self.resolve_version(project, ref_text, number=number)
        row = self._stored_version(
            project, PromptRef(self._write_id(project, ref_text), by_id=True), number
        )
        if row is None:
            raise VersionNotFound(ref_text, number)
        return row

    def _labels_by_version(self, project: str, prompt_id: str) -> dict[int, list[str]]:
        result: dict[int, list[str]] = {}
        for label, version, _ in self._store.labels(project, prompt_id):
            result.setdefault(version, []).append(label)
        return result
