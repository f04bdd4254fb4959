"""Steps the score tests share: fresh ids, a created score, an error's code and field,
logged records and a list by tag, the store's queries counted, the score sums read and upgraded,
the sums the live scores must add up to, and an ``@observe`` function's trace logged.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

from fastapi.testclient import TestClient

from promptrail.collector.config import Settings
from promptrail.collector.store import migrations
from promptrail.collector.store.connection import open_client
from promptrail.collector.store.score_tables import SESSION_TARGET
from tests.collector.upgrades import store_before


def fresh(prefix: str = "req") -> str:
    """An id no other test of the module uses."""
    return f"{prefix}_{uuid.uuid4().hex}"


def created(api: TestClient, **score: Any) -> dict[str, Any]:
    """Post a score; the stored score as answered."""
    response = api.post("/v1/scores", json=score)
    assert response.status_code == 201, response.text
    data: dict[str, Any] = response.json()["data"]
    return data


def assert_error(response: Any, status: int, code: str, field: str | None = None) -> None:
    """The response is ``status`` with the error body's ``code`` (and its field, if given)."""
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == code, error
    if field is not None:
        assert error["details"]["field"] == field, error


def log(
    api: TestClient, tag: str, n: int, trace: str | None = None, user: str = "", **extra: Any
) -> str:
    """Log one record tagged ``tag``; return its id."""
    record_id = f"req_{tag}_{n}"
    body: dict[str, Any] = {
        "id": record_id,
        "created_at": f"2026-03-01T10:00:{n:02d}Z",
        "model": "gpt-4o-mini",
        "output": {"content": f"answer {n}"},
        "metadata": {"tag": tag, "user": user},
        **extra,
    }
    if trace:
        body |= {"trace_id": trace, "span_id": f"{n:016x}"}
    response = api.post("/v1/requests", json=body)
    assert response.status_code == 201, response.text
    return record_id


def listed(api: TestClient, tag: str, **params: Any) -> list[dict[str, Any]]:
    """The request list's items tagged ``tag``."""
    response = api.get("/v1/requests", params={"metadata.tag": tag, **params})
    assert response.status_code == 200, response.text
    items: list[dict[str, Any]] = response.json()["data"]
    return items


@contextmanager
def counted_queries(api: TestClient) -> Iterator[list[str]]:
    """Every SQL text the collector's store client runs while the block runs."""
    client = api.app.state.services.store.client
    real: Callable[..., Any] = client.query
    seen: list[str] = []

    def query(sql: str, *args: Any, **kwargs: Any) -> Any:
        seen.append(sql)
        return real(sql, *args, **kwargs)

    client.query = query
    try:
        yield seen
    finally:
        del client.query  # the instance attribute goes: the class's method again


def store_client(api: TestClient) -> Any:
    """The collector's own store client."""
    return api.app.state.services.store.client


def database_of(api: TestClient) -> str:
    """The collector's database."""
    return str(api.app.state.services.store.database)


def optimize(client: Any, database: str) -> None:
    """Merge every part of the sums (zero keys vanish) and of the scores."""
    client.command(f"OPTIMIZE TABLE `{database}`.score_sums FINAL")
    client.command(f"OPTIMIZE TABLE `{database}`.scores FINAL")


def mean_of(api: TestClient, tag: str, name: str) -> tuple[float, int]:
    """``metric=score`` over the records tagged ``tag``: (mean, how many scores)."""
    response = api.get(
        "/v1/requests/analytics",
        params={
            "metric": "score",
            "score_name": name,
            "filters": f'{{"metadata": {{"tag": "{tag}"}}}}',
            "start_date": "2026-03-01",
            "end_date": "2026-03-01",
        },
    )
    assert response.status_code == 200, response.text
    data = response.json()["data"]
    return data["total"], data["score_count"]


