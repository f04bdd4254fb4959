"""The evaluation worker's pass over a project's rules (issue 50, "Speed and scale"; the
worker's path in docs/architecture.md): the records that arrived are read once for every rule
at the same watermark, and what the rules decided is written in one scores write and one
decisions insert, each rule's watermark moved only after them.

A collector (ASGI, in process) on a real chDB store; its worker is stopped so that each test
makes the passes itself, the store's calls counted on their way through.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from promptrail.collector.app import create_app
from promptrail.collector.config import Settings
from promptrail.collector.services.container import Services
from promptrail.collector.services.evaluation import worker as worker_module
from promptrail.collector.services.evaluation.worker import SETTLE_SECONDS, EvaluationWorker
from promptrail.testing import OpenAIStub
from tests.collector.evaluation.steps import create_rule, put_evaluator
from tests.keys import DEFAULT_AUTH

RULES = 3
RECORDS = 20


def _stopped_worker(api: TestClient) -> EvaluationWorker:
    services: Services = api.app.state.services  # type: ignore[attr-defined]
    worker = services.evaluation_worker
    assert worker is not None
    api.portal.call(worker.stop)  # type: ignore[union-attr]
    return worker


def _counted(
    monkeypatch: pytest.MonkeyPatch, owner: object, name: str, calls: Counter[str]
) -> None:
    """Count ``owner.name``'s calls (and the rows of its last argument), calling through."""
    real: Callable[..., Any] = getattr(owner, name)

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls[name] += 1
        if isinstance(args[-1], list):
            calls[f"{name} rows"] += len(args[-1])
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, counting)


def _rules_and_records(api: TestClient) -> tuple[list[str], list[str]]:
    put_evaluator(api, "valid", {"type": "json_valid"})
    rules = [
        create_rule(api, name=f"valid {n}", evaluator="valid", score_name=f"valid_{n}")["id"]
        for n in range(RULES)
    ]
    ids = [f"req_pass-{n:02d}" for n in range(RECORDS)]
    records = [
        {
            "id": rid,
            "prompt_name": "greet",
            "model": "gpt-4o-mini",
            "status": "success",
            "output": {"content": '{"ok": true}'},
        }
        for rid in ids
    ]
    response = api.post("/v1/requests/batch", json={"records": records})
    assert response.status_code == 201, response.text
    time.sleep(SETTLE_SECONDS * 2)  # the records are read once settled
    return rules, ids


def _decided(api: TestClient, rule_id: str) -> dict[str, str]:
    response = api.get(f"/v1/evaluation-rules/{rule_id}/decisions", params={"limit": 100})
    assert response.status_code == 200, response.text
    return {d["target_id"]: d["decision"] for d in response.json()["data"]}


def _scores_of(api: TestClient, request_id: str) -> list[str]:
    response = api.get("/v1/scores", params={"request_id": request_id})
    assert response.status_code == 200, response.text
    return sorted(s["name"] for s in response.json()["data"])


