"""Several collectors on one store judge each target once (docs/architecture.md, "Several
collectors on one server"; issue 50 point 2): each rule is owned by one live collector,
chosen by rendezvous hashing over the heartbeats; a collector stopped cleanly hands its rules
over at once, one killed (no leaving row) after its heartbeats go stale, and the new owner
resumes from the rules' watermarks without judging anything again.

No ClickHouse server runs here: the two collectors are two apps in this process on one
embedded database (the container gives an embedded store's worker no ownership, one collector
owning everything; the tests give each worker its own collector id, as a server's would get),
with their workers running, their judges calling the OpenAI wire stub. The count of judge
calls is the proof: without ownership both workers judge the same targets.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from functools import partial
from typing import Any

import pytest
from fastapi.testclient import TestClient

from promptrail.collector.app import create_app
from promptrail.collector.config import Settings
from promptrail.collector.services.container import Services
from promptrail.collector.services.evaluation.ownership import Ownership, rendezvous_owner
from promptrail.collector.store.collector_heartbeats import HeartbeatStore
from promptrail.testing import OpenAIStub
from tests.collector.evaluation.steps import create_rule, put_evaluator
from tests.keys import DEFAULT_AUTH

RULES = 6


def _sharing(
    collector_id: str, dead_after: float, made: dict[str, Ownership]
) -> Callable[[Services, str | None], None]:
    """An ``on_ready`` hook giving the collector's worker its share of the rules, with
    heartbeats a test can wait for."""

    def ready(services: Services, _key: str | None) -> None:
        worker = services.evaluation_worker
        assert worker is not None
        worker.ownership = made[collector_id] = Ownership(
            HeartbeatStore(services.store.client, services.store.database),
            collector_id,
            beat_seconds=0.2,
            dead_after_seconds=dead_after,
            join_grace_seconds=1.0,
            lease_seconds=dead_after / 2,
        )

    return ready


def _until(check: Callable[[], Any], seconds: float = 90) -> Any:
    deadline = time.monotonic() + seconds
    while not (found := check()):
        assert time.monotonic() < deadline, "not in time"
        time.sleep(0.1)
    return found


def _log(client: TestClient, ids: list[str]) -> None:
    records = [
        {
            "id": rid,
            "prompt_name": "greet",
            "model": "gpt-4o-mini",
            "status": "success",
            "output": {"content": f"Hello {rid}"},
        }
        for rid in ids
    ]
    response = client.post("/v1/requests/batch", json={"records": records})
    assert response.status_code == 201, response.text


def _all_scored(client: TestClient, rules: list[str], ids: list[str]) -> None:
    def done() -> bool:
        for rule in rules:
            response = client.get(f"/v1/evaluation-rules/{rule}/decisions", params={"limit": 100})
            found = {d["target_id"]: d["decision"] for d in response.json()["data"]}
            if any(found.get(i) != "scored" for i in ids):
                return False
        return True

    _until(done)


@pytest.fixture
def rules(run_settings: Settings, openai_stub: OpenAIStub) -> list[str]:
    """Six judge rules on every record, made by a collector that then stops (no record
    logged yet: it judged nothing)."""
    openai_stub.script.reply = "Score: 4"
    with TestClient(create_app(run_settings), headers=DEFAULT_AUTH) as setup:
        made = setup.post(
            "/v1/prompts",
            json={"name": "grader", "template": "Grade {output}", "model": "gpt-4o-mini"},
        )
        assert made.status_code == 201, made.text
        put_evaluator(setup, "grade", {"type": "llm_judge", "prompt": "grader"})
        return [create_rule(setup, name=f"r{n}", evaluator="grade")["id"] for n in range(RULES)]


def _second_id(rules: list[str]) -> str:
    """A collector id that wins some of the rules from ``col_a`` and loses some."""
    for n in range(1000):
        other = f"col_b{n}"
        won = sum(rendezvous_owner(r, ["col_a", other]) == other for r in rules)
        if 2 <= won <= len(rules) - 2:
            return other
    raise AssertionError("no split found")


@pytest.fixture
def pair(
    run_settings: Settings, rules: list[str], request: pytest.FixtureRequest
) -> Iterator[tuple[TestClient, TestClient, dict[str, Ownership], ExitStack]]:
    """Collectors A and B on one store, sharing the rules; A's exit stack closes it alone."""
    dead_after: float = request.param
    made: dict[str, Ownership] = {}
    b_id = _second_id(rules)
    with ExitStack() as outer:
        b = outer.enter_context(
            TestClient(
                create_app(run_settings, on_ready=_sharing(b_id, dead_after, made)),
                headers=DEFAULT_AUTH,
            )
        )
        with ExitStack() as a_stack:
            a = a_stack.enter_context(
                TestClient(
                    create_app(run_settings, on_ready=_sharing("col_a", dead_after, made)),
                    headers=DEFAULT_AUTH,
                )
            )
            # Both established: each rule owned by exactly one of them.
            _until(lambda: all(made["col_a"].owns(r) != made[b_id].owns(r) for r in rules))
            yield a, b, made, a_stack


