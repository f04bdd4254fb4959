"""API keys an operator can list, revoke and rotate (issue 25, point 1), over real HTTP.

These drive the admin routes ``promptrail keys ...`` uses, on in-process collectors over the
test's embedded store; ``test_keys_cli.py`` runs the commands themselves.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from fastapi.testclient import TestClient

from promptrail.collector.app import create_app
from promptrail.collector.config import Settings
from promptrail.collector.services import keys as key_rules
from promptrail.collector.services.keys import KeyService
from tests.collector.contract import assert_error
from tests.collector.upgrades import store_before, wide_rows
from tests.keys import DEFAULT_AUTH, DEFAULT_KEY

ADMIN_TOKEN = "test-admin-token"
ADMIN = {"X-Promptrail-Admin": ADMIN_TOKEN}
REVOKE = "/v1/admin/keys/revoke"
ROTATE = "/v1/admin/keys/rotate"


def assert_refused(response: Any) -> None:
    """The contract's 401 (docs/security.md, "Keys")."""
    assert_error(response, 401, "INVALID_API_KEY", type_="authentication_error")


def works(client: TestClient, key: str) -> bool:
    """Whether a request with ``key`` is served (200) rather than refused (401)."""
    response = client.get("/v1/prompts", headers={"Authorization": f"Bearer {key}"})
    if response.status_code != 200:
        assert_refused(response)
    return response.status_code == 200


def id_of(key: str) -> str:
    """The key id a list shows: ``key_`` and 12 hex digits of the key's SHA-256."""
    return "key_" + hashlib.sha256(key.encode()).hexdigest()[:12]


@pytest.fixture
def admin(api: TestClient) -> TestClient:
    """The admin routes of ``api``'s collector, with its admin token (as ``serve`` sets one)."""
    api.app.state.admin_token = ADMIN_TOKEN
    return TestClient(api.app, headers=ADMIN)


def create(admin: TestClient, project: str) -> str:
    response = admin.post("/v1/admin/keys", json={"project": project})
    assert response.status_code == 201, response.text
    key: str = response.json()["data"]["api_key"]
    return key


def listed(admin: TestClient, **params: Any) -> dict[str, dict[str, Any]]:
    response = admin.get("/v1/admin/keys", params=params)
    assert response.status_code == 200, response.text
    return {key["key_id"]: key for key in response.json()["data"]}


def test_a_list_shows_each_key_by_id_and_prefix_never_the_key_or_its_hash(
    api: TestClient, admin: TestClient
) -> None:
    used, unused = create(admin, "team"), create(admin, "team")
    elsewhere = create(admin, "elsewhere")
    assert works(api, used)

    response = admin.get("/v1/admin/keys", params={"project": "team"})
    team = listed(admin, project="team")
    everyone = listed(admin)

    assert set(team) == {id_of(used), id_of(unused)}
    assert team[id_of(used)]["project"] == "team"
    assert team[id_of(used)]["prefix"] == used[:8]
    assert team[id_of(used)]["status"] == "active"
    assert team[id_of(used)]["revoked_at"] is None
    assert team[id_of(used)]["last_used_at"] is not None
    assert team[id_of(unused)]["last_used_at"] is None
    for key in (used, unused):
        assert key not in response.text
        assert hashlib.sha256(key.encode()).hexdigest() not in response.text
    assert set(everyone) == {id_of(DEFAULT_KEY), id_of(used), id_of(unused), id_of(elsewhere)}


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", "/v1/admin/keys", None),
        ("POST", REVOKE, {"key": DEFAULT_KEY}),
        ("POST", ROTATE, {"project": "default"}),
        ("POST", "/v1/admin/keys", {"project": "default"}),
    ],
)
def test_the_key_routes_need_the_collector_s_admin_token(
    api: TestClient, method: str, path: str, body: dict[str, Any] | None
) -> None:
    # A collector not started by `promptrail serve` has no token: it refuses them all.
    assert_refused(TestClient(api.app).request(method, path, json=body, headers=ADMIN))
    api.app.state.admin_token = ADMIN_TOKEN
    for headers in ({}, {"X-Promptrail-Admin": "wrong"}, DEFAULT_AUTH):
        assert_refused(TestClient(api.app).request(method, path, json=body, headers=headers))

    assert works(api, DEFAULT_KEY)  # nothing was revoked or rotated


ADMIN_ROUTES = [
    ("GET", "/v1/admin/keys"),
    ("POST", "/v1/admin/keys"),
    ("POST", REVOKE),
    ("POST", ROTATE),
    ("POST", "/v1/admin/backups"),
    ("GET", "/v1/admin/backups/backup_0"),
    ("POST", "/v1/admin/store/stall"),
    ("POST", "/v1/admin/store/resume"),
]


