"""A rule's ``decision=waiting`` page reads only the waiting decisions not yet replaced
(issue 50, "Speed and scale"; migration 44, store/evaluation/tables.py): a final decision
ends its target's waiting row in ``evaluation_waiting``, whether the worker wrote it (which
knows what it replaces) or another writer (read from the store), and once merged the table
holds the live waiting decisions alone. A store upgraded to migration 44 lists those it had.
Real chDB; the app over ASGI.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

from fastapi.testclient import TestClient

from promptrail.collector.config import Settings
from promptrail.collector.services.container import Services
from promptrail.collector.services.evaluation import Evaluation, Rule
from promptrail.collector.services.evaluation.worker import SETTLE_SECONDS, EvaluationWorker
from promptrail.collector.store import migrations
from promptrail.collector.store.connection import open_client
from promptrail.collector.store.evaluation import DecisionRow, DecisionStore
from promptrail.collector.store.writes import STORED
from tests.collector.evaluation.steps import create_rule, put_evaluator
from tests.collector.upgrades import store_before

START = datetime(2026, 11, 1, tzinfo=UTC)


def _row(rule_id: str, target: str, decision: str, seconds: float) -> DecisionRow:
    return DecisionRow(
        rule_id, "record", target, decision, "", "valid", 1, START + timedelta(seconds=seconds)
    )


def _waiting_table(client: Any, database: str, rule_id: str) -> list[tuple[str, int]]:
    """The rows of ``evaluation_waiting`` of the rule once merged: (target, sign)."""
    client.command(f"OPTIMIZE TABLE `{database}`.evaluation_waiting FINAL")
    rows = client.query(
        f"SELECT target_id, sign FROM `{database}`.evaluation_waiting "
        "WHERE rule_id = {r:String} ORDER BY target_id",
        parameters={"r": rule_id},
    ).result_rows
    return [(str(r[0]), int(r[1])) for r in rows]


def _listed(api: TestClient, rule_id: str, **params: Any) -> list[str]:
    found: list[str] = []
    cursor = None
    while True:
        query = {"limit": 2, **params, **({"cursor": cursor} if cursor else {})}
        response = api.get(f"/v1/evaluation-rules/{rule_id}/decisions", params=query)
        assert response.status_code == 200, response.text
        found += [d["target_id"] for d in response.json()["data"]]
        cursor = response.json()["pagination"].get("next_cursor")
        if not cursor:
            return found


def test_replaced_waiting_decisions_leave_the_waiting_table_and_the_page(
    api: TestClient,
) -> None:
    put_evaluator(api, "valid", {"type": "json_valid"})
    made = create_rule(api, evaluator="valid", delay_seconds=60)
    evaluation: Evaluation = api.app.state.services.evaluation
    rule: Rule = evaluation.rules.live("default", made["id"])
    store = evaluation.decision_store
    still = [_row(rule.id, f"req_still-{n}", "waiting", n) for n in range(3)]
    replaced = [_row(rule.id, f"req_done-{n:03d}", "waiting", 10 + n) for n in range(300)]
    # Final decisions written without saying what they replace (as the service's decide
    # does): the store reads it.
    final = [_row(rule.id, f"req_done-{n:03d}", "scored", 1000 + n) for n in range(300)]
    for rows in (still, replaced, final):
        assert store.append("default", rows) is STORED
    # One more through the service, on one of the three.
    evaluation.decisions.decide("default", rule, "record", "req_still-0", "error", "failed")

    assert _listed(api, rule.id, decision="waiting") == ["req_still-2", "req_still-1"]
    client = api.app.state.services.store.client
    database = str(api.app.state.services.store.database)
    assert _waiting_table(client, database, rule.id) == [("req_still-1", 1), ("req_still-2", 1)]
    assert _listed(api, rule.id, decision="waiting") == ["req_still-2", "req_still-1"]
    assert len(_listed(api, rule.id, limit=100)) == 303


def _stopped_worker(api: TestClient) -> EvaluationWorker:
    services: Services = api.app.state.services
    worker = services.evaluation_worker
    assert worker is not None
    api.portal.call(worker.stop)  # type: ignore[union-attr]
    return worker


def test_the_worker_ends_the_waiting_decisions_its_final_ones_replace(api: TestClient) -> None:
    worker = _stopped_worker(api)
    put_evaluator(api, "valid", {"type": "json_valid"})
    rule_id = create_rule(api, evaluator="valid", delay_seconds=3)["id"]
    ids = [f"req_delay-{n:02d}" for n in range(12)]
    records = [
        {"id": rid, "model": "gpt-4o-mini", "status": "success", "output": {"content": "{}"}}
        for rid in ids
    ]
    assert api.post("/v1/requests/batch", json={"records": records}).status_code == 201
    time.sleep(SETTLE_SECONDS * 2)
    api.portal.call(worker.poll_once)  # type: ignore[union-attr]
    assert sorted(_listed(api, rule_id, decision="waiting")) == ids
    time.sleep(3.5)  # the rule's delay
    api.portal.call(worker.poll_once)  # type: ignore[union-attr]
    assert sorted(_listed(api, rule_id)) == ids
    assert _listed(api, rule_id, decision="waiting") == []
    client = api.app.state.services.store.client
    database = str(api.app.state.services.store.database)
    assert _waiting_table(client, database, rule_id) == []


def test_an_upgraded_store_lists_the_decisions_it_had_waiting(settings: Settings) -> None:
    store_before(settings, 44, [])
    client = open_client(settings.store_url)
    database = settings.database
    try:
        store = DecisionStore(client, database)
        rule_id = "rule_upgraded"
        still = [_row(rule_id, f"req_still-{n}", "waiting", n) for n in range(3)]
        replaced = [_row(rule_id, f"req_done-{n:02d}", "waiting", 10 + n) for n in range(40)]
        final = [_row(rule_id, f"req_done-{n:02d}", "not_sampled", 100 + n) for n in range(40)]
        # As that release wrote them: the decisions alone (no waiting table yet).
        for rows in (still, replaced, final):
            assert store.append("default", rows, waiting_known=True) is STORED

        assert 44 in migrations.migrate(client, database)
        page = store.page("default", rule_id, "waiting", None, 10)
        assert [d.target_id for d in page] == ["req_still-2", "req_still-1", "req_still-0"]
        assert _waiting_table(client, database, rule_id) == [
            ("req_still-0", 1),
            ("req_still-1", 1),
            ("req_still-2", 1),
        ]
        # Decided after the upgrade: it leaves the list.
        assert store.append("default", [_row(rule_id, "req_still-1", "scored", 500)]) is STORED
        page = store.page("default", rule_id, "waiting", None, 10)
        assert [d.target_id for d in page] == ["req_still-2", "req_still-0"]
        assert len(store.page("default", rule_id, None, None, 100)) == 43
    finally:
        client.close()
