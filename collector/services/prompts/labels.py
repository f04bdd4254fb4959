"""A prompt's labels: listing them, moving one to a version, removing one.

A label move is stored and then applied to the live-id index under the project's write lock,
with a stamp later than every earlier move of the project, so the store's last-writer-wins
order is the order the index applies them (:meth:`LiveIdIndex.stamp`). Creates and PATCHes
that carry labels move them through :meth:`PromptLabels._attach_labels`. ``latest`` is not a
stored label: it always names the newest version and can be neither set nor removed.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Protocol

from ...errors import LabelNotFound, ValidationFailed
from ...models.prompts import check_label
from ...store.prompts import PromptVersionRow
from .base import LATEST, PromptServiceBase


class LabelGuard(Protocol):
    """Refuses the request's caller a change of a protected label (services/protected_labels.py)."""

    def check(self, project: str, labels: Iterable[str]) -> None:
        """Raise when the caller may not change one of ``labels`` in ``project``."""
        ...

    def restricted(self, project: str) -> bool:
        """Whether the caller would be refused some label change in ``project``."""
        ...


class PromptLabels(PromptServiceBase):
    """The label routes' rules, and the label moves every write shares."""

    # Set by the services container; None (a service built without one): no label is protected.
    label_guard: LabelGuard | None = None

    def _check_protected(self, project: str, labels: Iterable[str]) -> None:
        """Before anything is stored: refuse a change of a protected label."""
        if self.label_guard is not None:
            self.label_guard.check(project, labels)

    def labels(self, project: str, ref_text: str) -> list[tuple[str, int, datetime]]:
        """Return the prompt's labels and the versions they point at."""
        return self._store.labels(project, self._live_id(project, ref_text))

    def move_label(
        self, project: str, ref_text: str, label: str, version: int
    ) -> tuple[str, int, datetime]:
        """Attach a label to a version, moving it off any other."""
        self._check_settable(label)
        self._check_protected(project, [label])
        row = self._version_for_write(project, ref_text, version)
        at = self._set_labels(project, row.prompt_id, [label], row.version, row)
        self._cache.invalidate(project)
        return label, row.version, at

    def remove_label(self, project: str, ref_text: str, label: str) -> None:
        """Detach a label; 404 LABEL_NOT_FOUND when it is not attached (however it is spelt)."""
        self._check_removable(label)
        self._check_protected(project, [label])
        prompt_id = self._write_id(project, ref_text)
        if label not in {name for name, _, _ in self._store.labels(project, prompt_id)}:
            raise LabelNotFound(ref_text, label)
        self._set_labels(project, prompt_id, [label], 0)
        self._cache.invalidate(project)

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

    @staticmethod
    def _check_settable(label: str) -> None:
        try:
            check_label(label)
        except ValueError as exc:
            raise ValidationFailed("label", str(exc)) from None
        PromptLabels._check_removable(label)

    @staticmethod
    def _check_removable(label: str) -> None:
        # A label a path looks up is only ever not found, whatever its spelling (as a prompt
        # name is); `latest` is the exception: it always exists and can never be detached.
        if label == LATEST:
            raise ValidationFailed(
                "label", "'latest' is reserved: it always means the newest version"
            )
