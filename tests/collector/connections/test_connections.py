"""Provider connections: create, list, read, change, delete; secrets sealed and never shown."""

from __future__ import annotations

import base64
import logging
import stat
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr

from promptrail.collector.app import create_app
from promptrail.collector.config import Settings
from promptrail.collector.services.connections.sealing import KEY_FILE_NAME
from tests.keys import DEFAULT_AUTH

SECRET = "sk-live-very-secret-key-1234"
HEADER_SECRET = "org-header-secret-value-9876"


def _create(api: TestClient, name: str = "team-openai", **fields: object) -> dict[str, object]:
    body = {"name": name, "provider": "openai", "api_key": SECRET, **fields}
    response = api.post("/v1/connections", json=body)
    assert response.status_code == 201, response.text
    data: dict[str, object] = response.json()["data"]
    return data


def test_a_connection_is_created_listed_read_changed_and_deleted(api: TestClient) -> None:
    made = _create(
        api,
        base_url="http://127.0.0.1:9/v1/",
        models=["gpt-4o-mini"],
        headers={"X-Org": HEADER_SECRET},
        monthly_budget_usd=25,
    )
    assert made["api_key_hint"] == "…1234"
    assert made["base_url"] == "http://127.0.0.1:9/v1"
    assert made["header_names"] == ["X-Org"]
    assert made["monthly_budget_usd"] == 25
    assert made["spend_this_month_usd"] == 0
    assert made["last_used_at"] is None
    assert api.get("/v1/connections").json()["data"][0]["name"] == "team-openai"
    assert api.get("/api/v1/connections/team-openai").json()["data"]["provider"] == "openai"

    changed = api.patch(
        "/v1/connections/team-openai",
        json={"api_key": "sk-another-key-abcd", "monthly_budget_usd": None, "models": None},
    )
    assert changed.status_code == 200, changed.text
    data = changed.json()["data"]
    assert data["api_key_hint"] == "…abcd"
    assert data["monthly_budget_usd"] is None
    assert data["models"] == []
    assert data["header_names"] == ["X-Org"]  # not given: kept

    gone = api.delete("/v1/connections/team-openai")
    assert gone.status_code == 200 and gone.json()["data"]["name"] == "team-openai"
    missing = api.get("/v1/connections/team-openai")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "CONNECTION_NOT_FOUND"
    assert api.get("/v1/connections").json()["data"] == []
    # A deleted name may be used again.
    _create(api)


def test_a_name_in_use_is_a_409_and_unknown_names_404(api: TestClient) -> None:
    _create(api)
    again = api.post(
        "/v1/connections", json={"name": "team-openai", "provider": "anthropic", "api_key": "k"}
    )
    assert again.status_code == 409
    assert again.json()["error"]["code"] == "CONNECTION_ALREADY_EXISTS"
    for method in ("GET", "PATCH", "DELETE"):
        response = api.request(
            method, "/v1/connections/nope", json={} if method == "PATCH" else None
        )
        assert response.status_code == 404, (method, response.text)
        assert response.json()["error"]["code"] == "CONNECTION_NOT_FOUND"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": "Bad Name", "provider": "openai", "api_key": "k"}, "name"),
        ({"name": "x" * 65, "provider": "openai", "api_key": "k"}, "name"),
        ({"name": "ok", "provider": "mistral", "api_key": "k"}, "provider"),
        ({"name": "ok", "provider": "openai"}, "api_key"),
        ({"name": "ok", "provider": "openai", "api_key": ""}, "api_key"),
        ({"name": "ok", "provider": "openai", "api_key": "sk-é-key"}, "api_key"),
        ({"name": "ok", "provider": "openai", "api_key": "sk key"}, "api_key"),
        ({"name": "ok", "provider": "openai", "api_key": "sk-key\n"}, "api_key"),
        (
            {"name": "ok", "provider": "openai", "api_key": "k", "headers": {"X-A": "b\n"}},
            "headers",
        ),
        ({"name": "ok", "provider": "openai", "api_key": "k", "headers": {"X-A": "é"}}, "headers"),
        ({"name": "ok", "provider": "openai", "api_key": "k", "base_url": "ftp://h/"}, "base_url"),
        ({"name": "ok", "provider": "openai", "api_key": "k", "base_url": "nourl"}, "base_url"),
        (
            {
                "name": "ok",
                "provider": "openai",
                "api_key": "k",
                "base_url": "http://169.254.169.254/",
            },
            "base_url",
        ),
        (
            {"name": "ok", "provider": "openai", "api_key": "k", "base_url": "http://[fe80::1]/v1"},
            "base_url",
        ),
        (
            {
                "name": "ok",
                "provider": "openai",
                "api_key": "k",
                "base_url": "http://[::ffff:169.254.1.1]/",
            },
            "base_url",
        ),
        ({"name": "ok", "provider": "openai_compatible", "api_key": "k"}, "base_url"),
        (
            {"name": "ok", "provider": "openai", "api_key": "k", "monthly_budget_usd": -1},
            "monthly_budget_usd",
        ),
        (
            {"name": "ok", "provider": "openai", "api_key": "k", "headers": {"Authorization": "x"}},
            "headers",
        ),
        (
            {"name": "ok", "provider": "openai", "api_key": "k", "headers": {"X-A": "a\nb"}},
            "headers",
        ),
        ({"name": "ok", "provider": "openai", "api_key": "k", "models": "gpt-4o"}, "models"),
        ({"name": "ok", "provider": "openai", "api_key": "k", "extra": 1}, "extra"),
    ],
)
def test_bad_input_is_a_400_naming_the_field(
    api: TestClient, body: dict[str, object], field: str
) -> None:
    response = api.post("/v1/connections", json=body)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "VALIDATION_ERROR"
    assert error["details"]["field"].startswith(field)


