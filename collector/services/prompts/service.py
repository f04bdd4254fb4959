"""Prompt rules: names, versions, rollback, labels and template payloads."""

from __future__ import annotations

import heapq
import logging
import random
import re
import threading
import time
import uuid
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from ...errors import (
    LabelNotFound,
    PromptAlreadyExists,
    PromptNotFound,
    ValidationFailed,
    VersionContention,
    VersionNotFound,
)
from ...models.prompts import PromptCreate, PromptUpdate, check_label, public_id
from ...store.prompts import ListFilter, PromptHeadRow, PromptRef, PromptStore, PromptVersionRow
from ..cursors import CursorCodec, Position, time_key
from ..dates import utc_now_ms
from ..templates import parse_template
from .encoded import EncodedBodies
from .live_ids import LiveIdIndex
from .version_cache import VersionCache

_ID = re.compile(r"^prompt_([0-9a-f]{32})$")
LATEST = "latest"
# Each lost race costs a read and an insert; this many losses in a row means something is
# wrong (a hot loop of writers), not ordinary contention.
_MAX_VERSION_ATTEMPTS = 200
# A lost name claim is retried only when the name is not live after all (another store client
# used the generation and deleted it again); a few such rounds in a row do not happen.
_MAX_CLAIM_ATTEMPTS = 5
# A poll reads rows stamped from this long before its last read: the stamps are the writers'
# clocks, taken just before the insert, so this covers clock skew and slow inserts.
POLL_OVERLAP = timedelta(seconds=10)
# How often a polling collector reads its loaded projects afresh, in case a row came later
# than the overlap: the bound on staleness when clocks or replicas are further apart.
RELOAD_SECONDS = 600.0
_log = logging.getLogger(__name__)


def prompt_ref(value: str) -> PromptRef:
    """Interpret a path segment as a prompt id or a prompt name."""
    match = _ID.match(value)
    return PromptRef(match.group(1), by_id=True) if match else PromptRef(value, by_id=False)


@dataclass(frozen=True)
class PromptPage:
    """One page of the prompt list."""

    items: list[PromptHeadRow]
    total: int
    next_cursor: str | None


@dataclass(frozen=True)
class VersionPage:
    """One page of a prompt's versions, newest first."""

    items: list[LabeledVersion]
    next_cursor: str | None


@dataclass(frozen=True)
class LabeledVersion:
    """A version and the labels pointing at it."""

    row: PromptVersionRow
    labels: list[str]


