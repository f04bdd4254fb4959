"""The first user: ``promptrail users create`` or PROMPTRAIL_INIT_ADMIN_EMAIL/_PASSWORD."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from argon2 import extract_parameters, profiles
from fastapi.testclient import TestClient
from pydantic import SecretStr

from promptrail.collector.app import create_app
from promptrail.collector.config import Settings
from promptrail.collector.services.container import Services
from tests.collector.accounts.steps import ADMIN_EMAIL, ADMIN_PASSWORD
from tests.collector.processes import CLI, collector


def users_create(data_dir: Path, email: str, password: str) -> subprocess.CompletedProcess[str]:
    """Run ``promptrail users create --instance-admin`` with the password on stdin."""
    return subprocess.run(
        [str(CLI), "users", "create", "--email", email, "--password-stdin", "--instance-admin"],
        input=password + "\n",
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PROMPTRAIL_DATA_DIR": str(data_dir)},
    )


def test_users_create_makes_an_instance_admin_once_and_refuses_short_passwords(
    tmp_path: Path,
) -> None:
    short = users_create(tmp_path, ADMIN_EMAIL, "too short")
    made = users_create(tmp_path, ADMIN_EMAIL, ADMIN_PASSWORD)
    again = users_create(tmp_path, ADMIN_EMAIL.upper(), ADMIN_PASSWORD)

    assert short.returncode == 1
    assert short.stderr.strip() == "error: password must be at least 12 characters"
    assert made.returncode == 0, made.stderr
    assert f"created user {ADMIN_EMAIL} (instance admin)" in made.stderr
    # E-mail addresses are unique whatever their case.
    assert again.returncode == 1
    assert "already exists" in again.stderr
    assert "Traceback" not in short.stderr + again.stderr


def test_users_create_beside_a_running_collector_makes_a_user_who_signs_in(
    tmp_path: Path,
) -> None:
    log: list[str] = []
    with collector(tmp_path, log) as api:
        made = users_create(tmp_path, ADMIN_EMAIL, ADMIN_PASSWORD)
        login = api.post("/v1/auth/login", json={"email": ADMIN_EMAIL, "password": ADMIN_PASSWORD})

    assert made.returncode == 0, made.stderr
    assert login.status_code == 200, login.text
    data = login.json()["data"]
    assert data["user"]["instance_admin"] is True
    # The first instance admin owns the project of the collector's key.
    assert data["projects"] == [{"name": "default", "role": "owner"}]


def _services(client: TestClient) -> Services:
    services: Services = client.app.state.services  # type: ignore[attr-defined]
    return services


@pytest.mark.real_password_cost
def test_the_environment_s_first_admin_is_made_once_with_an_argon2id_hash(
    admin_settings: Settings,
) -> None:
    with TestClient(create_app(admin_settings)) as first:
        made = _services(first).accounts.users.get(ADMIN_EMAIL)
    # A restart with the same environment finds the user and leaves it as it is.
    with TestClient(create_app(admin_settings)) as second:
        users = _services(second).accounts.users.list()

    assert [u.id for u in users] == [made.id]
    assert made.instance_admin and not made.disabled
    assert made.password_hash.startswith("$argon2id$")
    assert ADMIN_PASSWORD not in made.password_hash
    # At the product's full cost (the other tests' collectors hash cheaply: tests/conftest.py).
    assert extract_parameters(made.password_hash) == profiles.RFC_9106_LOW_MEMORY


def test_a_bad_initial_admin_password_stops_the_start_naming_the_setting(
    admin_settings: Settings,
) -> None:
    short = admin_settings.model_copy(update={"init_admin_password": SecretStr("short")})

    with pytest.raises(ValueError) as stopped, TestClient(create_app(short)):
        pass

    assert str(stopped.value) == (
        "PROMPTRAIL_INIT_ADMIN_PASSWORD: password must be at least 12 characters"
    )
