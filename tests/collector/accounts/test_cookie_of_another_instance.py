"""A session cookie is good only on the collector that made it (issue 51, "Bad input and safety";
docs/security.md, "Threat model"): sessions are kept server-side, so a cookie signed in on
another instance (another store and data dir, the same user and password there) is refused with
401, reads and writes alike, as is a cookie with one character changed. Real
chDB, real HTTP (ASGI transport), both collectors running at once.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from promptrail.collector.access.principal import SESSION_COOKIE
from promptrail.collector.app import create_app
from promptrail.collector.config import Settings
from tests.collector.accounts.steps import ADMIN_EMAIL, ADMIN_PASSWORD, sign_in
from tests.collector.contract import assert_error
from tests.databases import ReusableDatabase, drop_database


@pytest.fixture
def other_instance(
    admin_settings: Settings,
    store_url: str,
    reusable_database: ReusableDatabase,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[TestClient]:
    """A second collector, on a store and data dir of its own, with the same first admin."""
    settings = admin_settings.model_copy(
        update={
            "database": f"t_{uuid.uuid4().hex[:16]}",
            "data_dir": Path(tmp_path_factory.mktemp("other")),
        }
    )
    try:
        # A copy of the process's migrated template (~0.15 s of CPU), not migrated anew.
        reusable_database.make_migrated(settings.database)
        with TestClient(create_app(settings)) as client:
            yield client
    finally:
        drop_database(store_url, settings.database)


def test_a_cookie_signed_in_on_another_instance_is_refused(
    browser: TestClient, other_instance: TestClient
) -> None:
    csrf = sign_in(browser, ADMIN_EMAIL, ADMIN_PASSWORD)
    token = browser.cookies[SESSION_COOKIE]
    assert browser.get("/v1/auth/me").status_code == 200  # a good session where it was made

    carried = TestClient(other_instance.app, cookies={SESSION_COOKIE: token})
    for response in (
        carried.get("/v1/auth/me"),
        carried.get("/v1/prompts"),
        carried.post(
            "/v1/prompts", json={"name": "x", "template": "y", "model": "m"}, headers=csrf
        ),
        carried.post("/v1/projects", json={"name": "taken"}, headers=csrf),
    ):
        # Not signed in there: 401, whatever the route (INVALID_CREDENTIALS on the account
        # routes, INVALID_API_KEY on a project's).
        assert_error(response, 401, type_="authentication_error")

    tampered = token[:-1] + ("A" if token[-1] != "A" else "B")
    changed = TestClient(browser.app, cookies={SESSION_COOKIE: tampered})
    assert_error(changed.get("/v1/prompts"), 401, "INVALID_API_KEY")

    # Nothing was made on the other instance; its own sign-in still works.
    own = sign_in(other_instance, ADMIN_EMAIL, ADMIN_PASSWORD)
    assert other_instance.get("/v1/prompts/x").status_code == 404
    projects = other_instance.get("/v1/projects").json()["data"]
    assert "taken" not in [p["name"] for p in projects]
    assert own["X-CSRF-Token"] != csrf["X-CSRF-Token"]