class PromptService:
    """Create, read, version, label and delete prompts of one project at a time."""

    def __init__(
        self,
        store: PromptStore,
        cursor_secret: str,
        cache: VersionCache | None = None,
        live_ids: LiveIdIndex | None = None,
    ) -> None:
        self._store = store
        self._cursors = CursorCodec(cursor_secret, "prompts")
        self._version_cursors = CursorCodec(cursor_secret, "prompt-versions")
        self._cache = cache or VersionCache(enabled=False)
        self._ids = live_ids or LiveIdIndex(enabled=False)
        self.encoded = EncodedBodies()
        self._stop_polling = threading.Event()
        self._poller: threading.Thread | None = None

    @property
    def live_ids(self) -> LiveIdIndex:
        """The in-memory live-id index (on the embedded store; polled on a server)."""
        return self._ids

    # -- polling (several collectors on one store) -----------------------------------------

    def poll(self) -> int:
        """Apply to the live-id index what any collector stored in its loaded projects since
        its last read; return how many rows it applied (three queries, none when no project
        is loaded)."""
        return self._ids.poll(self._store.changes, POLL_OVERLAP)

    def reload(self) -> int:
        """Read every loaded project's index afresh from the store (see
        :meth:`LiveIdIndex.reload`); return how many were loaded."""
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

    # -- create / read ---------------------------------------------------------------------

    def create(self, project: str, body: PromptCreate) -> PromptVersionRow:
        """Create a prompt at version 1; 409 when a live prompt has the name.

        On the embedded store the name's state comes from the live-id index and the create is
        one group commit (version 1 and the name claim, stored with other writers' rows);
        creates of other names run at the same time.
        """
        parse_template(body.template)
        now = utc_now_ms()
        row = PromptVersionRow(
            prompt_id=uuid.uuid4().hex,
            version=1,
            version_id=str(uuid.uuid4()),
            name=body.name,
            description=body.description,
            template=body.template,
            model=body.model,
            parameters=body.parameters,
            tags=body.tags,
            folder=body.folder or "",
            note="",
            prompt_created_at=now,
            created_at=now,
        )
        with self._ids.holding(project, f"name/{body.name}"):
            claimed = self._claim(project, row)
        if not claimed:
            raise PromptAlreadyExists(body.name)
        self._attach_labels(project, row, body.labels)
        self._cache.invalidate(project)
        return row

    def _claim(self, project: str, row: PromptVersionRow) -> bool:
        """Store the new prompt and claim its name; False when a live prompt has the name.

        The claim's compare-and-set decides: a generation taken by another writer (another
        store client, whose writes this index does not see) is read again from the store.
        """
        known, generation, live_id = self._ids.claim_state(
            project, row.name, self._store.live_prompts
        )
        if not known or (live_id is not None and self._ids.polled):
            # Unknown, or live in an index another collector's delete may not have reached
            # yet: the store says whether the name is taken.
            generation, live = self._store.name_state(project, row.name)
            if live:
                return False
        elif live_id is not None:
            return False
        for _ in range(_MAX_CLAIM_ATTEMPTS):
            # Under the name's lock only: claims of one name are ordered by it, and nothing
            # else can address the new prompt before this returns its id.
            try:
                claimed = self._store.create(project, row, generation + 1)
                if claimed:
                    self._ids.created(project, row.name, row.prompt_id, row, generation + 1)
            except BaseException:
                self._ids.forget(project)  # stored or not: unknown, so load again
                raise
            if claimed:
                return True
            # Another writer took the generation: what is stored decides. An exact index
            # missed a write, so it is dropped and loaded again on the next read; a polled one
            # learns the claim from its next poll (reloading it would cost more).
            if not self._ids.polled:
                self._ids.forget(project)
            generation, live = self._store.name_state(project, row.name)
            if live:
                return False
        return False

    def get(self, project: str, ref_text: str) -> PromptVersionRow:
        """Return the newest version of a live prompt."""
        return self.resolve_version(project, ref_text)

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

    def cached_version(
        self, project: str, ref_text: str, number: int | None = None, label: str | None = None
    ) -> PromptVersionRow | None:
        """Return the version a path addresses if it is in memory, without touching the store.

        Lets an async caller skip the hop to a worker thread when no query is needed.
        """
        if label == LATEST:
            label = None
        ref = prompt_ref(ref_text)
        held = self._ids.peek(project, ref, number, label)
        if held is not None:
            return held
        return self._cache.lookup(project, (ref, number, label))[1]

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

    def list_page(
        self,
        project: str,
        limit: int,
        cursor: str | None,
        *,
        tags: list[str] | None = None,
        folder: str | None = None,
        search: str | None = None,
    ) -> PromptPage:
        """Return a page of live prompts, newest first.

        ``tags`` are repeated values or comma-separated ones (all must match); ``folder``
        matches that folder and its subfolders, written with or without its slashes.
        """
        wanted = [t.strip() for value in tags or [] for t in value.split(",") if t.strip()]
        folder_path = "/" + "/".join(p for p in folder.split("/") if p) if folder else None
        filters = ListFilter(tags=wanted, folder=folder_path, search=search or None)
        after = self._cursors.after_time(cursor)
        held = self._ids.newest_rows(project, self._store.live_prompts)
        if held is not None:
            rows, total = _heads_page(held, filters, after, limit + 1)
        else:
            rows, page_total = self._store.list_heads(project, filters, after, limit + 1)
            total = (
                page_total if page_total is not None else self._store.count_heads(project, filters)
            )
        page, next_cursor = self._cursors.next_page(
            rows, limit, lambda head: time_key(head.prompt_created_at, head.prompt_id)
        )
        return PromptPage(items=page, total=total, next_cursor=next_cursor)

    # -- new versions ----------------------------------------------------------------------

    def update(self, project: str, ref_text: str, body: PromptUpdate) -> PromptVersionRow:
        """Make version N+1 from the newest version and the given fields."""
        fields = body.model_fields_set - {"labels"}
        if not fields:
            raise ValidationFailed("body", "PATCH needs at least one prompt field to change")
        if body.template is not None:
            parse_template(body.template)
        if "folder" in fields and body.folder is None:
            body = body.model_copy(update={"folder": ""})
        changes: dict[str, Any] = {
            key: getattr(body, key)
            for key in ("template", "model", "description", "parameters", "tags", "folder")
            if key in fields and getattr(body, key) is not None
        }

        def build(head: PromptVersionRow) -> PromptVersionRow:
            if body.name is not None and body.name != head.name:
                raise ValidationFailed("name", "Renaming a prompt is not supported")
            return replace(head, **changes, note="")

        row = self._next_version(project, ref_text, build)
        self._attach_labels(project, row, body.labels)
        return row

    def rollback(
        self, project: str, ref_text: str, target: int, labels: list[str]
    ) -> PromptVersionRow:
        """Make version N+1 with the target version's template, model and parameters."""
        source = self._version_for_write(project, ref_text, target)

        def build(head: PromptVersionRow) -> PromptVersionRow:
            note = (
                f"Rollback to version {target}: version {head.version + 1} restores "
                f"version {target} (was version {head.version})"
            )
            return replace(
                head,
                template=source.template,
                model=source.model,
                parameters=source.parameters,
                note=note,
            )

        row = self._next_version(project, ref_text, build)
        self._attach_labels(project, row, labels)
        return row

    def _next_version(
        self,
        project: str,
        ref_text: str,
        build: Any,
    ) -> PromptVersionRow:
        """Store version N+1 of the prompt, built from version N by ``build``.

        Writers of one prompt in this process take turns (one lock per prompt, writers of
        other prompts run at once), so N comes from memory on the embedded store and the write
        is one store call; the store's compare-and-set still decides against writers elsewhere.
        """
        prompt_id = self._write_id(project, ref_text)
        ref = PromptRef(prompt_id, by_id=True)
        with self._ids.holding(project, f"prompt/{prompt_id}"):
            for _ in range(_MAX_VERSION_ATTEMPTS):
                head = self._stored_version(project, ref)
                if head is None:
                    break
                candidate: PromptVersionRow = build(head)
                candidate = replace(
                    candidate,
                    version=head.version + 1,
                    version_id=str(uuid.uuid4()),
                    created_at=utc_now_ms(),
                )
                try:
                    winner = self._store.insert_version(project, candidate)
                except BaseException:
                    # The number may or may not be stored: the index must not keep an older head.
                    self._ids.forget(project)
                    raise
                mine = winner == candidate.version_id
                if winner is None:
                    # Taken but not stored (a failed write of another store client): what
                    # is stored decides, so the index is loaded again.
                    self._ids.forget(project)
                else:
                    # The number is durably stored, by this writer or one that beat it: the
                    # index learns it before the cache is cleared, so no read caches an older
                    # head (a winner's row is read from the store when asked for).
                    with self._ids.writing(project):
                        self._ids.stored_version(
                            project, prompt_id, candidate.version, candidate if mine else None
                        )
                if mine:
                    self._cache.invalidate(project)
                    return candidate
                # Another writer took this number; back off a little so the herd spreads out.
                time.sleep(random.uniform(0, 0.005))
            else:
                raise VersionContention("Too many concurrent updates of this prompt; retry")
        raise PromptNotFound(ref_text)

    # -- versions and labels ---------------------------------------------------------------

    def versions(self, project: str, ref_text: str) -> list[LabeledVersion]:
        """Return every version, newest first, with the labels on each."""
        prompt_id = self._live_id(project, ref_text)
        by_version = self._labels_by_version(project, prompt_id)
        return [
            LabeledVersion(row, by_version.get(row.version, []))
            for row in self._store.versions(project, prompt_id)
        ]

    def versions_page(
        self, project: str, ref_text: str, limit: int, cursor: str | None
    ) -> VersionPage:
        """Return up to ``limit`` versions newest first, after ``cursor`` (a page's last
        version: versions are immutable, so a page never shifts under its cursor)."""
        before = self._version_cursors.after(cursor, _version_before)
        prompt_id = self._live_id(project, ref_text)
        found = self._store.versions(project, prompt_id, before=before, limit=limit + 1)
        rows, next_cursor = self._version_cursors.next_page(
            found, limit, lambda row: {"before": row.version}
        )
        by_version = self._labels_by_version(project, prompt_id)
        return VersionPage(
            [LabeledVersion(row, by_version.get(row.version, [])) for row in rows], next_cursor
        )

    def version(self, project: str, ref_text: str, number: int) -> LabeledVersion:
        """Return one version with its labels."""
        row = self.resolve_version(project, ref_text, number=number)
        labels = self._labels_by_version(project, row.prompt_id).get(row.version, [])
        return LabeledVersion(row, labels)

    def labels(self, project: str, ref_text: str) -> list[tuple[str, int, datetime]]:
        """Return the prompt's labels and the versions they point at."""
        return self._store.labels(project, self._live_id(project, ref_text))

    def move_label(
        self, project: str, ref_text: str, label: str, version: int
    ) -> tuple[str, int, datetime]:
        """Attach a label to a version, moving it off any other."""
        self._check_settable(label)
        row = self._version_for_write(project, ref_text, version)
        at = self._set_labels(project, row.prompt_id, [label], row.version, row)
        self._cache.invalidate(project)
        return label, row.version, at

    def remove_label(self, project: str, ref_text: str, label: str) -> None:
        """Detach a label; 404 LABEL_NOT_FOUND when it is not attached (however it is spelt)."""
        self._check_removable(label)
        prompt_id = self._write_id(project, ref_text)
        if label not in {name for name, _, _ in self._store.labels(project, prompt_id)}:
            raise LabelNotFound(ref_text, label)
        self._set_labels(project, prompt_id, [label], 0)
        self._cache.invalidate(project)

    def delete(self, project: str, ref_text: str) -> str:
        """Soft-delete a prompt; return its public id."""
        prompt_id = self._write_id(project, ref_text)
        with self._ids.writing(project):
            name = self._store.mark_deleted(project, prompt_id, datetime.now(UTC))
            if name is not None:
                self._ids.deleted(project, name, prompt_id)
        if name is None:
            raise PromptNotFound(ref_text)
        self._cache.invalidate(project)
        return public_id(prompt_id)

    def _attach_labels(self, project: str, row: PromptVersionRow, labels: list[str]) -> None:
        if labels:
            self._set_labels(project, row.prompt_id, labels, row.version, row)
            self._cache.invalidate(project)

    def _set_labels(
        self,
        project: str,
        prompt_id: str,
        labels: list[str],
        version: int,
        row: PromptVersionRow | None = None,
    ) -> datetime:
        """Point labels at a stored version (``row``; 0 removes them); store, then index, in
        order."""
        at = datetime.now(UTC)
        with self._ids.writing(project):
            for label in labels:
                at = self._ids.stamp(project)
                self._store.set_label(project, prompt_id, label, version, at)
                self._ids.labeled(project, prompt_id, label, version, row, at)
        return at

    def _labels_by_version(self, project: str, prompt_id: str) -> dict[int, list[str]]:
        result: dict[int, list[str]] = {}
        for label, version, _ in self._store.labels(project, prompt_id):
            result.setdefault(version, []).append(label)
        return result

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

    @staticmethod
    def _check_settable(label: str) -> None:
        try:
            check_label(label)
        except ValueError as exc:
            raise ValidationFailed("label", str(exc)) from None
        PromptService._check_removable(label)

    @staticmethod
    def _check_removable(label: str) -> None:
        # A label a path looks up is only ever not found, whatever its spelling (as a prompt
        # name is); `latest` is the exception: it always exists and can never be detached.
        if label == LATEST:
            raise ValidationFailed(
                "label", "'latest' is reserved: it always means the newest version"
            )


