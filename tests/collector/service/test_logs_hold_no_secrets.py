"""What the collector writes to its log: routes and outcomes, never keys or a user's data."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.collector.processes import KEY, collector

# A word that appears only in the data of the requests below.
MARKER = "zebracrossing"


def test_the_log_names_routes_but_holds_no_key_no_payload_and_no_query(tmp_path: Path) -> None:
    wrong_key = f"pr-wrong-{MARKER}"
    log: list[str] = []
    with collector(tmp_path / "data", log) as client:
        logged = client.post(
            "/v1/requests",
            json={
                "model": "gpt-4o-mini",
                "input_variables": {"text": f"tell {MARKER}"},
                "output": f"the {MARKER} says hi",
                "metadata": {"user_id": f"user-{MARKER}"},
            },
        )
        assert logged.status_code == 201, logged.text
        assert client.get("/v1/requests/search", params={"query": MARKER}).json()["data"]
        listed = client.get("/v1/requests", params={"metadata.user_id": f"user-{MARKER}"})
        assert len(listed.json()["data"]) == 1
        refused = httpx.get(
            f"{client.base_url}/v1/requests", headers={"Authorization": f"Bearer {wrong_key}"}
        )
        assert refused.status_code == 401
        bad = client.post(
            "/v1/requests",
            content=f'{{"model": "{MARKER}"',
            headers={"Content-Type": "application/json"},
        )
        assert bad.status_code == 400
    output = "\n".join(log)

    # The access log is there, route by route, with the outcome...
    assert '"GET /v1/requests/search?… HTTP/1.1" 200' in output
    assert '"GET /v1/requests HTTP/1.1" 401' in output
    assert '"POST /v1/requests HTTP/1.1" 201' in output
    # ...and nothing a request carried: no key (good or wrong), no payload, no query string.
    for secret in (KEY, wrong_key, MARKER):
        assert secret not in output, secret
