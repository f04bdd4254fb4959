"""The registry's reads: resolving a path's prompt, versions, the list, labels, and the
loads and polls of the live-id index.

Apart from the writes because they never take a slot or go through the group commit: every
one is a parameterised query on the store's client (which, on the embedded store, first waits
for the registry journal).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from ..connection import utc
from .base import PromptStoreBase
from .rows import (
    VERSION_COLUMNS,
    ListFilter,
    LivePrompt,
    LiveState,
    PromptHeadRow,
    PromptRef,
    PromptVersionRow,
    RegistryChanges,
    _packed_version,
)

# Versions read per query when an index loads a project's newest and labeled versions.
_ROWS_CHUNK = 5_000
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class PromptReads(PromptStoreBase):
    """The queries that read the prompt tables."""

    def _live_id_subquery(self, ref: PromptRef) -> str:
        key = "prompt_id = {ref:String}" if ref.by_id else "name = {ref:String}"
        return (
            f"(SELECT prompt_id FROM {self._prompts} FINAL WHERE project = {{project:String}} "
            f"AND {key} AND is_deleted = 0 ORDER BY generation DESC LIMIT 1)"
        )

    def live_prompt_id(self, project: str, ref: PromptRef) -> str | None:
        """Return the id of the live prompt a path addresses, or None."""
        rows = self._point_rows(
            f"SELECT {self._live_id_subquery(ref)}",
            project=project,
            ref=ref.value,
        )
        value = rows[0][0] if rows else None
        return str(value) if value else None

    def live_prompts(self, project: str, limit: int) -> LiveState | None:
        """Return every live prompt of a project with its newest version and labels.

        None past ``limit`` name claims (deleted ones included). Claims are sorted by (name,
        generation), so a name's newest live claim comes last: the same answer
        :meth:`live_prompt_id` gives for each name and id. Four queries in this order (claims,
        newest versions, labels, the rows of the newest and labeled versions), so a prompt's
        claim is never read without its first version, nor a label without its version.
        """
        params: dict[str, Any] = {"project": project, "limit": limit + 1}
        claims = self._client.query(
            f"SELECT name, prompt_id, generation, is_deleted FROM {self._prompts} FINAL "
            "WHERE project = {project:String} ORDER BY name, generation LIMIT {limit:UInt64}",
            parameters=params,
        ).result_rows
        if len(claims) > limit:
            return None
        generations = {str(name): int(generation) for name, _, generation, _ in claims}
        live = (
            f"prompt_id IN (SELECT prompt_id FROM {self._prompts} FINAL "
            "WHERE project = {project:String} AND is_deleted = 0)"
        )
        newest = {
            str(prompt_id): int(version)
            for prompt_id, version in self._client.query(
                f"SELECT prompt_id, max(version) FROM {self._versions} "
                f"WHERE project = {{project:String}} AND {live} GROUP BY prompt_id",
                parameters=params,
            ).result_rows
        }
        labels: dict[str, list[tuple[str, int]]] = {}
        for prompt_id, label, version in self._client.query(
            f"SELECT prompt_id, label, version FROM {self._labels} FINAL "
            f"WHERE project = {{project:String}} AND version > 0 AND {live}",
            parameters=params,
        ).result_rows:
            labels.setdefault(str(prompt_id), []).append((str(label), int(version)))
        stamp = self._client.query(
            f"SELECT count(), max(updated_at) FROM {self._labels} "
            "WHERE project = {project:String}",
            parameters=params,
        ).result_rows
        wanted = {(pid, v) for pid, v in newest.items()} | {
            (pid, v) for pid, pairs in labels.items() for _, v in pairs
        }
        rows: dict[str, list[PromptVersionRow]] = {}
        for row in self._rows_at(project, sorted(wanted)):
            rows.setdefault(row.prompt_id, []).append(row)
        return LiveState(
            prompts=[
                LivePrompt(
                    name=str(name),
                    prompt_id=str(prompt_id),
                    newest=newest.get(str(prompt_id), 0),
                    labels=tuple(labels.get(str(prompt_id), ())),
                    rows=tuple(rows.get(str(prompt_id), ())),
                )
                for name, prompt_id, _, is_deleted in claims
                if not is_deleted
            ],
            label_stamp=utc(stamp[0][1]) if stamp and stamp[0][0] else None,
            generations=generations,
        )

    def _rows_at(self, project: str, keys: Sequence[tuple[str, int]]) -> list[PromptVersionRow]:
        """Read the versions at (prompt_id, version) keys, in chunks the key index can use."""
        found: list[PromptVersionRow] = []
        for start in range(0, len(keys), _ROWS_CHUNK):
            chunk = keys[start : start + _ROWS_CHUNK]
            found.extend(
                _packed_version(r[0], r[1])
                for r in self._client.query(
                    f"SELECT {VERSION_COLUMNS} FROM {self._versions} "
                    "WHERE project = {project:String} AND prompt_id IN {ids:Array(String)} "
                    "AND (prompt_id, version) IN {keys:Array(Tuple(String, UInt32))}",
                    parameters={
                        "project": project,
                        "ids": sorted({pid for pid, _ in chunk}),
                        "keys": list(chunk),
                    },
                ).result_rows
            )
        return found

    def changes(self, projects: Sequence[str], since: datetime) -> RegistryChanges:
        """Return the claims, deletes, versions and label moves stored in ``projects`` with a
        time at or after ``since`` (a poll of a collector sharing the store with others).

        Three queries, each one range of the tables' first sorting column (``project``) read
        with a filter on the rows' own time column: a claim's ``created_at`` or a delete's
        ``deleted_at``, a version's ``created_at``, a label move's ``updated_at``. The times
        are the writers' clocks, so the caller reads from a little before its last poll.
        """
        params: dict[str, Any] = {"projects": list(projects), "since": since}
        claims = [
            (str(r[0]), str(r[1]), int(r[2]), str(r[3]), bool(r[4]))
            for r in self._client.query(
                f"SELECT project, name, generation, prompt_id, is_deleted FROM {self._prompts} "
                "WHERE project IN {projects:Array(String)} "
                "AND greatest(created_at, deleted_at) >= {since:DateTime64(3, 'UTC')} "
                "ORDER BY project, name, generation, row_version",
                parameters=params,
            ).result_rows
        ]
        if not claims and since <= _EPOCH:
            # A read from the epoch is a whole read of the projects (the chat links read so at
            # a collector's start and on a project's first use). With no claim, none of their
            # versions is reachable (a version goes in before its claim, which commits it) and
            # no label can point at one: a new or empty registry costs one query, not three. A
            # prompt claimed after this read reaches the reader as every later write does (its
            # own writes, or the next poll), as it would after the other two queries.
            return RegistryChanges(claims=[], versions=[], labels=[])
        versions = [
            (str(r[0]), _packed_version(r[1], r[2]))
            for r in self._client.query(
                f"SELECT project, {VERSION_COLUMNS} FROM {self._versions} "
                "WHERE project IN {projects:Array(String)} "
                "AND created_at >= {since:DateTime64(3, 'UTC')} "
                "ORDER BY project, prompt_id, version",
                parameters=params,
            ).result_rows
        ]
        # The winner of each moved label (the newest move, as FINAL would keep), not each move.
        labels = [
            (str(r[0]), str(r[1]), str(r[2]), int(r[3]), utc(r[4]))
            for r in self._client.query(
                "SELECT project, prompt_id, label, argMax(version, updated_at), max(updated_at) "
                f"FROM {self._labels} WHERE project IN {{projects:Array(String)}} "
                f"AND (project, prompt_id, label) IN (SELECT project, prompt_id, label "
                f"FROM {self._labels} WHERE project IN {{projects:Array(String)}} "
                "AND updated_at >= {since:DateTime64(6, 'UTC')}) "
                "GROUP BY project, prompt_id, label",
                parameters=params,
            ).result_rows
        ]
        return RegistryChanges(claims=claims, versions=versions, labels=labels)

    # -- versions --------------------------------------------------------------------------

    def _pick_version(self, params: dict[str, Any], number: int | None, label: str | None) -> str:
        """Return the filter that picks a version (newest when neither is given)."""
        if number is not None:
            params["number"] = number
            return "AND version = {number:UInt32}"
        if label is not None:
            params["label"] = label
            return (
                f"AND version = (SELECT version FROM {self._labels} FINAL "
                "WHERE project = {project:String} AND prompt_id = pid "
                "AND label = {label:String} LIMIT 1)"
            )
        return ""

    def version(
        self, project: str, ref: PromptRef, number: int | None = None, label: str | None = None
    ) -> PromptVersionRow | None:
        """Return one version of a live prompt: the newest, a number, or a label's target."""
        params: dict[str, Any] = {"project": project, "ref": ref.value}
        return self._one_version(self._live_id_subquery(ref), params, number, label)

    def version_at(self, project: str, prompt_id: str, version: int) -> PromptVersionRow | None:
        """Return one version of a prompt by stored id and number, without checking it is live.

        For callers that know the prompt is live and which version they want (the embedded
        store's live-id index): one point read on the full sorting key, no sort, no subquery.
        """
        rows = self._point_rows(
            f"SELECT {VERSION_COLUMNS} FROM {self._versions} "
            "WHERE project = {project:String} AND prompt_id = {pid:String} "
            "AND version = {v:UInt32} LIMIT 1",
            project=project,
            pid=prompt_id,
            v=version,
        )
        return _packed_version(rows[0][0], rows[0][1]) if rows else None

    def _one_version(
        self, pid: str, params: dict[str, Any], number: int | None, label: str | None
    ) -> PromptVersionRow | None:
        """Read the version :meth:`_pick_version` names of the prompt ``pid`` (an expression)."""
        where = self._pick_version(params, number, label)
        rows = self._point_rows(
            f"WITH {pid} AS pid SELECT {VERSION_COLUMNS} FROM {self._versions} "
            f"WHERE project = {{project:String}} AND prompt_id = pid {where} "
            "ORDER BY version DESC LIMIT 1",
            **params,
        )
        return _packed_version(rows[0][0], rows[0][1]) if rows else None

    def versions(
        self,
        project: str,
        prompt_id: str,
        before: int | None = None,
        limit: int | None = None,
    ) -> list[PromptVersionRow]:
        """Return a prompt's versions newest first: those numbered below ``before`` if given,
        at most ``limit`` of them if given (a range of the sorting key, read backwards)."""
        params: dict[str, Any] = {"project": project, "pid": prompt_id}
        below = ""
        if before is not None:
            below = "AND version < {before:UInt32} "
            params["before"] = before
        most = ""
        if limit is not None:
            most = " LIMIT {limit:UInt32}"
            params["limit"] = limit
        rows = self._point_rows(
            f"SELECT {VERSION_COLUMNS} FROM {self._versions} "
            "WHERE project = {project:String} AND prompt_id = {pid:String} "
            f"{below}ORDER BY version DESC{most}",
            **params,
        )
        return [_packed_version(r[0], r[1]) for r in rows]

    # -- list ------------------------------------------------------------------------------

    def list_heads(
        self,
        project: str,
        filters: ListFilter,
        after: tuple[datetime, str] | None,
        limit: int,
    ) -> tuple[list[PromptHeadRow], int | None]:
        """Return one page of live prompts, newest first, and the count matching the filters.

        The count comes from a window over the filtered set, so it is None only when the
        cursor is past the last match (the caller then asks :meth:`count_heads`).
        """
        where, params = self._list_where(project, filters)
        cursor_sql = ""
        if after is not None:
            cursor_sql = (
                "WHERE (prompt_created_at, prompt_id) < ({after_at:DateTime64(3, 'UTC')}, "
                "{after_id:String})"
            )
            params.update(after_at=after[0], after_id=after[1])
        params["limit"] = limit
        rows = self._client.query(
            "SELECT prompt_id, name, description, version, prompt_created_at, total, tags, "
            "folder FROM (SELECT prompt_id, name, description, version, prompt_created_at, "
            "tags, folder, "
            f"count() OVER () AS total FROM {self._heads_source} WHERE {where}) "
            f"{cursor_sql} ORDER BY prompt_created_at DESC, prompt_id DESC "
            "LIMIT {limit:UInt32}",
            parameters=params,
        ).result_rows
        heads = [
            PromptHeadRow(
                prompt_id=r[0],
                name=r[1],
                description=r[2],
                version=int(r[3]),
                prompt_created_at=utc(r[4]),
                tags=list(r[6]),
                folder=r[7],
            )
            for r in rows
        ]
        return heads, (int(rows[0][5]) if rows else None)

    def count_heads(self, project: str, filters: ListFilter) -> int:
        """Count live prompts matching the filters."""
        where, params = self._list_where(project, filters)
        rows = self._client.query(
            f"SELECT count() FROM {self._heads_source} WHERE {where}", parameters=params
        ).result_rows
        return int(rows[0][0])

    def _list_where(self, project: str, filters: ListFilter) -> tuple[str, dict[str, Any]]:
        clauses = [
            "project = {project:String}",
            f"prompt_id IN (SELECT prompt_id FROM {self._prompts} FINAL "
            "WHERE project = {project:String} AND is_deleted = 0)",
        ]
        params: dict[str, Any] = {"project": project}
        if filters.tags:
            clauses.append("hasAll(tags, {tags:Array(String)})")
            params["tags"] = filters.tags
        if filters.folder is not None:
            clauses.append(
                "(folder = {folder:String} OR startsWith(folder, {folder_prefix:String}))"
            )
            params["folder"] = filters.folder
            params["folder_prefix"] = filters.folder.rstrip("/") + "/"
        if filters.search:
            clauses.append(
                "(positionCaseInsensitiveUTF8(name, {q:String}) > 0 "
                "OR positionCaseInsensitiveUTF8(description, {q:String}) > 0)"
            )
            params["q"] = filters.search
        return " AND ".join(clauses), params

    # -- labels ----------------------------------------------------------------------------

    def labels(self, project: str, prompt_id: str) -> list[tuple[str, int, datetime]]:
        """Return (label, version, updated_at) of the prompt's attached labels, by name."""
        rows = self._point_rows(
            f"SELECT label, version, updated_at FROM {self._labels} FINAL "
            "WHERE project = {project:String} AND prompt_id = {pid:String} AND version > 0 "
            "ORDER BY label",
            project=project,
            pid=prompt_id,
        )
        return [(str(r[0]), int(r[1]), utc(r[2])) for r in rows]
