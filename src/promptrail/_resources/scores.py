"""``client.scores``: scores on records, traces and sessions, score configs and feedback tokens
(docs/api-notes.md, "Scores and feedback").

Each endpoint is described once, by a function returning a :class:`~promptrail._api_call.Call`;
:class:`Scores` and :class:`AsyncScores` only send them. Give scores your own ``id`` to make a
retry safe: a score posted again with the same id replaces the first one.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Literal

from .._api_call import Call, Page, body_of, data_list_of, data_of, page_of, params, segment
from .._http import AsyncHTTP, SyncHTTP
from .._types import BatchResult, FeedbackToken, Score, ScoreConfig

DataType = Literal["numeric", "boolean", "categorical"]
Source = Literal["api", "sdk", "annotation", "eval", "end_user"]
ScoreValue = bool | int | float | str
# Named here: inside the resource classes, ``list`` is the method.
ScoreConfigs = list[ScoreConfig]

# -- the calls ---------------------------------------------------------------------------------


def _create(fields: Mapping[str, Any]) -> Call[Score]:
    return Call("POST", "/v1/scores", data_of(Score), body=body_of(**fields))


def _batch(scores: Iterable[Mapping[str, Any]]) -> Call[BatchResult]:
    body = {"scores": [body_of(**score) for score in scores]}
    return Call("POST", "/v1/scores/batch", data_of(BatchResult), body=body)


def _list_page(
    request_id: str | None,
    trace_id: str | None,
    session_id: str | None,
    name: str | None,
    source: str | None,
    limit: int | None,
) -> Callable[[str | None], Call[Page[Score]]]:
    def page(cursor: str | None) -> Call[Page[Score]]:
        query = params(
            request_id=request_id,
            trace_id=trace_id,
            session_id=session_id,
            name=name,
            source=source,
            limit=limit,
            cursor=cursor,
        )
        return Call("GET", "/v1/scores", page_of(Score), params=query)

    return page


def _get(score_id: str) -> Call[Score]:
    return Call("GET", f"/v1/scores/{segment(score_id)}", data_of(Score))


def _delete(score_id: str) -> Call[Score]:
    return Call("DELETE", f"/v1/scores/{segment(score_id)}", data_of(Score))


def _token(fields: Mapping[str, Any]) -> Call[FeedbackToken]:
    return Call("POST", "/v1/scores/tokens", data_of(FeedbackToken), body=body_of(**fields))


def _set_config(name: str, fields: Mapping[str, Any]) -> Call[ScoreConfig]:
    path = f"/v1/score-configs/{segment(name)}"
    return Call("PUT", path, data_of(ScoreConfig), body=body_of(**fields))


def _configs() -> Call[list[ScoreConfig]]:
    return Call("GET", "/v1/score-configs", data_list_of(ScoreConfig))


def _score_fields(
    name: str,
    value: ScoreValue,
    request_id: str | None,
    trace_id: str | None,
    comment: str | None,
    correction: str | None,
    id: str | None,
    data_type: DataType | None,
    metadata: Mapping[str, Any] | None,
    source: Source | None,
    session_id: str | None,
) -> dict[str, Any]:
    # The collector checks that exactly one target is given and refuses (400, naming the
    # second) as promptrail.score() drops: "give exactly one of request_id, trace_id and
    # session_id".
    return {
        "id": id,
        "request_id": request_id,
        "trace_id": trace_id,
        "session_id": session_id,
        "name": name,
        "value": value,
        "data_type": data_type,
        "comment": comment,
        "correction": correction,
        "metadata": metadata,
        "source": source,
    }


def _token_fields(
    name: str,
    request_id: str | None,
    trace_id: str | None,
    data_type: DataType | None,
    categories: Sequence[str] | None,
    ttl_seconds: int | None,
) -> dict[str, Any]:
    return {
        "request_id": request_id,
        "trace_id": trace_id,
        "name": name,
        "data_type": data_type,
        "categories": list(categories) if categories is not None else None,
        "ttl_seconds": ttl_seconds,
    }


def _config_fields(
    data_type: DataType,
    min: float | None,
    max: float | None,
    categories: Sequence[str] | None,
    description: str | None,
) -> dict[str, Any]:
    return {
        "data_type": data_type,
        "min": min,
        "max": max,
        "categories": list(categories) if categories is not None else None,
        "description": description,
    }


# -- sync --------------------------------------------------------------------------------------


class Scores:
    """Score records, traces and sessions, read and delete scores, mint feedback tokens."""

    def __init__(self, http: SyncHTTP) -> None:
        self._http = http

    def create(
        self,
        name: str,
        value: ScoreValue,
        *,
        request_id: str | None = None,
        trace_id: str | None = None,
        session_id: str | None = None,
        comment: str | None = None,
        correction: str | None = None,
        id: str | None = None,
        data_type: DataType | None = None,
        metadata: Mapping[str, Any] | None = None,
        source: Source | None = None,
    ) -> Score:
        """Score one record (``request_id``), one trace (``trace_id``) or one session
        (``session_id``, its records' ``metadata.session_id``): exactly one of them, else
        :class:`promptrail.ValidationError` ("give exactly one of request_id, trace_id and
        session_id", as :func:`promptrail.score` drops such a score).

        The record, trace or session need not exist yet. ``id`` (1-128 of ``[A-Za-z0-9_.:-]``)
        makes a retry safe: the same id replaces the score. ``data_type`` defaults from the
        value.

        >>> client.scores.create("helpfulness", 0.8, request_id="req_...", comment="good")
        >>> client.scores.create("resolved", True, session_id="chat-42")
        """
        fields = _score_fields(
            name,
            value,
            request_id,
            trace_id,
            comment,
            correction,
            id,
            data_type,
            metadata,
            source,
            session_id,
        )
        return self._http.call(_create(fields))

    def batch(self, scores: Iterable[Mapping[str, Any]]) -> BatchResult:
        """Store many scores (each a mapping of :meth:`create`'s fields, ``session_id`` too);
        each refused one (a bad target among them) is reported by index, the others stored."""
        return self._http.call(_batch(scores))

    def list(
        self,
        *,
        request_id: str | None = None,
        trace_id: str | None = None,
        session_id: str | None = None,
        name: str | None = None,
        source: Source | None = None,
        limit: int | None = None,
    ) -> Iterator[Score]:
        """Iterate over scores, newest first, fetching pages of ``limit`` as needed.

        ``session_id`` lists the scores given to that session itself (not its records').
        """
        return self._http.paginate(
            _list_page(request_id, trace_id, session_id, name, source, limit)
        )

    def get(self, score_id: str) -> Score:
        """Return one score (:class:`promptrail.NotFoundError` ``SCORE_NOT_FOUND`` if none)."""
        return self._http.call(_get(score_id))

    def delete(self, score_id: str) -> Score:
        """Delete one score; return what it was."""
        return self._http.call(_delete(score_id))

    def token(
        self,
        name: str,
        *,
        request_id: str | None = None,
        trace_id: str | None = None,
        data_type: DataType | None = None,
        categories: Sequence[str] | None = None,
        ttl_seconds: int | None = None,
    ) -> FeedbackToken:
        """Mint a feedback token on the collector: an end user posts one score with it, no key.

        :func:`promptrail.feedback_token` makes the same token locally, with no round trip.
        """
        fields = _token_fields(name, request_id, trace_id, data_type, categories, ttl_seconds)
        return self._http.call(_token(fields))

    def set_config(
        self,
        name: str,
        data_type: DataType,
        *,
        min: float | None = None,
        max: float | None = None,
        categories: Sequence[str] | None = None,
        description: str | None = None,
    ) -> ScoreConfig:
        """Set the rule scores named ``name`` must follow from now on (type, range, categories)."""
        fields = _config_fields(data_type, min, max, categories, description)
        return self._http.call(_set_config(name, fields))

    def configs(self) -> ScoreConfigs:
        """Return every score config of the project."""
        return self._http.call(_configs())


# -- async -------------------------------------------------------------------------------------


class AsyncScores:
    """Score records, traces and sessions, read and delete scores, mint feedback tokens
    (``await`` each)."""

    def __init__(self, http: AsyncHTTP) -> None:
        self._http = http

    async def create(
        self,
        name: str,
        value: ScoreValue,
        *,
        request_id: str | None = None,
        trace_id: str | None = None,
        session_id: str | None = None,
        comment: str | None = None,
        correction: str | None = None,
        id: str | None = None,
        data_type: DataType | None = None,
        metadata: Mapping[str, Any] | None = None,
        source: Source | None = None,
    ) -> Score:
        """Score one record, one trace or one session (see :meth:`Scores.create`)."""
        fields = _score_fields(
            name,
            value,
            request_id,
            trace_id,
            comment,
            correction,
            id,
            data_type,
            metadata,
            source,
            session_id,
        )
        return await self._http.call(_create(fields))

    async def batch(self, scores: Iterable[Mapping[str, Any]]) -> BatchResult:
        """Store many scores (see :meth:`Scores.batch`)."""
        return await self._http.call(_batch(scores))

    def list(
        self,
        *,
        request_id: str | None = None,
        trace_id: str | None = None,
        session_id: str | None = None,
        name: str | None = None,
        source: Source | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[Score]:
        """Iterate (``async for``) over scores, newest first, page by page as needed."""
        return self._http.paginate(
            _list_page(request_id, trace_id, session_id, name, source, limit)
        )

    async def get(self, score_id: str) -> Score:
        """Return one score."""
        return await self._http.call(_get(score_id))

    async def delete(self, score_id: str) -> Score:
        """Delete one score; return what it was."""
        return await self._http.call(_delete(score_id))

    async def token(
        self,
        name: str,
        *,
        request_id: str | None = None,
        trace_id: str | None = None,
        data_type: DataType | None = None,
        categories: Sequence[str] | None = None,
        ttl_seconds: int | None = None,
    ) -> FeedbackToken:
        """Mint a feedback token on the collector (see :meth:`Scores.token`)."""
        fields = _token_fields(name, request_id, trace_id, data_type, categories, ttl_seconds)
        return await self._http.call(_token(fields))

    async def set_config(
        self,
        name: str,
        data_type: DataType,
        *,
        min: float | None = None,
        max: float | None = None,
        categories: Sequence[str] | None = None,
        description: str | None = None,
    ) -> ScoreConfig:
        """Set the rule scores named ``name`` must follow (see :meth:`Scores.set_config`)."""
        fields = _config_fields(data_type, min, max, categories, description)
        return await self._http.call(_set_config(name, fields))

    async def configs(self) -> ScoreConfigs:
        """Return every score config of the project."""
        return await self._http.call(_configs())