def _heads_page(
    newest: list[PromptVersionRow],
    filters: ListFilter,
    after: tuple[datetime, str] | None,
    limit: int,
) -> tuple[list[PromptHeadRow], int]:
    """One page of the list from the live prompts' newest versions held in memory, and the
    count matching the filters: the store's list query (``PromptStore.list_heads``) in Python."""
    query = filters.search.lower() if filters.search else None
    prefix = filters.folder.rstrip("/") + "/" if filters.folder is not None else None
    matching = newest
    if filters.tags or prefix is not None or query is not None:
        matching = [
            row
            for row in newest
            if all(tag in row.tags for tag in filters.tags)
            and (prefix is None or row.folder == filters.folder or row.folder.startswith(prefix))
            and (query is None or query in row.name.lower() or query in row.description.lower())
        ]
    total = len(matching)
    if after is not None:
        matching = [r for r in matching if (r.prompt_created_at, r.prompt_id) < after]
    # A page of the newest: a heap of ``limit`` over the matches, not a sort of them all.
    matching = heapq.nlargest(limit, matching, key=lambda r: (r.prompt_created_at, r.prompt_id))
    page = [
        PromptHeadRow(
            prompt_id=row.prompt_id,
            name=row.name,
            description=row.description,
            version=row.version,
            prompt_created_at=row.prompt_created_at,
            tags=list(row.tags),
            folder=row.folder,
        )
        for row in matching[:limit]
    ]
    return page, total


def _version_before(position: Position) -> int:
    """The version a versions cursor names: the page's last, a positive integer."""
    before = position["before"]
    if not isinstance(before, int) or isinstance(before, bool) or before < 1:
        raise ValueError("not a version number")
    return before
