"""Users (docs/api-notes.md, "Traces, sessions and users"): sums over the period's records
that carry a ``user_id`` in their metadata, listed latest activity first from the activity
rollup (:class:`.threads.ThreadReads`). Apart from traces and sessions because a user has no
page of records of its own, only its sums.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from .connection import utc
from .request_filters import RequestFilter
from .threads import ThreadReads


@dataclass(frozen=True)
class UserSummary:
    """What the user list shows of a user."""

    user_id: str
    first_at: datetime
    last_at: datetime
    records: int
    sessions: int
    errors: int
    total_tokens: int
    estimated_cost_usd: float


class UserReads(ThreadReads):
    """The reads of users: the user list."""

    def user_page(
        self,
        project: str,
        period: tuple[datetime, datetime],
        kinds: Sequence[str] | None,
        after: tuple[datetime, str] | None,
        limit: int,
        environments: RequestFilter | None = None,
    ) -> list[UserSummary]:
        """Return users of the period, latest activity first, after a keyset position;
        summed over the records of ``environments`` (its environment fields)."""

        def exact(values: list[str]) -> list[UserSummary]:
            rows = self._sums(
                project,
                "user_id",
                values,
                (period, kinds),
                "min(created_at), max(created_at) AS last_at, count(), "
                "uniqExactIf(session_id, session_id != ''), countIf(status = 'error'), "
                "sum(total_tokens), sum(estimated_cost_usd)",
                "",
                {},
                environments=environments,
                final=True,
            )
            return [
                UserSummary(
                    user_id=str(r[0]),
                    first_at=utc(r[1]),
                    last_at=utc(r[2]),
                    records=int(r[3]),
                    sessions=int(r[4]),
                    errors=int(r[5]),
                    total_tokens=int(r[6]),
                    estimated_cost_usd=float(r[7]),
                )
                for r in rows
            ]

        return self._rolled_page(
            project,
            "user_id",
            (period, kinds, None),
            after,
            limit,
            exact,
            lambda u: (u.last_at, u.user_id),
            named=environments is not None and environments.environments is not None,
        )