@pytest.mark.parametrize("pair", [600.0], indirect=True)
def test_two_collectors_judge_each_target_once_and_a_clean_stop_hands_over_at_once(
    pair: tuple[TestClient, TestClient, dict[str, Ownership], ExitStack],
    rules: list[str],
    openai_stub: OpenAIStub,
) -> None:
    a, b, made, a_stack = pair
    owned_by_a = [r for r in rules if made["col_a"].owns(r)]
    assert 2 <= len(owned_by_a) <= RULES - 2  # both judge: the rules are split
    first = [f"req_own-{n}" for n in range(4)]
    _log(a, first)
    _all_scored(b, rules, first)
    # One judge call per rule and target, though both workers read every arrival.
    assert len(openai_stub.calls) == RULES * len(first)

    # A stops cleanly: its leaving row hands its rules to B at once (B's heartbeats would
    # count A dead only after 600 s).
    b_own = next(o for k, o in made.items() if k != "col_a")
    a_stack.close()
    _until(lambda: all(b_own.owns(r) for r in rules))
    second = [f"req_own-{n}" for n in range(4, 7)]
    _log(b, second)
    _all_scored(b, rules, second)
    assert len(openai_stub.calls) == RULES * (len(first) + len(second))


@pytest.mark.parametrize("pair", [4.0], indirect=True)
def test_a_killed_collector_s_rules_move_and_resume_from_their_watermarks(
    pair: tuple[TestClient, TestClient, dict[str, Ownership], ExitStack],
    rules: list[str],
    openai_stub: OpenAIStub,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    a, b, made, a_stack = pair
    a_own = made["col_a"]
    b_own = next(o for k, o in made.items() if k != "col_a")
    first = [f"req_kill-{n}" for n in range(3)]
    _log(a, first)
    _all_scored(b, rules, first)
    assert len(openai_stub.calls) == RULES * len(first)
    # A dies as a kill -9 would leave it: no leaving row, its heartbeats just stop.
    monkeypatch.setattr(a_own, "stop", partial(Ownership.stop, a_own, leave=False))
    a_stack.close()
    second = [f"req_kill-{n}" for n in range(3, 6)]
    _log(b, second)
    # Once A's heartbeats are stale B owns every rule, A's included, and decides the new
    # records from the watermarks A stored: nothing before them is judged again.
    _all_scored(b, rules, second)
    assert all(b_own.owns(r) for r in rules)
    assert len(openai_stub.calls) == RULES * (len(first) + len(second))


def test_a_collector_joining_takes_only_the_rules_it_wins() -> None:
    rules = [f"rule_{n:04x}" for n in range(300)]
    before = {r: rendezvous_owner(r, ["col_a", "col_b"]) for r in rules}
    after = {r: rendezvous_owner(r, ["col_a", "col_b", "col_c"]) for r in rules}
    moved = [r for r in rules if before[r] != after[r]]
    # Every rule that moves goes to the newcomer; the others stay where they were.
    assert moved and all(after[r] == "col_c" for r in moved)
    assert 60 <= len(moved) <= 140  # about a third
    # Every collector computes the same owner, whatever order it lists the others in.
    assert all(rendezvous_owner(r, ["col_c", "col_b", "col_a"]) == after[r] for r in rules)


def test_a_collector_whose_heartbeats_fail_owns_nothing(api: TestClient) -> None:
    services: Services = api.app.state.services
    now = [1000.0]
    alone = Ownership(
        HeartbeatStore(services.store.client, services.store.database),
        "col_alone",
        join_grace_seconds=0,
        lease_seconds=15,
        clock=lambda: now[0],
    )
    assert not alone.owns("rule_x")  # no heartbeat read yet
    asyncio.run(alone.refresh())
    assert alone.owns("rule_x") and alone.owns("rule_y")  # alone: every rule
    # Its beats and reads failing (none made), it stops owning once its lease is over,
    # before the others would count it dead.
    now[0] += 16
    assert not alone.owns("rule_x")
    asyncio.run(alone.refresh())
    assert alone.owns("rule_x")
    # Stopped cleanly, it says it leaves: no collector reads it as alive.
    asyncio.run(alone.stop())
    others = HeartbeatStore(services.store.client, services.store.database)
    assert others.live(30_000, 0) == []