def test_every_admin_route_checks_the_one_admin_token(settings: Settings) -> None:
    # Keys, backups and the store's fault injection: one check guards them all, before the
    # body is read (a wrong token never learns what the body lacks).
    app = create_app(settings.model_copy(update={"fault_injection": True}))
    with TestClient(app) as client:
        app.state.admin_token = ADMIN_TOKEN
        for method, path in ADMIN_ROUTES:
            for headers in ({}, {"X-Promptrail-Admin": "wrong"}, DEFAULT_AUTH):
                response = client.request(method, path, json={}, headers=headers)
                assert response.status_code == 401, (method, path, response.text)
                assert_refused(response)
        # The routes are there: with the token, an empty body is the body's error.
        for method, path in ADMIN_ROUTES:
            if method == "POST" and path != "/v1/admin/store/resume":
                answer = client.request(
                    method, path, json={}, headers={"X-Promptrail-Admin": ADMIN_TOKEN}
                )
                assert answer.status_code == 400, (path, answer.text)


@pytest.mark.parametrize("by", ["id", "key"])
def test_a_revoked_key_is_refused_from_the_next_request_on(
    api: TestClient, admin: TestClient, by: str
) -> None:
    key, kept = create(admin, "team"), create(admin, "team")
    assert works(api, key)  # checked once: the collector now knows it

    revoked = admin.post(REVOKE, json={"key": id_of(key) if by == "id" else key})

    assert revoked.status_code == 200, revoked.text
    assert revoked.json()["data"]["key_id"] == id_of(key)
    assert revoked.json()["data"]["status"] == "revoked"
    assert key not in revoked.text
    anyone = TestClient(api.app)  # no default key
    for headers in ({"Authorization": f"Bearer {key}"}, {"X-API-Key": key}):
        assert_refused(anyone.get("/v1/prompts", headers=headers))
        assert_refused(anyone.get("/v1/requests", headers=headers))
    assert works(api, kept)
    assert set(listed(admin, project="team")) == {id_of(kept)}
    every = listed(admin, project="team", include_revoked=True)
    assert {k: v["status"] for k, v in every.items()} == {
        id_of(key): "revoked",
        id_of(kept): "active",
    }
    # Revoking it again is no error, and changes nothing.
    again = admin.post(REVOKE, json={"key": id_of(key)})
    assert again.status_code == 200, again.text
    assert again.json()["data"]["revoked_at"] == revoked.json()["data"]["revoked_at"]


@pytest.mark.parametrize("ref", ["key_0123456789ab", "pr-a-key-nobody-was-given"])
def test_revoking_an_unknown_key_is_a_404_that_never_repeats_a_key(
    api: TestClient, admin: TestClient, ref: str
) -> None:
    response = admin.post(REVOKE, json={"key": ref})

    assert response.status_code == 404, response.text
    error = response.json()["error"]
    assert (error["code"], error["type"]) == ("KEY_NOT_FOUND", "not_found_error")
    if ref.startswith("key_"):
        assert ref in error["message"]
    else:
        assert ref not in response.text
    assert works(api, DEFAULT_KEY)


@pytest.mark.parametrize("checks", ["embedded", "every request"])
def test_a_key_revoked_through_one_collector_is_refused_by_another_at_once(
    api: TestClient, admin: TestClient, settings: Settings, checks: str
) -> None:
    key = create(admin, "team")
    with TestClient(create_app(settings)) as other:
        if checks == "every request":
            # What a collector on a ClickHouse server runs: no cache, the store every time.
            services = other.app.state.services
            services.keys.close()
            services.keys = KeyService(services.store.keys)
        assert works(other, key) and works(api, key)

        assert admin.post(REVOKE, json={"key": id_of(key)}).status_code == 200

        assert_refused(other.get("/v1/prompts", headers={"X-API-Key": key}))
        assert not works(api, key)
        # A rotation through one collector reaches the other too.
        old = create(admin, "ops")
        assert works(other, old)
        new = admin.post(ROTATE, json={"project": "ops"}).json()["data"]["api_key"]
        assert not works(other, old)
        assert works(other, new)


def test_rotate_without_grace_refuses_the_project_s_old_keys_at_once(
    api: TestClient, admin: TestClient
) -> None:
    old = [create(admin, "team"), create(admin, "team")]
    elsewhere = create(admin, "elsewhere")
    assert all(works(api, key) for key in old)

    response = admin.post(ROTATE, json={"project": "team"})

    assert response.status_code == 200, response.text
    data = response.json()["data"]
    new = data["api_key"]
    assert new.startswith("pr-") and len(new) >= 43 and new not in old
    assert data["key_id"] == id_of(new)
    assert {k["key_id"]: k["status"] for k in data["revoked"]} == {
        id_of(key): "revoked" for key in old
    }
    assert not any(works(api, key) for key in old)
    assert works(api, new)
    assert works(api, elsewhere) and works(api, DEFAULT_KEY)
    assert set(listed(admin, project="team")) == {id_of(new)}


