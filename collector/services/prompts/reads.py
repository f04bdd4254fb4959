"""The registry's reads: a prompt, its versions (one, all, a page), the list of prompts, and
the diff of two versions (both resolved here, compared by :func:`.diff.diff_versions`).

Reads of a version are answered from the live-id index or the version cache where they can be
(:meth:`PromptReads.cached_version` never queries, for the async routes), else from the store
(:mod:`.base` resolves what a path addresses). On the embedded store the list is answered from
the index's newest rows, with the store's filters, order, cursor and total in Python
(:func:`_heads_page`); the templates a route renders are those versions' rows.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from datetime import datetime

from ...errors import ValidationFailed, VersionNotFound
from ...models.prompts import check_label
from ...store.prompts import ListFilter, PromptHeadRow, PromptVersionRow
from ..cursors import Position, time_key
from .base import LATEST, PromptServiceBase, prompt_ref
from .diff import VersionDiff, diff_versions

# The highest version number a path or query may name (as the versions routes take).
_MAX_VERSION = 2**31


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


class PromptReads(PromptServiceBase):
    """Get a prompt or version, list versions and prompts."""

    def get(self, project: str, ref_text: str) -> PromptVersionRow:
        """Return the newest version of a live prompt."""
        return self.resolve_version(project, ref_text)

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

    def diff(self, project: str, ref_text: str, from_ref: str, to_ref: str) -> VersionDiff:
        """Return the changes from one version to another, each named by its number (digits)
        or a label (``latest`` the newest); see :mod:`.diff` for what is compared how."""
        before = self._diff_side(project, ref_text, "from", from_ref)
        after = self._diff_side(project, ref_text, "to", to_ref)
        return VersionDiff(before.version, after.version, diff_versions(before, after))

    def _diff_side(self, project: str, ref_text: str, field: str, value: str) -> PromptVersionRow:
        if value.isascii() and value.isdigit():
            number = int(value)
            if not 1 <= number <= _MAX_VERSION:
                self._live_id(project, ref_text)  # an unknown prompt is 404 PROMPT_NOT_FOUND
                raise VersionNotFound(ref_text, number)
            return self.resolve_version(project, ref_text, number=number)
        try:
            check_label(value)
        except ValueError:
            raise ValidationFailed(
                field, f"{field} must be a version number or a label, got {value[:80]!r}"
            ) from None
        return self.resolve_version(project, ref_text, label=value)


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
