"""The evaluation worker's arrivals are kept only for projects that have a rule (migration 53):
a project without one logs its records with one copy fewer, and a project's first rule still
judges every record logged after it, as before."""

from __future__ import annotations

from contextlib import closing

from fastapi.testclient import TestClient

from promptrail.collector.app import create_app
from promptrail.collector.config import Settings
from promptrail.collector.store.connection import open_client
from tests.collector.evaluation.steps import create_rule, log_batch, put_evaluator, until_decided
from tests.collector.upgrades import insert_rows, store_before, wide_rows
from tests.keys import DEFAULT_AUTH


def _arrivals(settings: Settings) -> dict[str, list[str]]:
    """The arrivals' record ids by project, in arrival order."""
    with closing(open_client(settings.store_url)) as client:
        rows = client.query(
            f"SELECT project, id FROM `{settings.database}`.evaluation_arrivals "
            "ORDER BY arrived_at, id"
        ).result_rows
    found: dict[str, list[str]] = {}
    for project, record in rows:
        found.setdefault(str(project), []).append(str(record))
    return found


def _records(prefix: str, count: int) -> list[dict[str, object]]:
    return [
        {
            "id": f"req_{prefix}-{n}",
            "prompt_name": "greet",
            "model": "gpt-4o-mini",
            "status": "success",
            "input_variables": {"name": f"{prefix} {n}"},
            "output": {"content": '{"ok": true}'},
        }
        for n in range(count)
    ]


def _stored(api: TestClient, ids: list[str]) -> None:
    """Wait until the log holds ``ids`` (a read of the log waits for what was acknowledged)."""
    listed = api.get("/v1/requests", params={"limit": 100}).json()["data"]
    assert {r["id"] for r in listed} >= set(ids)


def test_only_a_project_with_a_rule_keeps_arrivals_and_its_rule_judges_what_follows(
    settings: Settings, api: TestClient, other: TestClient
) -> None:
    log_batch(api, _records("default-early", 3))
    log_batch(other, _records("other-early", 3))
    _stored(api, ["req_default-early-0"])
    _stored(other, ["req_other-early-0"])
    # Neither project has a rule: nothing reads arrivals, and none were written.
    assert _arrivals(settings) == {}

    put_evaluator(other, "valid", {"type": "json_valid"})
    rule = create_rule(other, evaluator="valid")
    log_batch(api, _records("default-late", 2))
    log_batch(other, _records("other-late", 2))
    later = ["req_other-late-0", "req_other-late-1"]
    for record in later:
        decided = until_decided(other, rule["id"], record, "scored")
    # The rule judges what arrived after it, and nothing from before it.
    assert set(decided) == set(later)
    _stored(api, ["req_default-late-0"])
    assert _arrivals(settings) == {"other": later}


def test_an_upgraded_store_keeps_its_arrivals_and_stops_adding_those_of_projects_without_rules(
    settings: Settings,
) -> None:
    before = wide_rows("before", 5, 100)
    store_before(settings, 53, before)
    # A release before migration 53 wrote an arrival for every record.
    assert _arrivals(settings) == {"default": [r.id for r in before]}

    with TestClient(create_app(settings), headers=DEFAULT_AUTH) as api:  # applies migration 53
        insert_rows(settings, wide_rows("after", 5, 100))
        assert _arrivals(settings) == {"default": [r.id for r in before]}

        put_evaluator(api, "valid", {"type": "json_valid"})
        rule = create_rule(api, evaluator="valid")
        log_batch(api, _records("ruled", 2))
        until_decided(api, rule["id"], "req_ruled-1", "scored")
        assert _arrivals(settings) == {
            "default": [r.id for r in before] + ["req_ruled-0", "req_ruled-1"]
        }