def test_rotate_with_grace_keeps_the_old_keys_working_until_it_ends(
    api: TestClient, admin: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    old, also_old = create(admin, "team"), create(admin, "team")
    assert works(api, old)
    before = datetime.now(UTC)

    response = admin.post(ROTATE, json={"project": "team", "grace_seconds": 600})

    assert response.status_code == 200, response.text
    data = response.json()["data"]
    new = data["api_key"]
    ends = {k["key_id"]: k for k in data["revoked"]}
    assert {k: v["status"] for k, v in ends.items()} == {
        id_of(old): "expiring",
        id_of(also_old): "expiring",
    }
    revoked_at = datetime.fromisoformat(ends[id_of(old)]["revoked_at"])
    assert (
        before + timedelta(seconds=599) <= revoked_at <= datetime.now(UTC) + timedelta(seconds=600)
    )
    assert works(api, old) and works(api, also_old) and works(api, new)
    assert listed(admin, project="team")[id_of(old)]["status"] == "expiring"
    # A key in its grace can still be revoked at once.
    assert admin.post(REVOKE, json={"key": also_old}).status_code == 200
    assert not works(api, also_old)

    # Ten minutes and a second later, by the collector's clock.
    later = revoked_at.timestamp() + 1
    monkeypatch.setattr(key_rules, "time", SimpleNamespace(time=lambda: later))

    assert not works(api, old)
    assert works(api, new)
    assert listed(admin, project="team", include_revoked=True)[id_of(old)]["status"] == "revoked"


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        ({"project": "team", "grace_seconds": -1}, 400, "grace_seconds"),
        ({"project": "team", "grace_seconds": "soon"}, 400, "grace_seconds"),
        ({"project": "nobody-here"}, 404, None),
    ],
)
def test_a_rotation_that_cannot_be_done_says_why_and_changes_nothing(
    api: TestClient, admin: TestClient, body: dict[str, Any], status: int, field: str | None
) -> None:
    key = create(admin, "team")

    response = admin.post(ROTATE, json=body)

    assert response.status_code == status, response.text
    error = response.json()["error"]
    if field:
        assert (error["code"], error["details"]["field"]) == ("VALIDATION_ERROR", field)
    else:
        assert error["code"] == "KEY_NOT_FOUND"
        assert "nobody-here" in error["message"]
    assert works(api, key)
    assert set(listed(admin, project="team")) == {id_of(key)}


def test_last_use_is_kept_in_memory_and_written_once_not_per_request(
    api: TestClient, admin: TestClient, settings: Settings
) -> None:
    key = create(admin, "team")
    client = api.app.state.services.store.client

    def stored_uses() -> int:
        table = f"`{settings.database}`.api_key_usage"
        return int(client.query(f"SELECT count() FROM {table}").result_rows[0][0])

    for _ in range(5):
        assert works(api, key)

    assert stored_uses() == 0
    assert listed(admin, project="team")[id_of(key)]["last_used_at"] is not None
    assert api.app.state.services.keys.write_usage() == 1
    assert stored_uses() == 1
    # A collector that stops writes what it kept: the next one lists it.
    with TestClient(create_app(settings)) as other:
        assert works(other, DEFAULT_KEY)
    assert stored_uses() == 2
    other_admin = create_app(settings)
    other_admin.state.admin_token = ADMIN_TOKEN
    with TestClient(other_admin, headers=ADMIN) as fresh:
        assert listed(fresh, project="default")[id_of(DEFAULT_KEY)]["last_used_at"] is not None


def test_keys_of_a_store_made_before_revocations_can_be_listed_and_revoked(
    settings: Settings,
) -> None:
    # The default key as that release stored it.
    digest = hashlib.sha256(DEFAULT_KEY.encode()).hexdigest()
    old_key = (
        f"INSERT INTO `{settings.database}`.api_keys VALUES "
        f"('{digest}', 'default', '{DEFAULT_KEY[:8]}', now64(3))"
    )
    store_before(settings, 13, wide_rows("keys", 1, 10), [old_key])
    app = create_app(settings)
    app.state.admin_token = ADMIN_TOKEN
    with TestClient(app) as api:
        admin = TestClient(app, headers=ADMIN)
        assert works(api, DEFAULT_KEY)
        assert listed(admin)[id_of(DEFAULT_KEY)]["status"] == "active"

        assert admin.post(REVOKE, json={"key": DEFAULT_KEY}).status_code == 200

        assert not works(api, DEFAULT_KEY)
