"""Filters of the request log as SQL: WHERE clauses, keyset positions and time windows.

Every clause is parameterised (``{name:Type}`` placeholders); a filter is always scoped to a
project.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from .score_sql import ScoreTest, score_clauses

# The names the service's own traffic takes (experiments, the playground, online evaluation):
# hidden unless ``environment=`` names them (docs/api-notes.md, Environments).
RESERVED_PREFIX = "promptrail-"

# Extra rows read per page, so that a few retried duplicates rarely need a second fetch.
SLACK = 8

# The lower bounds on created_at a list page tries in turn below its anchor (the cursor's
# time, else the filter's end, else now), then none. The log is sorted by time and partitioned
# by month, and its parts cover disjoint stretches of time: a bound lets ClickHouse skip every
# part older than it before reading, where reading newest first still sets up a stream per
# part: a page within a day costs well under half of one over the whole log. A page the window
# cannot fill goes on below it, from where it stopped. Metadata pages read their index entries
# the same way.
_WINDOWS = (timedelta(days=1), timedelta(days=8))
# A score filter reads the sums of its window's records (store/scores.py score_clauses), a
# cost that grows with the window: it tries the newest 2 hours first, then 4 hours before
# the day. A pass costs ~15 ms at 1M records over 30 days even over minutes, and ~2 ms more
# an hour of records (~1,400): 2 hours rather than 1 cost a page ~2 ms and spare a second
# pass (~20 ms) to the bounds that 0.75-1.5% of records pass (~2% of random bounds of a
# mean; ~1% then need one). A page the first window cannot fill reads ~5,500 records' sums,
# not ~33,000 (a 4 h pass cost half of a day's in process).
_SCORE_WINDOWS = (timedelta(hours=2), timedelta(hours=4), *_WINDOWS)
# After a window that could not fill a score-filtered page, how many times over the next one
# holds the rows still needed at the density the page saw: see :func:`reach`.
_REACH_MARGIN = 2.0

# How a page is read, newest first by the sort key. Each part is a stream read backwards from
# its newest granule; with virtual rows ClickHouse starts a part only once the merge of the
# streams reaches the part's first key, so a page of the newest records reads the newest part
# or two, not a granule of every part. Lazy materialisation reads the sort key and filter
# columns first and the wide ones (output, input variables, metadata) only for the rows kept;
# its default limit (10 rows) is below a page's. No JIT: ClickHouse compiles an expression
# once it has seen it three times, its constants included, so each new score bound
# (``score.<name>.min=0.37``) cost a page 20-40 ms of compiling on its third use, for a few
# thousand rows that gain nothing from compiled code (docs/architecture.md).
PAGE_READ: dict[str, Any] = {
    "read_in_order_use_virtual_row": 1,
    "query_plan_max_limit_for_lazy_materialization": 1000,
    "compile_expressions": 0,
}


@dataclass(frozen=True)
class RequestFilter:
    """Filters shared by list, export, delete and analytics."""

    prompt_name: str | None = None
    status: str | None = None
    model: str | None = None
    start: datetime | None = None
    end: datetime | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    trace_id: str | None = None
    # The record kinds kept (docs/api-notes.md, "Traces, sessions and users"); None keeps every
    # kind.
    kinds: tuple[str, ...] | None = None
    # The environments kept (docs/api-notes.md, Environments); None keeps every one, but with
    # ``public_only`` (the views' default) not the service's own (``promptrail-…``). A read of
    # everything (a delete) says ``public_only=False``.
    environments: tuple[str, ...] | None = None
    public_only: bool = True
    # Score filters (``score.<name>.min`` …) and the scores table they read (store/scores.py).
    scores: tuple[ScoreTest, ...] = ()
    scores_table: str = ""
    # The score names that may have scores on traces, when the reader looked (see
    # scores.traced_names); None: any may.
    scores_on_traces: frozenset[str] | None = None


def filter_where(
    project: str, filters: RequestFilter, windowed: bool = False, capped: bool = False
) -> tuple[str, dict[str, Any]]:
    """Return the WHERE clause and parameters of a filter (always scoped to a project).

    ``windowed``: the caller bounds the read below by ``{lower:...}`` (see :func:`keyset`);
    ``capped``: above too, by ``{upper:...}`` (a windowed read only). Score filters read the
    sums of the records the rest of the filter (and those bounds) leaves, when it narrows
    them at all, instead of every record a name ever scored.
    """
    clauses, params = column_clauses(filters)
    clauses.insert(0, "project = {project:String}")
    params["project"] = project
    if filters.trace_id is not None:
        # ``requests`` and ``request_items`` carry it, the metadata index does not.
        clauses.append("trace_id = {trace_id:String}")
        params["trace_id"] = filters.trace_id
    narrowed = len(clauses) > 1 or windowed
    if filters.kinds is not None:
        # ``requests`` and ``request_items`` carry it, the metadata index does not: a
        # metadata page tests it on the records it reads.
        clauses.append("kind IN {kinds:Array(String)}")
        params["kinds"] = list(filters.kinds)
    clauses += environment_clauses(filters, params)
    if filters.scores:
        # Every clause above reads columns ``request_items`` has too (the score clauses'
        # own reads of the log go to it). Metadata pairs are left out: ``request_items``
        # has no index of them (a metadata list reads its candidates from the metadata index).
        records: str | None = None
        window: str | None = None
        if narrowed:
            bound = ["created_at >= {lower:DateTime64(3, 'UTC')}"] if windowed else []
            if windowed and capped:
                # The records above the window were read by the page's earlier passes (or
                # lie above its cursor): their sums are not read again.
                bound.append("created_at < {upper:DateTime64(3, 'UTC')}")
            records = " AND ".join([*clauses, *bound])
            if windowed:
                # A window's own sums are a run of the sums keyed by the record's time.
                window = " AND ".join(bound).replace("created_at", "record_at")
        score_where, score_params = score_clauses(
            filters.scores, filters.scores_table, records, filters.scores_on_traces, window
        )
        clauses += score_where
        params.update(score_params)
    for i, (key, value) in enumerate(sorted(filters.metadata.items())):
        clauses.append(f"metadata_map[{{mk{i}:String}}] = {{mv{i}:String}}")
        clauses.append(f"mapContains(metadata_map, {{mk{i}:String}})")
        params[f"mk{i}"] = key
        params[f"mv{i}"] = value
    return " AND ".join(clauses), params


def environment_clauses(filters: RequestFilter, params: dict[str, Any]) -> list[str]:
    """Return the clauses of a filter's environments (``params`` get their values).

    The log, its list copy, the trace records and the thread items carry the column (the
    metadata index does not: a metadata page tests it on the records it reads).
    """
    clauses = []
    if filters.environments is not None:
        clauses.append("environment IN {environments:Array(String)}")
        params["environments"] = list(filters.environments)
    if filters.public_only:
        clauses.append(f"NOT startsWith(environment, '{RESERVED_PREFIX}')")
    return clauses


def keyset(
    where: str,
    params: dict[str, Any],
    after: tuple[datetime, str] | None,
    lower: datetime | None,
    upper: datetime | None = None,
) -> str:
    """Narrow ``where`` to keys below the position ``after``, at or above ``lower`` and
    below ``upper``.

    ``params`` receives the values.
    """
    if lower is not None:
        where += " AND created_at >= {lower:DateTime64(3, 'UTC')}"
        params["lower"] = lower
    if upper is not None:
        where += " AND created_at < {upper:DateTime64(3, 'UTC')}"
        params["upper"] = upper
    if after is not None:
        where += " AND (created_at, id) < ({after_at:DateTime64(3, 'UTC')}, {after_id:String})"
        params.update(after_at=after[0], after_id=after[1])
    return where


def windows(
    filters: RequestFilter,
    after: tuple[datetime, str] | None,
    newest: datetime | None = None,
) -> list[datetime | None]:
    """Return the lower bounds a list page tries in turn (see _WINDOWS), ending with none.

    They count back from the cursor's time, else the filter's end, else now; or from
    ``newest``, the time of the log's newest record, when the caller knows it and it is
    older: a log quiet for hours would otherwise pay its first windows for nothing. Any
    bounds are exact (a page goes on below a window it could not fill); they only set what
    each pass reads.
    """
    anchor = anchor_of(filters, after, newest)
    lowers: list[datetime | None] = [
        anchor - window
        for window in (_SCORE_WINDOWS if filters.scores else _WINDOWS)
        if filters.start is None or anchor - window > filters.start
    ]
    return [*lowers, None]


# A filter's column tests, by RequestFilter field; each clause's parameter is named for its field.
_COLUMN_TESTS = (
    ("prompt_name", "prompt_name = {prompt_name:String}"),
    ("status", "status = {status:String}"),
    ("model", "model = {model:String}"),
    ("start", "created_at >= {start:DateTime64(3, 'UTC')}"),
    ("end", "created_at <= {end:DateTime64(3, 'UTC')}"),
)


def column_clauses(filters: RequestFilter) -> tuple[list[str], dict[str, Any]]:
    """Return the clauses of a filter's column tests (prompt, status, model, dates).

    Both ``requests`` and the metadata index carry these columns under the same names.
    """
    clauses: list[str] = []
    params: dict[str, Any] = {}
    for name, clause in _COLUMN_TESTS:
        value = getattr(filters, name)
        if value is not None:
            clauses.append(clause)
            params[name] = value
    return clauses, params


def like_escape(text: str) -> str:
    """Return ``text`` with LIKE's wildcards and escape character taken literally."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def anchor_of(
    filters: RequestFilter, after: tuple[datetime, str] | None, newest: datetime | None = None
) -> datetime:
    """The time a page's windows count back from (see :func:`windows`)."""
    anchor = after[0] if after is not None else filters.end or datetime.now(UTC)
    return anchor if newest is None else min(anchor, newest)


