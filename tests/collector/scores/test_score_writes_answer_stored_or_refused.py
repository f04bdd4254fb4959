"""Score writes go through one insert answering Stored or a typed refusal (issue 46 point 1):
the score store answers ``Refused`` when the store cannot take a write (here ClickHouse's own
TOO_MANY_PARTS, ``parts_to_throw_insert`` on the real table, never a fake), and every score
route still answers a store outage with the same 503 STORE_UNAVAILABLE, its body and the
collector's ``Retry-After``.
"""

from __future__ import annotations

import uuid
from dataclasses import replace

from fastapi.testclient import TestClient

from promptrail.collector.app import create_app
from promptrail.collector.config import Settings
from promptrail.collector.store.score_rows import ScoreRow
from promptrail.collector.store.writes import STORED, Refused
from tests.collector.outages import RETRY_AFTER, assert_store_unavailable, failing_inserts
from tests.keys import DEFAULT_AUTH


def test_the_score_store_answers_stored_or_refused(settings: Settings) -> None:
    with TestClient(create_app(settings), headers=DEFAULT_AUTH) as api:
        store = api.app.state.services.store.scores
        score = api.post("/v1/scores", json={"request_id": "req_a", "name": "n", "value": 1})
        assert score.status_code == 201, score.text
        row = store.get("default", score.json()["data"]["id"])
        assert isinstance(row, ScoreRow)
        assert store.insert([replace(row, value=2)]) == STORED
        with failing_inserts(api, "scores"):
            refused = store.insert([replace(row, value=3)])
            assert isinstance(refused, Refused)
            assert not refused.busy  # failing, not slower than arrivals: STORE_UNAVAILABLE
            assert "TOO_MANY_PARTS" in refused.message
        assert store.insert([replace(row, value=4)]) == STORED
        assert api.get(f"/v1/scores/{row.id}").json()["data"]["value"] == 4


def test_every_score_write_answers_an_outage_with_the_same_503(settings: Settings) -> None:
    settings = settings.model_copy(update={"store_retry_after_seconds": RETRY_AFTER})
    with TestClient(create_app(settings), headers=DEFAULT_AUTH) as api:
        record = f"req_{uuid.uuid4().hex}"
        first = api.post("/v1/scores", json={"request_id": record, "name": "n", "value": 1})
        assert first.status_code == 201, first.text
        token = api.post("/v1/scores/tokens", json={"request_id": record, "name": "thumb"})
        assert token.status_code == 201, token.text
        score = {"request_id": record, "name": "n", "value": 0.5}
        with failing_inserts(api, "scores"):
            assert_store_unavailable(api.post("/v1/scores", json=score))
            assert_store_unavailable(api.post("/v1/scores/batch", json={"scores": [score]}))
            assert_store_unavailable(api.delete(f"/v1/scores/{first.json()['data']['id']}"))
            browser = TestClient(api.app)
            assert_store_unavailable(
                browser.post(token.json()["data"]["url"], json={"value": True})
            )
        config = {"data_type": "numeric", "min": 0, "max": 1}
        assert api.put("/v1/score-configs/n", json=config).status_code == 200
        with failing_inserts(api, "score_configs"):
            assert_store_unavailable(api.put("/v1/score-configs/n", json=config))
        # Nothing refused was stored, and writes work again at once.
        listed = api.get("/v1/scores", params={"request_id": record}).json()["data"]
        assert [(s["name"], s["value"]) for s in listed] == [("n", 1)]
        assert api.post("/v1/scores", json=score).status_code == 201
