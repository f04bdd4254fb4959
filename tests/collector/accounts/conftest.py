"""Fixtures of the accounts tests: a collector whose first instance admin comes from the
environment, and browsers (clients without an API key) signed in to it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr

from promptrail.collector.app import create_app
from promptrail.collector.config import Settings
from tests.collector.accounts.steps import ADMIN_EMAIL, ADMIN_PASSWORD


@pytest.fixture
def admin_settings(settings: Settings) -> Settings:
    """Settings whose collector makes the first instance admin at start-up."""
    return settings.model_copy(
        update={
            "init_admin_email": ADMIN_EMAIL,
            "init_admin_password": SecretStr(ADMIN_PASSWORD),
        }
    )


@pytest.fixture
def browser(admin_settings: Settings) -> Iterator[TestClient]:
    """A browser of the collector over http: cookies, no API key."""
    with TestClient(create_app(admin_settings)) as client:
        yield client