def test_one_pass_reads_the_records_once_and_writes_every_rules_outcome_together(
    api: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    worker = _stopped_worker(api)
    rules, ids = _rules_and_records(api)
    calls: Counter[str] = Counter()
    work = worker._work
    for name in ("arrivals", "candidates", "advance_many"):
        _counted(monkeypatch, work, name, calls)
    _counted(monkeypatch, worker._decisions, "append", calls)
    _counted(monkeypatch, worker._scores, "batch_own", calls)

    assert api.portal.call(worker.poll_once) is False  # type: ignore[union-attr]

    for rule_id in rules:  # every rule decided every record, as alone
        assert _decided(api, rule_id) == dict.fromkeys(ids, "scored")
    assert _scores_of(api, ids[0]) == [f"valid_{n}" for n in range(RULES)]
    # Read once for the three rules at one watermark; one write of each kind for all.
    assert calls["arrivals"] == 1 and calls["candidates"] == 1
    assert (calls["batch_own"], calls["batch_own rows"]) == (1, RULES * RECORDS)
    assert (calls["append"], calls["append rows"]) == (1, RULES * RECORDS)
    assert (calls["advance_many"], calls["advance_many rows"]) == (1, RULES)
    for rule_id in rules:
        assert set(work.watermarks("default", rule_id)) == {"due"}


def test_a_pass_whose_decisions_are_not_stored_moves_no_rule_and_is_decided_once_after(
    api: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    worker = _stopped_worker(api)
    rules, ids = _rules_and_records(api)
    real = worker._decisions.append

    def refusing(project: str, rows: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the store is down")

    monkeypatch.setattr(worker._decisions, "append", refusing)
    api.portal.call(worker.poll_once)  # type: ignore[union-attr]
    for rule_id in rules:  # the pass failed as a whole: no rule went past these records
        assert worker._work.watermarks("default", rule_id) == {}
        assert _decided(api, rule_id) == {}

    monkeypatch.setattr(worker._decisions, "append", real)
    api.portal.call(worker.poll_once)  # type: ignore[union-attr]
    api.portal.call(worker.poll_once)  # type: ignore[union-attr]
    for rule_id in rules:
        assert _decided(api, rule_id) == dict.fromkeys(ids, "scored")
    # The scores the failed pass wrote were written again under the same ids: one each.
    for rid in ids:
        assert _scores_of(api, rid) == [f"valid_{n}" for n in range(RULES)]


def _log(api: TestClient, ids: list[str]) -> None:
    records = [
        {"id": rid, "prompt_name": "greet", "model": "m", "status": "success", "output": {}}
        for rid in ids
    ]
    response = api.post("/v1/requests/batch", json={"records": records})
    assert response.status_code == 201, response.text
    # A read of the log waits until what was acknowledged is stored: the records have arrived
    # (on a busy machine the journal's insert can land later than the settle time after).
    assert api.get("/v1/requests", params={"limit": 1}).status_code == 200


def test_rules_at_different_watermarks_each_decide_their_own_arrivals_from_the_shared_read(
    api: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Batches of 4, so the earlier rule's read is full before the later rule's arrivals.
    monkeypatch.setattr(worker_module, "BATCH", 4)
    monkeypatch.setattr(worker_module, "BACKLOG_BATCH", 4)
    worker = _stopped_worker(api)
    put_evaluator(api, "valid", {"type": "json_valid"})
    early = create_rule(api, name="early", evaluator="valid", score_name="early")["id"]
    before = [f"req_early-{n:02d}" for n in range(10)]
    _log(api, before)
    time.sleep(SETTLE_SECONDS * 2)
    late = create_rule(api, name="late", evaluator="valid", score_name="late")["id"]
    after = [f"req_late-{n}" for n in range(3)]
    _log(api, after)
    time.sleep(SETTLE_SECONDS * 2)

    assert api.portal.call(worker.poll_once) is True  # type: ignore[union-attr]
    # The later rule is not held back behind the earlier one's backlog.
    assert set(_decided(api, late)) == set(after)
    assert set(_decided(api, early)) == set(before[:4])
    while api.portal.call(worker.poll_once):  # type: ignore[union-attr]
        pass
    # Each rule decided what arrived after it was made, once; nothing before.
    assert set(_decided(api, early)) == set(before + after)
    assert set(_decided(api, late)) == set(after)
    assert _scores_of(api, after[0]) == ["early", "late"]
    assert _scores_of(api, before[0]) == ["early"]


@pytest.fixture
def patient_api(run_settings: Settings) -> Iterator[TestClient]:
    """A collector whose runs go to the stubs and wait for a slow answer (no read timeout
    within the test)."""
    patient = run_settings.model_copy(update={"provider_read_timeout": 600.0})
    with TestClient(create_app(patient), headers=DEFAULT_AUTH) as client:
        yield client


def test_a_code_rule_s_outcome_is_stored_while_a_judge_rule_of_the_pass_still_waits(
    patient_api: TestClient, openai_stub: OpenAIStub
) -> None:
    runs_api = patient_api
    worker = _stopped_worker(runs_api)
    openai_stub.script.reply = "Score: 4"
    openai_stub.script.first_byte_delay = 120.0  # the judge answers long after this test
    response = runs_api.post(
        "/v1/prompts", json={"name": "grader", "template": "Grade {output}", "model": "gpt-4o"}
    )
    assert response.status_code == 201, response.text
    put_evaluator(runs_api, "grade", {"type": "llm_judge", "prompt": "grader"})
    put_evaluator(runs_api, "valid", {"type": "json_valid"})
    judged = create_rule(runs_api, name="judged", evaluator="grade")["id"]
    checked = create_rule(runs_api, name="checked", evaluator="valid")["id"]
    ids = ["req_mixed-1", "req_mixed-2"]
    _log(runs_api, ids)
    time.sleep(SETTLE_SECONDS * 2)

    running = runs_api.portal.start_task_soon(worker.poll_once)  # type: ignore[union-attr]
    try:
        deadline = time.monotonic() + 60  # far below the judge's answer
        while set(_decided(runs_api, checked)) != set(ids):
            assert time.monotonic() < deadline, "the code rule waited for the judge"
            time.sleep(0.1)
        assert _decided(runs_api, judged) == {}  # its calls still wait for the stub
        assert not running.done()
    finally:
        running.cancel()