def reach(
    lowers: list[datetime | None],
    read: tuple[datetime, datetime],
    found: int,
    needed: int,
    start: datetime | None = None,
) -> list[datetime | None]:
    """The lower bounds a score-filtered page tries next, after a window it could not fill.

    ``lowers`` are the bounds it had (the window just read first); ``read`` the span of time
    that window covered (from its bound to the top of the pass), in which ``found`` records
    passed; ``needed`` more are wanted. The next window reaches as far below as that density
    says the rest of the page takes, _REACH_MARGIN times over, and past the last fixed window
    it is none: a bound few records pass goes straight to the span that holds its page
    instead of one fixed window after another, and a page short of a few rows reads a short
    window, not the next fixed one (at 1M records a pass costs ~15 ms even over minutes, and
    more with its span). The fixed windows left below it follow, then none.
    """
    if read[1] <= read[0]:
        return lowers[1:]  # a window of no time (a cursor at its bound) says nothing
    span = (read[1] - read[0]) * (needed * _REACH_MARGIN / max(found, 1))
    return _reaching(read[0] - span, lowers[1:], start)


def widened(
    lowers: list[datetime | None],
    top: datetime,
    density: float | None,
    needed: int,
    start: datetime | None = None,
) -> list[datetime | None]:
    """A score-filtered page's windows (``lowers``, counting back from ``top``), the first
    one wider when ``density`` (records per second passing the same filter, as the last
    page of it found them) says the page needs more than it spans: as :func:`reach` sizes
    a window after a thin one, before the first pass instead of after it. A bound few
    records pass then reads one window, not two or three, on every page after the first.
    """
    fixed = [lower for lower in lowers if lower is not None]
    if density is None or not fixed:
        return lowers
    target = top - timedelta(seconds=needed * _REACH_MARGIN / max(density, 1e-9))
    return lowers if target >= fixed[0] else _reaching(target, lowers, start)


def _reaching(
    target: datetime, lowers: list[datetime | None], start: datetime | None
) -> list[datetime | None]:
    """A window down to ``target``, then the fixed ones of ``lowers`` below it, then none;
    only none when ``target`` is past the last fixed window (or the filter's start)."""
    fixed = [lower for lower in lowers if lower is not None]
    if not fixed or target < fixed[-1] or (start is not None and target <= start):
        return [None]
    return [target, *[lower for lower in fixed if lower < target], None]
