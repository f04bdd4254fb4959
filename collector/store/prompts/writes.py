"""The registry's writes: new versions, name claims and soft deletes, label moves.

Writes never update in place. A create or a new version is an insert whose
``insert_deduplication_token`` names the slot it claims (a name's generation, a prompt's
version number): ClickHouse keeps only the first insert per token, so reading the slot back
tells the writer whether it won. That is a compare-and-set without transactions, and it holds
across collectors because the dedup log lives with the table (in Keeper on a cluster). On the
embedded store the slot table of :mod:`.group_commit` decides instead, and nothing is read
back.

Apart from the reads because this is where a slot is taken: the read-backs here
(:meth:`PromptWrites.name_state` and the version owner's) serve that decision.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from .base import PromptStoreBase
from .group_commit import _Pending
from .rows import PromptVersionRow, _version_values
from .tables import PROMPT_LABELS, PROMPT_VERSIONS, PROMPTS


def _version_token(project: str, prompt_id: str, version: int) -> str:
    return f"version/{project}/{prompt_id}/{version}"


def _claim_token(project: str, name: str, generation: int) -> str:
    return f"claim/{project}/{name}/{generation}"


class PromptWrites(PromptStoreBase):
    """The queries that write the prompt tables (and the reads that decide a write)."""

    # -- versions --------------------------------------------------------------------------

    def try_insert_version(self, project: str, row: PromptVersionRow) -> bool:
        """Insert a version if its number is free; return whether this writer got it."""
        return self.insert_version(project, row) == row.version_id

    def insert_version(self, project: str, row: PromptVersionRow) -> str | None:
        """Insert a version if its number is free; return the version id stored at the number.

        The row's own ``version_id`` when this writer got the number, another writer's when it
        lost the race (the number is then stored all the same), None if nothing is stored.
        On the embedded store the slot table decides and nothing is read back.
        """
        if self._writes is not None:
            return self._insert_version_embedded(project, row)
        token = _version_token(project, row.prompt_id, row.version)
        readback = (
            f"SELECT toString(version_id) FROM {self._versions} "
            "WHERE project = {project:String} AND prompt_id = {pid:String} "
            "AND version = {v:UInt32} LIMIT 1"
        )
        keys = {"project": project, "pid": row.prompt_id, "v": row.version}
        self._insert(
            PROMPT_VERSIONS,
            _version_values(project, row),
            {**self._write_settings, "insert_deduplication_token": token},
        )
        rows = self._client.query(
            readback, parameters=keys, settings=self._readback_settings
        ).result_rows
        return str(rows[0][0]) if rows else None

    def _insert_version_embedded(self, project: str, row: PromptVersionRow) -> str | None:
        """Take the number in the slot table and store the row with whoever else is waiting.

        A number already taken (by another store client of this database: one client's
        writers of a prompt take turns) waits until every queued write is stored and reads
        the number's owner, as the read-back does elsewhere.
        """
        writes = self._writes
        assert writes is not None
        key = (project, row.prompt_id)
        with writes.cond:
            top = writes.known(
                writes.versions,
                key,
                row.version - 1,
                lambda: self._top_version(project, row.prompt_id),
            )
            mine = row.version > top
            if mine:
                writes.versions[key] = row.version
                pending = writes.enqueue(
                    _Pending({PROMPT_VERSIONS.name: [_version_values(project, row)]})
                )
        if mine:
            self._commit(pending)
            return row.version_id
        self._writes_barrier()
        return self._version_id_at(project, row.prompt_id, row.version)

    def _top_version(self, project: str, prompt_id: str) -> int:
        rows = self._point_rows(
            f"SELECT max(version) FROM {self._versions} "
            "WHERE project = {project:String} AND prompt_id = {pid:String}",
            project=project,
            pid=prompt_id,
        )
        return int(rows[0][0]) if rows and rows[0][0] else 0

    def _version_id_at(self, project: str, prompt_id: str, version: int) -> str | None:
        rows = self._point_rows(
            f"SELECT toString(version_id) FROM {self._versions} "
            "WHERE project = {project:String} AND prompt_id = {pid:String} "
            "AND version = {v:UInt32} LIMIT 1",
            project=project,
            pid=prompt_id,
            v=version,
        )
        return str(rows[0][0]) if rows else None

    # -- names: claim and soft delete ------------------------------------------------------

    def name_state(self, project: str, name: str) -> tuple[int, bool]:
        """Return (highest generation used, whether that generation is live) for a name."""
        rows = self._point_rows(
            f"SELECT generation, is_deleted FROM {self._prompts} FINAL "
            "WHERE project = {project:String} AND name = {name:String} "
            "ORDER BY generation DESC LIMIT 1",
            project=project,
            name=name,
        )
        if not rows:
            return 0, False
        return int(rows[0][0]), not rows[0][1]

    def create(self, project: str, row: PromptVersionRow, generation: int) -> bool:
        """Store a new prompt's first version, then claim its name's ``generation``; return
        whether this writer got the claim.

        The version goes in first and stays unreachable until the claim, the commit point,
        succeeds: a lost race leaves an unreachable row, never a half prompt. On the embedded
        store the slot table decides, and both rows go in one group commit, version first.
        """
        claim = [
            project,
            row.name,
            generation,
            row.prompt_id,
            row.prompt_created_at,
            0,
            row.prompt_created_at,
            1,
        ]
        if self._writes is not None:
            return self._create_embedded(project, row, claim, generation)
        self.insert_version(project, row)
        return self.try_claim_name(
            project, row.name, generation, row.prompt_id, row.prompt_created_at
        )

    def _create_embedded(
        self, project: str, row: PromptVersionRow, claim: list[Any], generation: int
    ) -> bool:
        """Claim the generation in the slot table if the name is not live and the generation
        is new, and store version 1 and the claim with whoever else is waiting."""
        writes = self._writes
        assert writes is not None
        key = (project, row.name)
        with writes.cond:
            state = writes.known(
                writes.names,
                key,
                (generation - 1, False),
                lambda: self.name_state(project, row.name),
            )
            mine = generation > state[0] and not state[1]
            if mine:
                writes.names[key] = (generation, True)
                writes.versions[(project, row.prompt_id)] = row.version
                pending = writes.enqueue(
                    _Pending(
                        {
                            PROMPT_VERSIONS.name: [_version_values(project, row)],
                            PROMPTS.name: [claim],
                        },
                        claim=key,
                    )
                )
        if mine:
            self._commit(pending)
            return True
        # Lost to a write of another store client: once it is stored, the caller asks the store.
        self._writes_barrier()
        return False

    def _claim_readback(self) -> str:
        return (
            f"SELECT prompt_id FROM {self._prompts} FINAL WHERE project = {{project:String}} "
            "AND name = {name:String} AND generation = {g:UInt32} LIMIT 1"
        )

    def try_claim_name(
        self, project: str, name: str, generation: int, prompt_id: str, created_at: datetime
    ) -> bool:
        """Claim a name's generation for a prompt; return whether this writer got it."""
        self._insert(
            PROMPTS,
            [project, name, generation, prompt_id, created_at, 0, created_at, 1],
            {
                **self._write_settings,
                "insert_deduplication_token": _claim_token(project, name, generation),
            },
        )
        winner = self._client.query(
            self._claim_readback(),
            parameters={"project": project, "name": name, "g": generation},
            settings=self._readback_settings,
        ).result_rows
        return bool(winner) and winner[0][0] == prompt_id

    def mark_deleted(self, project: str, prompt_id: str, deleted_at: datetime) -> str | None:
        """Soft-delete a live prompt; return its name, or None if it was not live."""
        rows = self._point_rows(
            f"SELECT name, generation, created_at FROM {self._prompts} FINAL "
            "WHERE project = {project:String} AND prompt_id = {pid:String} AND is_deleted = 0 "
            "LIMIT 1",
            project=project,
            pid=prompt_id,
        )
        if not rows:
            return None
        name, generation, created_at = rows[0]
        self._insert(
            PROMPTS,
            [project, name, generation, prompt_id, created_at, 1, deleted_at, 2],
            {"insert_deduplication_token": f"delete/{project}/{name}/{generation}"},
        )
        if self._writes is not None:
            with self._writes.cond:
                key = (project, str(name))
                if self._writes.names.get(key, (0, False))[0] <= int(generation):
                    self._writes.names[key] = (int(generation), False)
        return str(name)

    # -- labels ----------------------------------------------------------------------------

    def set_label(
        self, project: str, prompt_id: str, label: str, version: int, at: datetime
    ) -> None:
        """Point a label at a version (0 removes it)."""
        values = [project, prompt_id, label, version, at]
        if self._writes is not None:
            with self._writes.cond:
                pending = self._writes.enqueue(_Pending({PROMPT_LABELS.name: [values]}))
            self._commit(pending)
            return
        self._insert(PROMPT_LABELS, values, {})