def test_loopback_and_private_base_urls_are_allowed(api: TestClient) -> None:
    for number, url in enumerate(["http://localhost:11434/v1", "http://10.1.2.3:8000/v1"]):
        _create(api, name=f"local-{number}", provider="openai_compatible", base_url=url)


def test_a_patch_to_a_link_local_base_url_is_refused(api: TestClient) -> None:
    _create(api)
    response = api.patch(
        "/v1/connections/team-openai", json={"base_url": "http://169.254.169.254/latest"}
    )
    assert response.status_code == 400
    assert response.json()["error"]["details"]["field"] == "base_url"


def test_the_secrets_are_in_no_answer_no_log_and_not_in_the_store_in_clear(
    api: TestClient, settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    answers = [
        api.post(
            "/v1/connections",
            json={
                "name": "sealed",
                "provider": "anthropic",
                "api_key": SECRET,
                "headers": {"X-Org": HEADER_SECRET},
            },
        ).text,
        api.get("/v1/connections").text,
        api.get("/v1/connections/sealed").text,
        api.patch("/v1/connections/sealed", json={"headers": {"X-Org": HEADER_SECRET}}).text,
        api.patch(
            "/v1/connections/sealed", json={"headers": {"X-Org": "a\nb" + HEADER_SECRET}}
        ).text,
        api.post(
            "/v1/connections", json={"name": "sealed", "provider": "openai", "api_key": SECRET}
        ).text,
        api.get("/openapi.json").text,
        api.delete("/v1/connections/sealed").text,
    ]
    for text in [*answers, caplog.text]:
        assert SECRET not in text and HEADER_SECRET not in text
        assert SECRET[-8:] not in text
    services = api.app.state.services  # type: ignore[attr-defined]
    stored = services.store.client.query(
        f"SELECT sealed, api_key_hint FROM `{settings.database}`.provider_connections"
    ).result_rows
    assert stored
    for sealed, hint in stored:
        assert SECRET not in sealed and HEADER_SECRET not in sealed
        assert SECRET.encode() not in base64.b64decode(sealed)
        assert hint == "…1234"


def test_the_key_file_is_made_0600_in_the_data_dir(api: TestClient, settings: Settings) -> None:
    key_file = Path(settings.data_dir) / KEY_FILE_NAME
    assert key_file.exists()
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert len(base64.b64decode(key_file.read_text())) == 32
    _create(api)
    stored = api.app.state.services.store.client.query(  # type: ignore[attr-defined]
        f"SELECT sealed FROM `{settings.database}`.provider_connections"
    ).result_rows
    assert key_file.read_text().strip() not in stored[0][0]


def test_a_secret_key_setting_is_used_and_no_key_file_is_made(
    settings: Settings, tmp_path: Path
) -> None:
    key = base64.b64encode(bytes(range(32))).decode()
    keyed = settings.model_copy(
        update={"secret_key": SecretStr(key), "data_dir": tmp_path / "keyed"}
    )
    with TestClient(create_app(keyed), headers=DEFAULT_AUTH) as client:
        _create(client)
        assert client.get("/v1/connections/team-openai").status_code == 200
    assert not (tmp_path / "keyed" / KEY_FILE_NAME).exists()


def test_a_bad_secret_key_setting_is_refused_saying_why() -> None:
    with pytest.raises(ValueError, match="32 bytes in base64"):
        Settings(secret_key="c2hvcnQ=")


def test_another_project_neither_sees_nor_changes_a_connection(api: TestClient) -> None:
    _create(api)
    other = api.app.state.services.keys.create("other")  # type: ignore[attr-defined]
    auth = {"Authorization": f"Bearer {other}"}
    assert api.get("/v1/connections", headers=auth).json()["data"] == []
    for method in ("GET", "PATCH", "DELETE"):
        response = api.request(
            method,
            "/v1/connections/team-openai",
            headers=auth,
            json={} if method == "PATCH" else None,
        )
        assert response.status_code == 404, method
    # The same name is free in the other project.
    made = api.post(
        "/v1/connections",
        headers=auth,
        json={"name": "team-openai", "provider": "openai", "api_key": "sk-other-project-key"},
    )
    assert made.status_code == 201
    assert api.get("/v1/connections/team-openai").json()["data"]["api_key_hint"] == "…1234"


def test_a_rotated_key_reseals_every_connection_at_start(
    settings: Settings, tmp_path: Path
) -> None:
    old = base64.b64encode(bytes(range(32))).decode()
    new = base64.b64encode(bytes(range(1, 33))).decode()
    first = settings.model_copy(update={"secret_key": SecretStr(old), "data_dir": tmp_path})
    with TestClient(create_app(first), headers=DEFAULT_AUTH) as client:
        _create(client, headers={"X-Org": HEADER_SECRET})
    rotated = settings.model_copy(
        update={
            "secret_key": SecretStr(new),
            "secret_key_previous": SecretStr(old),
            "data_dir": tmp_path,
        }
    )
    with TestClient(create_app(rotated), headers=DEFAULT_AUTH):
        pass
    # Now the new key alone opens it: the old one can go.
    alone = settings.model_copy(update={"secret_key": SecretStr(new), "data_dir": tmp_path})
    with TestClient(create_app(alone), headers=DEFAULT_AUTH) as client:
        connections = client.app.state.services.connections  # type: ignore[attr-defined]
        row = connections.find("default", "team-openai")
        opened = connections.secrets("default", row)
        assert (opened.api_key, opened.headers) == (SECRET, {"X-Org": HEADER_SECRET})
        # A PATCH that needs the secrets works too.
        changed = client.patch("/v1/connections/team-openai", json={"headers": {}})
        assert changed.status_code == 200, changed.text


def test_a_connection_sealed_under_a_lost_key_says_to_set_its_key_again(
    settings: Settings, tmp_path: Path
) -> None:
    first = settings.model_copy(
        update={"secret_key": SecretStr(base64.b64encode(bytes(32)).decode()), "data_dir": tmp_path}
    )
    with TestClient(create_app(first), headers=DEFAULT_AUTH) as client:
        _create(client)
    other = settings.model_copy(
        update={"secret_key": SecretStr(base64.b64encode(bytes([7]) * 32).decode())}
    )
    with TestClient(create_app(other), headers=DEFAULT_AUTH) as client:
        assert client.post("/v1/connections/team-openai/check").status_code == 400
        refused = client.patch("/v1/connections/team-openai", json={"headers": {"X-A": "b"}})
        assert refused.status_code == 400
        assert "set its api_key again" in refused.json()["error"]["message"]
        assert (
            client.patch("/v1/connections/team-openai", json={"api_key": SECRET}).status_code == 200
        )


def test_the_start_up_lines_name_the_key_file(
    capsys: pytest.CaptureFixture[str], settings: Settings
) -> None:
    from promptrail.collector.cli.serve import _print_banner

    _print_banner(settings, "http://127.0.0.1:8000", None, "/data/connections.key")
    assert "connections' secret key: /data/connections.key" in capsys.readouterr().out


def test_the_raw_key_is_in_no_file_of_the_store_or_the_data_dir(
    api: TestClient, settings: Settings, store_url: str
) -> None:
    _create(api, headers={"X-Org": HEADER_SECRET})
    services = api.app.state.services  # type: ignore[attr-defined]
    services.store.client.command(
        f"OPTIMIZE TABLE `{settings.database}`.provider_connections FINAL"
    )
    roots = [Path(store_url.removeprefix("chdb://")), Path(settings.data_dir)]
    files = [p for root in roots for p in root.rglob("*") if p.is_file()]
    assert files
    for path in files:
        raw = path.read_bytes()
        assert SECRET.encode() not in raw and HEADER_SECRET.encode() not in raw, path


def test_a_damaged_key_file_stops_the_start_saying_so(settings: Settings, tmp_path: Path) -> None:
    from promptrail.collector.services.connections.sealing import load_keys

    damaged = tmp_path / "damaged"
    damaged.mkdir()
    (damaged / KEY_FILE_NAME).write_text("not a key\n")
    with pytest.raises(ValueError, match="is not a key: 32 bytes in base64 expected"):
        load_keys(settings.model_copy(update={"data_dir": damaged}))
