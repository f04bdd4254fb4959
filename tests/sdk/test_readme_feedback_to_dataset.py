"""The README's loop: a thumbs-down written the feedback example's way, found by the dataset
example's filter (``{"score.thumbs": False}``), by the request list's and by an export's."""

from __future__ import annotations

import json
import time

import httpx
import openai

import promptrail
from promptrail.testing import OpenAIStub
from tests.keys import DEFAULT_KEY


def test_a_thumbs_down_from_the_browser_is_found_by_the_readmes_dataset_filter(
    capture: str, openai_stub: OpenAIStub
) -> None:
    api = openai.OpenAI(api_key="k", base_url=f"{openai_stub.url}/v1", max_retries=0)

    @promptrail.observe
    def answer(question: str) -> str:
        reply = api.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": question}]
        )
        return reply.choices[0].message.content or ""

    # The README's feedback example: the call's record, a token, the browser's vote (no key).
    answer("capital of France?")
    answer("capital of Spain?")
    liked = promptrail.last_request_id()
    answer("capital of Italy?")
    request_id = promptrail.last_request_id()
    assert request_id is not None and liked is not None
    for target, value in ((request_id, False), (liked, True)):
        token = promptrail.feedback_token("thumbs", request_id=target)
        voted = httpx.post(
            f"{capture}/v1/feedback/{token}", json={"value": value, "comment": "wrong city"}
        )
        assert voted.status_code in (200, 201), voted.text
    api.close()
    assert promptrail.flush(timeout=15)

    with promptrail.Client(DEFAULT_KEY, capture) as client:
        client.datasets.create("fix-these")
        client.datasets.create("liked")
        deadline = time.monotonic() + 15
        while True:  # the records are stored once the collector's write buffer commits
            listed = [r.id for r in client.requests.list(scores={"thumbs": False})]
            if listed or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        # The README's dataset example, word for word.
        added = client.datasets.add_from_requests("fix-these", filters={"score.thumbs": False})
        liked_ones = client.datasets.add_from_requests("liked", filters={"score.thumbs": True})
        items = list(client.datasets.items("fix-these"))
        # An export takes the same filter (the collector read JSON false there as 0.0, which
        # matches no boolean score).
        job = client.requests.export(format="json", filters={"score.thumbs": False})
        assert client.requests.wait_for_export(job.export_id).status == "completed"
        exported = [
            json.loads(line)["id"] for line in client.requests.download(job.export_id).splitlines()
        ]

    assert listed == [request_id]
    assert added == 1
    assert [item.source_request_id for item in items] == [request_id]
    assert liked_ones == 1
    assert exported == [request_id]
