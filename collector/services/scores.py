"""Scores, score configs and end-user feedback (docs/api-notes.md, "Scores and feedback"): the
rules between routes and store.

Every contract error of the feature is raised here: the target (exactly one of a record, a
trace or a session), the value against its type and its name's config (400 naming ``value``),
unknown ids (404 SCORE_NOT_FOUND) and feedback tokens (401 INVALID_FEEDBACK_TOKEN).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from pydantic import TypeAdapter, ValidationError

from promptrail._score_rules import name_problem, target_problem

from ..errors import (
    ContractError,
    InvalidFeedbackToken,
    ScoreNotFound,
    ValidationFailed,
)
from ..models.scores import (
    SESSION_ID_MAX_CHARS,
    FeedbackIn,
    FeedbackTokenIn,
    ScoreConfigIn,
    ScoreIn,
    infer_data_type,
    value_problem,
)
from ..store.score_rows import ScoreConfigRow, ScoreQuery, ScoreRow, ScoreValue
from ..store.scores import ScoreStore
from ..store.writes import WriteOutcome
from . import feedback_tokens
from .cursors import CursorCodec, time_key
from .feedback_tokens import KeyIds, TokenScope
from .ingest import rejection_of
from .keys import hash_key, key_id
from .refused_writes import raise_if_refused

_SCORE_IN: TypeAdapter[ScoreIn] = TypeAdapter(ScoreIn)
MAX_BATCH_SCORES = 1000

# A record's, trace's or session's scores as lists show them: per name a mean or a value.
Scores = dict[str, bool | int | float | str]


class ScoreService:
    """Write, read and delete scores; keep score configs; mint and take feedback tokens."""

    def __init__(
        self,
        store: ScoreStore,
        cursor_secret: str,
        key_hashes: Callable[[], dict[str, str]],
        active_project: Callable[[str], str | None],
        retry_after_seconds: int = 2,
    ) -> None:
        """A write the store refuses answers 503 ``STORE_UNAVAILABLE`` asking the client to
        come back in ``retry_after_seconds`` (Settings.store_retry_after_seconds)."""
        self._store = store
        self._retry_after = retry_after_seconds
        self._cursors = CursorCodec(cursor_secret, "scores")
        self._key_ids = KeyIds(key_hashes)
        self._active_project = active_project

    # -- writes ----------------------------------------------------------------------------

    def create(self, project: str, body: ScoreIn) -> ScoreRow:
        """Store one score (a repeated id replaces the score); return it."""
        row = self._row(project, body)
        self._check_configs(project, [row])
        self._stored(self._store.insert([row]))
        return row

    def batch(
        self, project: str, items: Sequence[Any]
    ) -> tuple[int, list[tuple[int, dict[str, Any]]]]:
        """Store every valid score of a batch; return how many and the rejected (index, error)."""
        if len(items) > MAX_BATCH_SCORES:
            raise ValidationFailed(
                "scores", f"a batch holds at most {MAX_BATCH_SCORES} scores", max=MAX_BATCH_SCORES
            )
        rows: list[tuple[int, ScoreRow]] = []
        rejected: list[tuple[int, dict[str, Any]]] = []
        for index, item in enumerate(items):
            try:
                rows.append((index, self._row(project, _SCORE_IN.validate_python(item))))
            except ValidationError as exc:
                rejected.append((index, rejection_of(exc, "score")))
            except ContractError as exc:
                rejected.append((index, exc.body()["error"]))
        configs = self._configs_of(project, [row for _, row in rows])
        kept: list[ScoreRow] = []
        for index, row in rows:
            try:
                _check_config(row, configs.get(row.name))
                kept.append(row)
            except ContractError as exc:
                rejected.append((index, exc.body()["error"]))
        rejected.sort(key=lambda item: item[0])
        self._stored(self._store.insert(kept))
        return len(kept), rejected

    def batch_own(
        self, project: str, rows: Sequence[ScoreRow]
    ) -> tuple[int, list[tuple[int, dict[str, Any]]]]:
        """Store scores the collector built itself (the evaluation worker's: typed rows of
        the project, each id derived from its rule and target); return how many and the
        rejected (index, error), as :meth:`batch` does.

        No body to parse: each row is checked only for what such a row may break (its name,
        its one target, its value against its type; then its name's config), as :meth:`batch`
        would refuse it. Written by :meth:`ScoreStore.insert_at_own_targets` (idempotent by
        id, as every write), in one insert however many: a pass of several rules writes
        them at once.
        """
        kept: list[ScoreRow] = []
        rejected: list[tuple[int, dict[str, Any]]] = []
        configs = self._configs_of(project, rows)
        for index, row in enumerate(rows):
            try:
                _own_row(project, row)
                _check_config(row, configs.get(row.name))
                kept.append(row)
            except ContractError as exc:
                rejected.append((index, exc.body()["error"]))
        self._stored(self._store.insert_at_own_targets(kept))
        return len(kept), rejected

    def delete(self, project: str, score_id: str) -> ScoreRow:
        """Delete a score; return what it was."""
        row = self.get(project, score_id)
        self._stored(self._store.insert([row], deleted=True))
        return row

    # -- reads -----------------------------------------------------------------------------

    def get(self, project: str, score_id: str) -> ScoreRow:
        """Return a score of the project, or raise SCORE_NOT_FOUND."""
        row = self._store.get(project, score_id)
        if row is None:
            raise ScoreNotFound(score_id)
        return row

    def page(
        self, project: str, filters: dict[str, str | None], limit: int, cursor: str | None
    ) -> tuple[list[ScoreRow], str | None]:
        """Return a page of scores, newest first, and the cursor of the next page (if any).

        ``filters``: request_id, trace_id, session_id, name, source (None: any).
        """
        after = self._cursors.after_time(cursor)
        query = ScoreQuery(
            request_id=filters.get("request_id"),
            trace_id=filters.get("trace_id"),
            session_id=filters.get("session_id"),
            name=filters.get("name"),
            source=filters.get("source"),
            after=after,
        )
        rows = self._store.page(project, query, limit + 1)
        return self._cursors.next_page(rows, limit, lambda r: time_key(r.created_at, r.id))

    def on_targets(
        self,
        project: str,
        request_ids: Sequence[str],
        trace_ids: Sequence[str] = (),
        session_ids: Sequence[str] = (),
    ) -> list[ScoreValue]:
        """Return the scores on these records, traces and sessions as means read them,
        newest first."""
        return self._store.values_on_targets(project, request_ids, trace_ids, session_ids)

    def summaries(
        self, project: str, records: Sequence[tuple[str, str | None]]
    ) -> dict[str, Scores]:
        """Per record id (of ``(id, trace_id)`` pairs), its scores by name as a list shows them:
        its own and its trace's, by :func:`score_means` (records with none left out)."""
        scores = self._store.values_on_targets(
            project, [r for r, _ in records], sorted({t for _, t in records if t})
        )
        return means_per_record(records, scores) if scores else {}

    def delete_on_records(self, project: str, request_ids: Sequence[str]) -> int:
        """Delete the scores of deleted records; return how many."""
        count, outcome = self._store.delete_for_targets(project, request_ids)
        self._stored(outcome)
        return count

    # -- configs ---------------------------------------------------------------------------

    def put_config(self, project: str, name: str, body: ScoreConfigIn) -> ScoreConfigRow:
        """Store the config of a score name; return it."""
        if not 1 <= len(name) <= 100:
            raise ValidationFailed("name", "a score name has 1 to 100 characters")
        config = ScoreConfigRow(
            name=name,
            data_type=body.data_type,
            min=body.min,
            max=body.max,
            categories=body.categories,
            description=body.description,
            updated_at=datetime.now(UTC),
        )
        self._stored(self._store.put_config(project, config))
        return config

    def configs(self, project: str) -> list[ScoreConfigRow]:
        """Return the project's score configs by name."""
        return self._store.configs(project)

    # -- feedback tokens -------------------------------------------------------------------

    def mint(self, project: str, raw_key: str, body: FeedbackTokenIn) -> tuple[str, datetime]:
        """Return a feedback token for the caller's key, and when it expires."""
        _one_target(body.request_id, body.trace_id)
        expires = int(time.time()) + body.ttl_seconds
        digest = hash_key(raw_key)
        self._key_ids.learn(key_id(digest), digest)
        scope = TokenScope(
            key_id=key_id(digest),
            request_id=body.request_id,
            trace_id=body.trace_id,
            name=body.name,
            data_type=body.data_type or ("categorical" if body.categories else None),
            categories=body.categories,
            expires=expires,
            score_id=feedback_tokens.new_score_id(),
        )
        return feedback_tokens.mint(scope, digest), datetime.fromtimestamp(expires, UTC)

    def feedback(self, token: str, body: FeedbackIn) -> ScoreRow:
        """Store an end user's vote through a token; return the score."""
        digest, scope = feedback_tokens.verify(token, self._key_ids.hash_of)
        project = self._active_project(digest)
        if project is None:  # revoked since it minted the token
            raise InvalidFeedbackToken("Invalid or expired feedback token")
        data_type = scope.data_type or infer_data_type(body.value)
        problem = value_problem(body.value, data_type)
        if problem is None and scope.categories is not None and body.value not in scope.categories:
            problem = f"the value must be one of {scope.categories}"
        if problem is not None:
            raise ValidationFailed("value", problem)
        row = ScoreRow(
            project=project,
            id=scope.score_id,
            request_id=scope.request_id,
            trace_id=scope.trace_id,
            name=scope.name,
            data_type=data_type,
            value=body.value,
            comment=body.comment,
            correction=body.correction,
            source="end_user",
            metadata={},
            created_at=stored_time(datetime.now(UTC)),
        )
        self._check_configs(project, [row])
        self._stored(self._store.insert([row]))
        return row

    # -- helpers ---------------------------------------------------------------------------

    def _stored(self, outcome: WriteOutcome) -> None:
        """Raise the 503 of a refused write (``STORE_UNAVAILABLE``, with ``Retry-After``)."""
        raise_if_refused(outcome, self._retry_after, "scores")

    def _row(self, project: str, body: ScoreIn) -> ScoreRow:
        _one_target(body.request_id, body.trace_id, body.session_id, sessions=True)
        data_type = body.data_type or infer_data_type(body.value)
        problem = value_problem(body.value, data_type)
        if problem is not None:
            raise ValidationFailed("value", problem)
        created = stored_time(body.created_at or datetime.now(UTC))
        if not datetime(1970, 1, 1, tzinfo=UTC) <= created < datetime(2200, 1, 1, tzinfo=UTC):
            raise ValidationFailed("created_at", "created_at must lie between 1970 and 2200")
        return ScoreRow(
            project=project,
            id=body.id or feedback_tokens.new_score_id(),
            request_id=body.request_id,
            trace_id=body.trace_id,
            name=body.name,
            data_type=data_type,
            value=body.value,
            comment=body.comment,
            correction=body.correction,
            source=body.source,
            metadata=body.metadata,
            created_at=created,
            session_id=body.session_id,
        )

    def _configs_of(self, project: str, rows: Sequence[ScoreRow]) -> dict[str, ScoreConfigRow]:
        if not rows:
            return {}
        return {c.name: c for c in self._store.configs(project, {r.name for r in rows})}

    def _check_configs(self, project: str, rows: Sequence[ScoreRow]) -> None:
        configs = self._configs_of(project, rows)
        for row in rows:
            _check_config(row, configs.get(row.name))


def stored_time(at: datetime) -> datetime:
    """``at`` in UTC to the millisecond, as the store keeps it (the answer matches a read)."""
    at = at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)
    return at.replace(microsecond=at.microsecond // 1000 * 1000)


def _own_row(project: str, row: ScoreRow) -> None:
    """Refuse (400) a row built by the collector that a client's score of the same fields
    would not pass: the refusals :meth:`ScoreService.batch` makes of them, by field."""
    if row.project != project:
        raise ValueError(f"a score of project {row.project!r} written in {project!r}")
    _one_target(row.request_id, row.trace_id, row.session_id, sessions=True)
    for field, problem in (
        ("name", name_problem(row.name)),
        ("value", value_problem(row.value, row.data_type)),
    ):
        if problem is not None:
            raise ValidationFailed(field, problem)
    if row.session_id is not None and not 1 <= len(row.session_id) <= SESSION_ID_MAX_CHARS:
        raise ValidationFailed(
            "session_id", f"session_id must be 1 to {SESSION_ID_MAX_CHARS} characters"
        )
    problem = target_problem(row.request_id, row.trace_id) if row.session_id is None else None
    if problem is not None:
        raise ValidationFailed("trace_id" if row.trace_id else "request_id", problem)


def _one_target(
    request_id: str | None,
    trace_id: str | None,
    session_id: str | None = None,
    sessions: bool = False,
) -> None:
    """Refuse (400) a score (``sessions``: it may be on a session) or a token naming no target
    or more than one; the field named is request_id when none is given, else the second."""
    given = [
        name
        for name, value in (
            ("request_id", request_id),
            ("trace_id", trace_id),
            ("session_id", session_id),
        )
        if value is not None
    ]
    if len(given) != 1:
        raise ValidationFailed(
            given[1] if given else "request_id",
            "give exactly one of request_id, trace_id and session_id"
            if sessions
            else "give exactly one of request_id and trace_id",
        )


def _check_config(row: ScoreRow, config: ScoreConfigRow | None) -> None:
    """Refuse (400 naming ``value``) a score outside its name's config."""
    if config is None:
        return
    problem = value_problem(row.value, config.data_type)
    if problem is None and row.data_type != config.data_type:
        problem = f"scores named '{row.name}' are {config.data_type}"
    if problem is None and config.data_type == "numeric":
        number = float(row.value)
        if (
            (config.min is not None and number < config.min)
            or (config.max is not None and number > config.max)
            or not math.isfinite(number)
        ):
            problem = f"the value must lie between {config.min} and {config.max}"
    if problem is None and config.categories is not None and row.value not in config.categories:
        problem = f"the value must be one of {config.categories}"
    if problem is not None:
        raise ValidationFailed("value", problem, name=row.name)


def score_means(scores: Sequence[ScoreValue]) -> Scores:
    """Per score name: the mean of the numeric and boolean values (true = 1), or the newest
    value when the newest is categorical (``scores`` newest first), as list items show."""
    by_name: dict[str, list[ScoreValue]] = {}
    for score in scores:
        by_name.setdefault(score.name, []).append(score)
    means: Scores = {}
    for name, named in by_name.items():
        numbers = [n for n in (s.value_number for s in named) if n is not None]
        if named[0].data_type == "categorical" or not numbers:
            means[name] = named[0].value
        else:
            means[name] = sum(numbers) / len(numbers)
    return means


def means_per_record(
    records: Sequence[tuple[str, str | None]], scores: Sequence[ScoreValue]
) -> dict[str, Scores]:
    """Per record id of ``(id, trace_id)`` pairs: the :func:`score_means` of its own scores
    and its trace's (``scores`` newest first); records with none left out."""
    found: dict[str, Scores] = {}
    for record, trace in records:
        mine = [s for s in scores if s.request_id == record or (trace and s.trace_id == trace)]
        if mine:
            found[record] = score_means(mine)
    return found