def insert_old_scores(client: Any, database: str) -> None:
    """Store scores as releases before 16 wrote them: no tombstone before a replacement.

    sc1 on r1 replaced by a version on r2; sc2 deleted; sc3 on trace t1; sc4 categorical, of
    project ``other``.
    """
    columns = "project, id, request_id, trace_id, name, data_type, value, value_number, "
    columns += "value_text, source, metadata, created_at, written_at, is_deleted"
    client.command(
        f"INSERT INTO `{database}`.scores ({columns}) VALUES "
        "('default','sc1','r1','','q','numeric','0.9',0.9,'0.9','api','{}',now64(3),"
        "'2026-01-01 00:00:01',0),"
        "('default','sc1','r2','','q','numeric','0.2',0.2,'0.2','api','{}',now64(3),"
        "'2026-01-01 00:00:02',0),"
        "('default','sc2','r1','','q','numeric','0.5',0.5,'0.5','api','{}',now64(3),"
        "'2026-01-01 00:00:01',0),"
        "('default','sc2','r1','','q','numeric','0.5',0.5,'0.5','api','{}',now64(3),"
        "'2026-01-01 00:00:03',1),"
        "('default','sc3','','t1','q','boolean','true',1,'true','api','{}',now64(3),"
        "'2026-01-01 00:00:01',0),"
        "('other','sc4','r1','','k','categorical','\"a\"',NULL,'a','api','{}',now64(3),"
        "'2026-01-01 00:00:01',0)"
    )


@contextmanager
def scores_upgraded(settings: Settings, version: int) -> Iterator[tuple[Any, str]]:
    """A store migrated up to (not including) ``version``, holding :func:`insert_old_scores`,
    then upgraded: yields its client and database."""
    store_before(settings, version, [])
    client = open_client(settings.store_url)
    database = settings.database
    insert_old_scores(client, database)
    assert migrations.migrate(client, database) == [
        m.version for m in migrations.MIGRATIONS if m.version >= version
    ]
    try:
        yield client, database
    finally:
        client.close()


# Per (name, on_trace, target, value): (sum of the numbers, how many have one, how many scores).
Sums = dict[tuple[str, int, str, str], tuple[float, int, int]]


def reference_sums(client: Any, database: str, names: list[str]) -> Sums:
    """The sums of each score id's newest version, when live, per (name, on_trace, target,
    value), as the sums tables key them (a session's score at ``on_trace`` 2 and its session
    target, a trace's at 1, a record's at 0), summed in Python: no aggregate of the store's
    involved, so the truth any sums table is compared with."""
    rows = client.query(
        "SELECT s.3, multiIf(s.7 != '', 2, s.2 != '', 1, 0), multiIf(s.7 != '', "
        "concat({session:String}, s.7), s.2 != '', s.2, s.1), s.4, s.5 FROM (SELECT id, "
        "argMax(tuple(request_id, trace_id, name, value_text, value_number, is_deleted, "
        f"session_id), written_at) AS s FROM `{database}`.scores WHERE project = 'default' "
        "GROUP BY id) WHERE s.6 = 0 AND s.3 IN {n:Array(String)}",
        parameters={"n": names, "session": SESSION_TARGET},
    ).result_rows
    sums: dict[tuple[str, int, str, str], list[float]] = defaultdict(lambda: [0.0, 0, 0])
    for name, on_trace, target, text, number in rows:
        entry = sums[(name, int(on_trace), target, text)]
        entry[0] += number or 0.0
        entry[1] += number is not None
        entry[2] += 1
    return {k: (round(v[0], 9), int(v[1]), int(v[2])) for k, v in sums.items()}


def observed_call(api: TestClient, tag: str, log: bool = True) -> tuple[str, str, str]:
    """An ``@observe`` function's trace: (trace id, the span's record id, the model call's),
    logged unless ``log`` is false (the caller logs them with :func:`log_trace`)."""
    trace = uuid.uuid4().hex
    span, call = f"req_{trace}{1:016x}", f"req_{trace}{2:016x}"
    if log:
        log_trace(api, tag, trace)
    return trace, span, call


def log_trace(api: TestClient, tag: str, trace: str) -> None:
    """Log an ``@observe`` function's trace ``trace`` under the metadata tag ``tag``: the
    function's span record (kind ``span``) and the model call inside it, on prompt version 3."""
    now = datetime.now(UTC) - timedelta(minutes=5)
    records: list[dict[str, Any]] = [
        {
            "id": f"req_{trace}{1:016x}",
            "kind": "span",
            "trace_id": trace,
            "span_id": f"{1:016x}",
            "span_name": "answer",
            "metadata": {"tag": tag},
            "created_at": now.isoformat(),
        },
        {
            "id": f"req_{trace}{2:016x}",
            "kind": "llm",
            "trace_id": trace,
            "span_id": f"{2:016x}",
            "parent_span_id": f"{1:016x}",
            "prompt_name": "support",
            "version": 3,
            "model": "gpt-4o-mini",
            "output": {"content": "Try turning it off and on."},
            "metadata": {"tag": tag},
            "created_at": (now + timedelta(milliseconds=5)).isoformat(),
        },
    ]
    for record in records:
        response = api.post("/v1/requests", json=record)
        assert response.status_code == 201, response.text
