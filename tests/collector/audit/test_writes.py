"""Every audited write appends one entry naming who, in which role, did what to which resource,
with the resource before and after; records, OTLP spans and scores append nothing; no secret is
ever stored (docs/security.md, "Audit log")."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from tests.collector.audit.steps import PASSWORD, PROMPT, SignIn, entries, newest, raw_table
from tests.keys import DEFAULT_KEY

CONNECTION_SECRET = "sk-live-audit-secret-4242"
HEADER_SECRET = "org-header-secret-audit-777"
OTHER_SECRET = "sk-live-second-secret-5151"


def ok(response: Any, status: int = 200) -> dict[str, Any]:
    assert response.status_code == status, response.text
    data: dict[str, Any] = response.json()["data"]
    return data


def otlp_span() -> dict[str, Any]:
    """An OTLP JSON export of one model-call span."""
    span = {
        "traceId": "5b8efff798038103d269b633813fc60c",
        "spanId": "00000000000000a1",
        "name": "chat gpt-4o-mini",
        "startTimeUnixNano": "1700000000000000000",
        "endTimeUnixNano": "1700000000750000000",
        "attributes": [
            {"key": "gen_ai.provider.name", "value": {"stringValue": "openai"}},
            {"key": "gen_ai.request.model", "value": {"stringValue": "gpt-4o-mini"}},
        ],
    }
    return {"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}


def test_prompt_and_label_writes_by_a_key_name_the_key_and_the_change(api: TestClient) -> None:
    ok(api.post("/v1/prompts", json=PROMPT), 201)
    created = newest(api)
    actor = created["actor"]
    assert actor["type"] == "key" and actor["id"].startswith("key_")
    # The key's hint: the start of the key that the key list shows, never the key.
    assert actor["key_hint"].endswith("…") and DEFAULT_KEY.startswith(actor["key_hint"][:-1])
    assert len(actor["key_hint"]) < len(DEFAULT_KEY) and "email" not in actor
    assert created["role"] is None and created["project"] == "default"
    assert (created["action"], created["resource_type"], created["resource_id"]) == (
        "prompt.create",
        "prompt",
        "greet",
    )
    assert "before" not in created and created["after"]["version"] == 1
    assert created["ip"] == "testclient"

    ok(api.patch("/v1/prompts/greet", json={"template": "Hello {{n}}"}))
    patched = newest(api)
    assert patched["action"] == "prompt.update"
    assert (patched["before"]["version"], patched["before"]["template"]) == (1, "Hi {{n}}")
    assert (patched["after"]["version"], patched["after"]["template"]) == (2, "Hello {{n}}")

    ok(api.put("/v1/prompts/greet/labels/production", json={"version": 1}))
    moved = newest(api)
    assert (moved["action"], moved["resource_type"], moved["resource_id"]) == (
        "label.move",
        "label",
        "greet/production",
    )
    assert "before" not in moved and moved["after"] == {"label": "production", "version": 1}
    ok(api.put("/v1/prompts/greet/labels/production", json={"version": 2}))
    assert newest(api)["before"] == {"label": "production", "version": 1}
    assert newest(api)["after"] == {"label": "production", "version": 2}

    ok(api.delete("/v1/prompts/greet/labels/production"))
    removed = newest(api)
    assert removed["action"] == "label.remove" and "after" not in removed
    assert removed["before"] == {"label": "production", "version": 2}

    ok(api.delete("/v1/prompts/greet"))
    deleted = newest(api)
    assert deleted["action"] == "prompt.delete" and deleted["before"]["version"] == 2
    assert "after" not in deleted
    assert len(entries(api)) == 6


def test_admin_writes_by_a_signed_in_user_name_the_user_and_role(
    api: TestClient, sign_in: SignIn
) -> None:
    owner, csrf = sign_in("owner")

    connection = {
        "name": "team-openai",
        "provider": "openai",
        "api_key": CONNECTION_SECRET,
        "headers": {"X-Org": HEADER_SECRET},
    }
    ok(owner.post("/v1/connections", json=connection, headers=csrf), 201)
    made = newest(api)
    assert made["actor"]["type"] == "user" and made["actor"]["email"] == "owner@example.com"
    assert "key_hint" not in made["actor"] and made["role"] == "owner"
    assert (made["action"], made["resource_type"], made["resource_id"]) == (
        "connection.create",
        "connection",
        "team-openai",
    )
    assert made["after"]["name"] == "team-openai" and "before" not in made
    ok(owner.patch("/v1/connections/team-openai", json={"api_key": OTHER_SECRET}, headers=csrf))
    changed = newest(api)
    assert changed["action"] == "connection.update"
    assert changed["before"]["name"] == changed["after"]["name"] == "team-openai"

    key = ok(owner.post("/v1/keys", json={"scopes": ["ingest"]}, headers=csrf), 201)
    made_key = newest(api)
    assert (made_key["action"], made_key["resource_id"]) == ("key.create", key["key_id"])
    assert made_key["after"]["scopes"] == ["ingest"]

    accounts = api.app.state.services.accounts  # type: ignore[attr-defined]
    accounts.create_user("bob@example.com", PASSWORD)
    ok(
        owner.put(
            "/v1/projects/default/members/bob@example.com", json={"role": "viewer"}, headers=csrf
        )
    )
    member = newest(api)
    assert (member["action"], member["resource_type"], member["resource_id"]) == (
        "member.put",
        "member",
        "bob@example.com",
    )
    assert "before" not in member and member["after"]["role"] == "viewer"
    ok(owner.delete("/v1/projects/default/members/bob@example.com", headers=csrf))
    gone = newest(api)
    assert gone["action"] == "member.remove" and gone["before"]["role"] == "viewer"

    labels = {"labels": ["production"]}
    ok(owner.put("/v1/projects/default/protected-labels", json=labels, headers=csrf))
    setting = newest(api)
    assert (setting["action"], setting["resource_id"]) == ("protected_labels.put", "default")
    assert setting["before"] == {"labels": []} and setting["after"] == {"labels": ["production"]}

    ok(owner.post("/v1/datasets", json={"name": "golden"}, headers=csrf), 201)
    assert (newest(api)["action"], newest(api)["resource_id"]) == ("dataset.create", "golden")
    ok(owner.delete("/v1/datasets/golden", headers=csrf))
    assert newest(api)["action"] == "dataset.delete" and newest(api)["before"]["name"] == "golden"

    ok(owner.put("/v1/evaluators/exact", json={"type": "exact_match"}, headers=csrf))
    evaluator = newest(api)
    assert (evaluator["action"], evaluator["resource_id"]) == ("evaluator.put", "exact")
    rule_body = {"name": "r", "evaluator": "exact", "target": "record"}
    rule = ok(owner.post("/v1/evaluation-rules", json=rule_body, headers=csrf), 201)
    assert (newest(api)["action"], newest(api)["resource_id"]) == ("rule.create", rule["id"])
    ok(owner.patch(f"/v1/evaluation-rules/{rule['id']}", json={"sampling": 0.5}, headers=csrf))
    patched = newest(api)
    assert patched["before"]["sampling"] == 1.0 and patched["after"]["sampling"] == 0.5
    ok(owner.delete(f"/v1/evaluation-rules/{rule['id']}", headers=csrf))
    assert newest(api)["action"] == "rule.delete"

    account = {"email": "carol@example.com", "password": PASSWORD}
    ok(owner.post("/v1/users/accounts", json=account, headers=csrf), 201)
    user = newest(api)
    assert (user["action"], user["resource_id"]) == ("user.create", "carol@example.com")
    assert user["after"]["email"] == "carol@example.com"

    # No secret reaches the store: the connection's keys and header value, the new key, a
    # password or its hash, in any column of any row.
    stored = raw_table(api)
    for secret in (CONNECTION_SECRET, HEADER_SECRET, OTHER_SECRET, key["api_key"], PASSWORD):
        assert secret not in stored
    assert "$argon2" not in stored


def test_records_otlp_spans_and_scores_append_nothing(api: TestClient) -> None:
    record = {"id": "req_a", "model": "gpt-4o-mini", "output": {"content": "hi"}}
    ok(api.post("/v1/requests", json=record), 201)
    assert api.post("/v1/traces", json=otlp_span()).status_code in (200, 201)
    score = ok(api.post("/v1/scores", json={"request_id": "req_a", "name": "ok", "value": 1}), 201)
    ok(api.delete(f"/v1/scores/{score['id']}"))
    assert entries(api) == []


def test_a_refused_write_appends_nothing(api: TestClient, sign_in: SignIn) -> None:
    assert api.patch("/v1/prompts/nope", json={"template": "x"}).status_code == 404
    viewer, csrf = sign_in("viewer")
    assert viewer.post("/v1/prompts", json=PROMPT, headers=csrf).status_code == 403
    assert entries(api) == []
