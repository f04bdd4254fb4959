"""The session and user lists read their candidates from the activity rollup a window of days at
a time, the page's anchor's own day first (then the day before too, 8 days, the period): at
100M records a day holds ~70,000 sessions' rows (docs/scale.md, "Reads at 100M"). These tests
hold both lists exact, page after page, when the sessions' latest records lie on the anchor's
day, the day before, a week and weeks back, through a deleted latest record, a late record and
retried copies."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from fastapi.testclient import TestClient

from tests.collector.traces.steps import log, walk

NOW = datetime.now(UTC).replace(microsecond=0)
# Each session's records: how long ago, newest first (its user is ``u<n % 3>``).
AGES = {
    "s-now": (timedelta(minutes=2), timedelta(hours=3)),
    "s-hour": (timedelta(minutes=70), timedelta(days=2)),
    "s-yesterday": (timedelta(hours=30),),
    "s-two-days": (timedelta(hours=50), timedelta(hours=51)),
    "s-week": (timedelta(days=6), timedelta(days=9)),
    "s-weeks": (timedelta(days=20),),
    # Its latest record is deleted: it falls back to its record of 12 days ago.
    "s-deleted": (timedelta(minutes=5), timedelta(days=12)),
}


def _records() -> list[dict[str, Any]]:
    records = []
    for n, (session, ages) in enumerate(AGES.items()):
        for j, age in enumerate(ages):
            meta = {"session_id": session, "user_id": f"u{n % 3}"}
            if session == "s-deleted" and j == 0:
                meta["doomed"] = "yes"
            records.append(
                {
                    "id": f"req_{session}-{j}",
                    "created_at": (NOW - age).isoformat(),
                    "model": "gpt-4o-mini",
                    "usage": {"prompt_tokens": 2, "completion_tokens": 1},
                    "metadata": meta,
                }
            )
    return records


def test_the_session_and_user_lists_stay_exact_across_the_rollup_s_days(
    api: TestClient,
) -> None:
    records = _records()
    log(api, records)
    log(api, records[:4])  # retried copies
    gone = api.request("DELETE", "/v1/requests", json={"metadata": {"doomed": "yes"}})
    assert gone.json()["data"]["deleted_count"] == 1
    latest = {session: NOW - min(ages) for session, ages in AGES.items()}
    latest["s-deleted"] = NOW - timedelta(days=12)
    # A late record: s-weeks's newest is now a day old, logged last.
    log(
        api,
        [
            {
                "id": "req_s-weeks-late",
                "created_at": (NOW - timedelta(days=1)).isoformat(),
                "model": "gpt-4o-mini",
                "metadata": {"session_id": "s-weeks", "user_id": "u2"},
            }
        ],
    )
    latest["s-weeks"] = NOW - timedelta(days=1)

    sessions = sorted(latest, key=lambda s: (latest[s], s), reverse=True)
    for limit in (1, 2, 3, 50):
        listed = walk(api, "/v1/sessions", limit)
        assert [s["session_id"] for s in listed] == sessions
    users: dict[str, datetime] = {}
    for n, session in enumerate(AGES):
        user = "u2" if session == "s-weeks" else f"u{n % 3}"
        users[user] = max(users.get(user, latest[session]), latest[session])
    expected_users = sorted(users, key=lambda u: (users[u], u), reverse=True)
    for limit in (1, 2):
        assert [u["user_id"] for u in walk(api, "/v1/users", limit)] == expected_users
