"""The registry's writes that make or end a prompt: create, PATCH, rollback and delete.

A create claims the name's next generation and stores version 1 (:meth:`PromptWrites.create`);
a PATCH or rollback stores version N+1 built from version N (:meth:`PromptWrites._next_version`);
a delete soft-deletes the live prompt. Each write is stored first and applied to the live-id
index after, and a write whose outcome is unknown drops the project's index, so the index
never holds what the store may lack (collector/services/prompts/DESIGN.md, "Live-id index").
What a version's fields are is decided in :mod:`.fields`; here, only the numbering, the
races and the order of store, index and cache.
"""

from __future__ import annotations

import random
import time
import uuid
from dataclasses import replace
from datetime import UTC, datetime

from ...errors import PromptAlreadyExists, PromptNotFound, VersionContention
from ...models.prompts import PromptCreate, PromptUpdate, public_id
from ...store.prompts import PromptRef, PromptVersionRow
from ..dates import utc_now_ms
from .fields import Build, first_version, patched_version, restored_version
from .labels import PromptLabels

# Each lost race costs a read and an insert; this many losses in a row means something is
# wrong (a hot loop of writers), not ordinary contention.
_MAX_VERSION_ATTEMPTS = 200
# A lost name claim is retried only when the name is not live after all (another store client
# used the generation and deleted it again); a few such rounds in a row do not happen.
_MAX_CLAIM_ATTEMPTS = 5


class PromptWrites(PromptLabels):
    """Create, new versions (PATCH and rollback) and delete, with the labels they carry."""

    def create(self, project: str, body: PromptCreate) -> PromptVersionRow:
        """Create a prompt at version 1; 409 when a live prompt has the name.

        On the embedded store the name's state comes from the live-id index and the create is
        one group commit (version 1 and the name claim, stored with other writers' rows);
        creates of other names run at the same time.
        """
        self._check_protected(project, body.labels)
        row = first_version(body)
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
                    self.links.stored(project, row)
            except BaseException:
                self._ids.forget(project)  # stored or not: unknown, so load again
                self.links.forget(project)
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

    def update(self, project: str, ref_text: str, body: PromptUpdate) -> PromptVersionRow:
        """Make version N+1 from the newest version and the given fields."""
        self._check_protected(project, body.labels)
        row = self._next_version(project, ref_text, patched_version(body))
        self._attach_labels(project, row, body.labels)
        return row

    def rollback(
        self, project: str, ref_text: str, target: int, labels: list[str]
    ) -> PromptVersionRow:
        """Make version N+1 with the target version's template, model and parameters."""
        self._check_protected(project, labels)
        source = self._version_for_write(project, ref_text, target)
        row = self._next_version(project, ref_text, restored_version(source, target))
        self._attach_labels(project, row, labels)
        return row

    def _next_version(self, project: str, ref_text: str, build: Build) -> PromptVersionRow:
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
                candidate = replace(
                    build(head),
                    version=head.version + 1,
                    version_id=str(uuid.uuid4()),
                    created_at=utc_now_ms(),
                )
                try:
                    winner = self._store.insert_version(project, candidate)
                except BaseException:
                    # The number may or may not be stored: the index must not keep an older head.
                    self._ids.forget(project)
                    self.links.forget(project)
                    raise
                mine = winner == candidate.version_id
                if winner is None:
                    # Taken but not stored (a failed write of another store client): what
                    # is stored decides, so the index is loaded again.
                    self._ids.forget(project)
                    self.links.forget(project)
                else:
                    # The number is durably stored, by this writer or one that beat it: the
                    # index learns it before the cache is cleared, so no read caches an older
                    # head (a winner's row is read from the store when asked for).
                    with self._ids.writing(project):
                        self._ids.stored_version(
                            project, prompt_id, candidate.version, candidate if mine else None
                        )
                if mine:
                    self.links.stored(project, candidate)
                    self._cache.invalidate(project)
                    return candidate
                # Another writer took this number; back off a little so the herd spreads out.
                time.sleep(random.uniform(0, 0.005))
            else:
                raise VersionContention("Too many concurrent updates of this prompt; retry")
        raise PromptNotFound(ref_text)

    def delete(self, project: str, ref_text: str) -> str:
        """Soft-delete a prompt; return its public id."""
        prompt_id = self._write_id(project, ref_text)
        if self.label_guard is not None and self.label_guard.restricted(project):
            # Deleting the prompt removes its labels: a protected one needs an admin.
            self._check_protected(
                project, [n for n, _, _ in self._store.labels(project, prompt_id)]
            )
        with self._ids.writing(project):
            name = self._store.mark_deleted(project, prompt_id, datetime.now(UTC))
            if name is not None:
                self._ids.deleted(project, name, prompt_id)
                self.links.deleted(project, prompt_id)
        if name is None:
            raise PromptNotFound(ref_text)
        self._cache.invalidate(project)
        return public_id(prompt_id)
