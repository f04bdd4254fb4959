"""Keys scoped to their job (issue 51 point 4; docs/api-notes.md, "Keys and scopes"): made by an
admin over HTTP or by ``promptrail keys create --scopes``, listed without their secret, expiring,
and the keys of an older store keeping every scope. Real chDB, real HTTP (ASGI transport), the
real CLI in a subprocess.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from fastapi.testclient import TestClient

from promptrail.collector.app import create_app
from promptrail.collector.config import Settings
from promptrail.collector.errors import InvalidApiKey
from promptrail.collector.services import feedback_tokens
from promptrail.collector.services import keys as key_rules
from promptrail.collector.services.feedback_tokens import TokenScope
from promptrail.collector.services.keys import KeyService
from tests.collector.contract import assert_error
from tests.collector.processes import cli
from tests.collector.upgrades import store_before
from tests.keys import DEFAULT_KEY

EVERY_SCOPE = ["ingest", "prompts:read", "read", "write", "admin"]
RECORD = {"model": "gpt-4o-mini", "input": "hi", "output": {"content": "hello"}}


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def make_key(api: TestClient, body: dict[str, Any], key: str = DEFAULT_KEY) -> dict[str, Any]:
    response = api.post("/v1/keys", json=body, headers=bearer(key))
    assert response.status_code == 201, response.text
    data: dict[str, Any] = response.json()["data"]
    return data


def listed(api: TestClient, key: str = DEFAULT_KEY) -> dict[str, dict[str, Any]]:
    response = api.get("/v1/keys", headers=bearer(key))
    assert response.status_code == 200, response.text
    return {item["key_id"]: item for item in response.json()["data"]}


def test_an_sdk_key_ingests_and_reads_prompts_and_nothing_else(api: TestClient) -> None:
    assert api.post(
        "/v1/prompts", json={"name": "greet", "template": "Hi {{n}}", "model": "gpt-4o"}
    ).is_success

    made = make_key(api, {"scopes": ["ingest", "prompts:read"], "name": "web app"})

    assert made["scopes"] == ["ingest", "prompts:read"]
    assert made["name"] == "web app" and made["project"] == "default"
    assert made["expires_at"] is None
    sdk = bearer(made["api_key"])
    assert api.get("/v1/prompts/greet", headers=sdk).status_code == 200
    assert api.get("/v1/prompts/greet/template", headers=sdk).status_code == 200
    assert api.post("/v1/requests", json=RECORD, headers=sdk).status_code in (200, 201, 202)
    # What the SDK's key must never do: read the log, move a label, delete, make keys.
    for method, path, body, required in [
        ("GET", "/v1/requests", None, "read"),
        ("PUT", "/v1/prompts/greet/labels/production", {"version": 1}, "write"),
        ("DELETE", "/v1/prompts/greet", None, "write"),
        ("DELETE", "/v1/requests", {"metadata": {"a": "b"}}, "admin"),
        ("POST", "/v1/keys", {"scopes": ["admin"]}, "admin"),
        ("GET", "/v1/keys", None, "admin"),
    ]:
        refused = api.request(method, path, json=body, headers=sdk)
        details = assert_error(refused, 403, "INSUFFICIENT_SCOPE", type_="permission_error")
        assert details["required"] == required
    # Nothing was changed by the refusals.
    assert api.get("/v1/prompts/greet").json()["data"]["name"] == "greet"


def test_a_write_key_cannot_make_itself_an_admin_key(api: TestClient) -> None:
    writer = make_key(api, {"scopes": ["write", "read"]})["api_key"]

    refused = api.post("/v1/keys", json={"scopes": ["admin"]}, headers=bearer(writer))

    details = assert_error(refused, 403, "INSUFFICIENT_SCOPE")
    assert details["required"] == "admin"
    assert len(listed(api)) == 2  # the default key and the writer, no third


def test_the_list_shows_scopes_maker_use_and_expiry_never_the_secret(api: TestClient) -> None:
    made = make_key(api, {"scopes": ["read"], "expires_in": "90d", "name": "dashboard"})
    assert api.get("/v1/prompts", headers=bearer(made["api_key"])).status_code == 200

    keys = listed(api)

    default_id = "key_" + hashlib.sha256(DEFAULT_KEY.encode()).hexdigest()[:12]
    mine = keys[made["key_id"]]
    assert mine["scopes"] == ["read"]
    assert mine["name"] == "dashboard"
    assert mine["created_by"] == default_id  # made with the default key
    assert mine["last_used_at"] is not None
    expires = datetime.fromisoformat(mine["expires_at"])
    assert timedelta(days=89) < expires - datetime.now(UTC) <= timedelta(days=90)
    assert mine["status"] == "active"
    # The key made at start (PROMPTRAIL_INIT_API_KEY) has every scope.
    assert keys[default_id]["scopes"] == EVERY_SCOPE
    assert keys[default_id]["created_by"] == "start-up"
    shown = api.get("/v1/keys").text
    for secret in (made["api_key"], DEFAULT_KEY, hashlib.sha256(DEFAULT_KEY.encode()).hexdigest()):
        assert secret not in shown


def test_an_expired_key_is_refused_as_invalid(
    api: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = make_key(api, {"scopes": ["prompts:read"], "expires_in": 3600})
    key = made["api_key"]
    assert api.get("/v1/prompts", headers=bearer(key)).status_code == 200  # checked and cached

    # An hour and a second later, by the collector's clock.
    later = datetime.fromisoformat(made["expires_at"]).timestamp() + 1
    monkeypatch.setattr(key_rules, "time", SimpleNamespace(time=lambda: later))

    refused = api.get("/v1/prompts", headers=bearer(key))
    assert_error(refused, 401, "INVALID_API_KEY", type_="authentication_error")
    assert "expired" in refused.json()["error"]["message"]
    assert listed(api)[made["key_id"]]["status"] == "expired"
    assert api.get("/v1/prompts").status_code == 200  # the default key never expires


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"scopes": []}, "scopes"),
        ({"scopes": ["everything"]}, "scopes"),
        ({}, "scopes"),
        ({"scopes": ["read"], "expires_in": "90 years"}, "expires_in"),
        ({"scopes": ["read"], "expires_in": 0}, "expires_in"),
        ({"scopes": ["read"], "expires_in": "4000d"}, "expires_in"),
        ({"scopes": ["read"], "name": "n" * 65}, "name"),
    ],
)
def test_a_bad_key_request_is_a_400_naming_the_field(
    api: TestClient, body: dict[str, Any], field: str
) -> None:
    assert_error(api.post("/v1/keys", json=body), 400, "VALIDATION_ERROR", field)
    assert len(listed(api)) == 1


def test_keys_of_a_store_made_before_scopes_keep_every_scope(settings: Settings) -> None:
    digest = hashlib.sha256(DEFAULT_KEY.encode()).hexdigest()
    old_key = (
        f"INSERT INTO `{settings.database}`.api_keys VALUES "
        f"('{digest}', 'default', '{DEFAULT_KEY[:8]}', now64(3))"
    )
    store_before(settings, 30, [], [old_key])

    with TestClient(create_app(settings), headers=bearer(DEFAULT_KEY)) as api:
        keys = listed(api)  # an admin route: the old key holds admin
        (only,) = keys.values()
        assert only["scopes"] == EVERY_SCOPE
        assert only["expires_at"] is None and only["created_by"] == ""
        assert (
            api.post(
                "/v1/prompts", json={"name": "p", "template": "x", "model": "gpt-4o"}
            ).status_code
            == 201
        )
        assert (
            api.request("DELETE", "/v1/requests", json={"metadata": {"a": "b"}}).status_code != 403
        )


def test_keys_create_with_scopes_and_expiry_on_the_command_line(tmp_path: Path) -> None:
    made = cli(
        "keys", "create", "--project", "team", "--scopes", "ingest,prompts:read",
        "--expires-in", "90d", "--data-dir", str(tmp_path),
    )  # fmt: skip
    assert made.returncode == 0, made.stdout + made.stderr
    assert "scopes ingest, prompts:read" in made.stderr  # the line before the key
    key = made.stdout.strip().splitlines()[-1]
    assert key.startswith("pr-")

    shown = cli("keys", "list", "--json", "--data-dir", str(tmp_path))
    assert shown.returncode == 0, shown.stderr
    (listed_key,) = json.loads(shown.stdout)
    assert listed_key["scopes"] == ["ingest", "prompts:read"]
    assert listed_key["created_by"] == "cli"
    assert listed_key["expires_at"] is not None
    assert key not in shown.stdout

    for args, named in [
        (("--scopes", "ingest,everything"), "--scopes"),
        (("--expires-in", "90y"), "--expires-in"),
    ]:
        bad = cli("keys", "create", "--project", "team", *args, "--data-dir", str(tmp_path))
        assert bad.returncode != 0
        assert "Traceback" not in bad.stdout + bad.stderr
        assert named in bad.stderr and len(bad.stderr.strip().splitlines()) == 1


def test_a_feedback_token_works_only_for_a_key_that_may_write_scores(api: TestClient) -> None:
    """The SDK mints tokens with its key, offline; the browser's vote is a score of that key."""
    record = api.post("/v1/requests", json=RECORD)
    assert record.is_success, record.text
    request_id = record.json()["data"]["id"]
    browser = TestClient(api.app)  # no key at all
    for scopes, accepted in ((["ingest", "prompts:read"], True), (["read"], False)):
        key = make_key(api, {"scopes": scopes})["api_key"]
        scope = TokenScope(
            key_id=key_rules.key_id(key_rules.hash_key(key)),
            request_id=request_id,
            trace_id=None,
            name="helpful",
            data_type="numeric",
            categories=None,
            expires=int(datetime.now(UTC).timestamp()) + 60,
            score_id=feedback_tokens.new_score_id(),
        )
        token = feedback_tokens.mint(scope, key_rules.hash_key(key))

        posted = browser.post(f"/v1/feedback/{token}", json={"value": 1})

        if accepted:
            assert posted.status_code == 201, posted.text
        else:
            assert_error(posted, 401, "INVALID_FEEDBACK_TOKEN", type_="authentication_error")


@pytest.mark.cost
def test_a_collector_on_a_server_reads_a_keys_scopes_once_and_its_revocation_each_time(
    api: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As a collector on a ClickHouse server checks keys (no shared cache): the scopes and
    expiry never change, so only the first check reads them; a revocation still counts at once."""
    store = api.app.state.services.store  # type: ignore[attr-defined]
    server_like = KeyService(store.keys)
    made = make_key(api, {"scopes": ["read", "ingest"], "expires_in": "1d"})
    reads: list[str] = []
    grants = store.keys.grants
    monkeypatch.setattr(store.keys, "grants", lambda h: reads.append(h) or grants(h))

    for _ in range(3):
        grant = server_like.authenticate_grant(made["api_key"])
        assert grant.scopes == {"read", "ingest"} and grant.project == "default"

    assert len(reads) == 1
    server_like.revoke(made["key_id"])
    with pytest.raises(InvalidApiKey):
        server_like.authenticate_grant(made["api_key"])
