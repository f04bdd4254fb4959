"""``promptrail.feedback_token``: made in the process with no round trip, exactly the shared format.

The format (the collector checks what the SDK signs) is recomputed here from its definition,
not from the SDK's helpers; then a live collector takes a token the SDK made, as an end user's
browser would post it (no key), and refuses it altered, widened or expired.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

import promptrail
from tests.keys import DEFAULT_AUTH, DEFAULT_KEY

KEY = "pr-token-test-key"


def unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def spec_mac(key: str, signed: str) -> bytes:
    """The MAC token.md defines, from the raw key."""
    secret = hmac.new(
        bytes.fromhex(hashlib.sha256(key.encode()).hexdigest()),
        b"promptrail feedback token v1",
        hashlib.sha256,
    ).digest()
    return hmac.new(secret, signed.encode(), hashlib.sha256).digest()


def parts(token: str) -> tuple[str, str, dict[str, Any]]:
    signed, mac = token.split(".")
    assert signed.startswith("pft_")
    return signed, mac, json.loads(unb64(signed[4:]))


@pytest.fixture
def keyed(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The key comes from the environment, as without init()."""
    promptrail.shutdown()
    monkeypatch.setenv("PROMPTRAIL_API_KEY", KEY)
    yield
    promptrail.shutdown()


def test_token_is_the_shared_format(keyed: None) -> None:
    before = int(time.time())
    token = promptrail.feedback_token("thumbs", request_id="req_1", ttl_seconds=60)

    signed, mac, payload = parts(token)
    assert "=" not in token
    assert list(payload) == ["v", "k", "r", "t", "n", "d", "c", "e", "i"]
    assert payload["v"] == 1
    assert payload["k"] == "key_" + hashlib.sha256(KEY.encode()).hexdigest()[:12]
    assert (payload["r"], payload["t"], payload["n"]) == ("req_1", None, "thumbs")
    assert payload["d"] is None and payload["c"] is None
    assert before + 60 <= payload["e"] <= int(time.time()) + 60
    assert re.fullmatch(r"score_[0-9a-f]{32}", payload["i"])
    # Compact JSON, in that order: the body is exactly what json.dumps gives.
    assert unb64(signed[4:]) == json.dumps(payload, separators=(",", ":")).encode()
    assert unb64(mac) == spec_mac(KEY, signed)


def test_each_token_has_its_own_score_id_and_optional_type(keyed: None) -> None:
    trace = "ab" * 16
    first = promptrail.feedback_token(
        "mood", trace_id=trace, data_type="categorical", categories=["happy", "sad"]
    )
    second = promptrail.feedback_token("mood", trace_id=trace)

    one, two = parts(first)[2], parts(second)[2]
    assert one["i"] != two["i"]
    assert (one["r"], one["t"], one["d"], one["c"]) == (
        None,
        trace,
        "categorical",
        ["happy", "sad"],
    )


def test_init_key_wins_over_the_environment(keyed: None) -> None:
    promptrail.init(api_key="pr-from-init", base_url="http://127.0.0.1:9")
    signed, mac, payload = parts(promptrail.feedback_token("thumbs", request_id="req_1"))

    assert payload["k"] == "key_" + hashlib.sha256(b"pr-from-init").hexdigest()[:12]
    assert unb64(mac) == spec_mac("pr-from-init", signed)


def test_inside_observe_the_current_trace_is_the_default(keyed: None) -> None:
    @promptrail.observe
    def answer() -> tuple[str | None, str]:
        return promptrail.current_trace_id(), promptrail.feedback_token("thumbs")

    trace_id, token = answer()

    assert trace_id is not None
    assert parts(token)[2]["t"] == trace_id


@pytest.mark.parametrize(
    ("arguments", "mistake"),
    [
        ({}, "exactly one of request_id and trace_id"),
        ({"request_id": "req_1", "trace_id": "ab" * 16}, "exactly one"),
        ({"trace_id": "AB" * 16}, "32 lowercase hex"),
        ({"request_id": "req_1", "ttl_seconds": 0}, "ttl_seconds"),
        ({"request_id": "req_1", "ttl_seconds": 2_592_001}, "ttl_seconds"),
        ({"request_id": "req_1", "data_type": "stars"}, "data_type"),
        ({"request_id": "req_1", "categories": []}, "categories"),
    ],
)
def test_bad_arguments_raise(keyed: None, arguments: dict[str, Any], mistake: str) -> None:
    with pytest.raises(ValueError, match=mistake):
        promptrail.feedback_token("thumbs", **arguments)


def test_no_key_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    promptrail.shutdown()
    monkeypatch.delenv("PROMPTRAIL_API_KEY", raising=False)

    with pytest.raises(ValueError, match="no API key"):
        promptrail.feedback_token("thumbs", request_id="req_1")


@pytest.fixture
def collector_key(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Tokens signed with the live collector's default key, from the environment."""
    promptrail.shutdown()
    monkeypatch.setenv("PROMPTRAIL_API_KEY", DEFAULT_KEY)
    yield
    promptrail.shutdown()


def test_a_live_collector_takes_the_sdk_token_from_a_browser(
    live_url: str, collector_key: None
) -> None:
    token = promptrail.feedback_token("thumbs", request_id="req_browser1", ttl_seconds=600)
    browser = {"Origin": "https://shop.example"}  # no key

    first = httpx.post(f"{live_url}/v1/feedback/{token}", json={"value": True}, headers=browser)
    again = httpx.post(
        f"{live_url}/v1/feedback/{token}",
        json={"value": False, "comment": "wrong", "correction": "Paris"},
        headers=browser,
    )

    assert first.status_code == again.status_code == 201, again.text
    assert first.headers["access-control-allow-origin"] == "*"
    vote = again.json()["data"]
    assert vote["id"] == parts(token)[2]["i"] == first.json()["data"]["id"]
    assert (vote["request_id"], vote["name"], vote["source"]) == (
        "req_browser1",
        "thumbs",
        "end_user",
    )
    assert (vote["value"], vote["correction"]) == (False, "Paris")
    stored = httpx.get(
        f"{live_url}/v1/scores", params={"request_id": "req_browser1"}, headers=DEFAULT_AUTH
    ).json()["data"]
    assert [(s["id"], s["value"]) for s in stored] == [(vote["id"], False)]  # replaced, not added


def test_a_live_collector_refuses_an_altered_or_expired_sdk_token(
    live_url: str, collector_key: None
) -> None:
    token = promptrail.feedback_token("thumbs", request_id="req_a", ttl_seconds=600)
    signed, mac, payload = parts(token)
    widened = "pft_" + b64(
        json.dumps({**payload, "r": "req_other"}, separators=(",", ":")).encode()
    )
    expired = promptrail.feedback_token("thumbs", request_id="req_a", ttl_seconds=1)
    time.sleep(1.1)

    for bad in (f"{widened}.{mac}", f"{signed}.{b64(b'x' * 32)}", expired):
        answer = httpx.post(f"{live_url}/v1/feedback/{bad}", json={"value": True})
        assert answer.status_code == 401, answer.text
        assert answer.json()["error"]["code"] == "INVALID_FEEDBACK_TOKEN"


def test_the_collector_reads_every_field_the_sdk_signs_with_one_codec(keyed: None) -> None:
    # One codec (promptrail._feedback_token) for both sides: the collector's check takes the
    # scope the SDK signed, field for field, and a change to the format changes both at once.
    from promptrail import _feedback_token
    from promptrail.collector.services import feedback_tokens
    from promptrail.collector.services.keys import hash_key, key_id

    token = promptrail.feedback_token(
        "mood", trace_id="cd" * 16, data_type="categorical", categories=["happy", "sad"]
    )
    payload = parts(token)[2]

    digest, scope = feedback_tokens.verify(
        token, {key_id(hash_key(KEY)): hash_key(KEY)}.get, now=payload["e"] - 1
    )

    assert digest == hash_key(KEY)
    assert scope == _feedback_token.TokenScope(
        key_id=key_id(hash_key(KEY)),
        request_id=None,
        trace_id="cd" * 16,
        name="mood",
        data_type="categorical",
        categories=["happy", "sad"],
        expires=payload["e"],
        score_id=payload["i"],
    )
    assert feedback_tokens.TokenScope is _feedback_token.TokenScope
    assert feedback_tokens.mint(scope, digest) == token  # the same bytes, signed the same way


def test_the_codec_loads_no_other_part_of_the_sdk() -> None:
    # The collector imports it on every start: it must not pull in the capture machinery.
    code = (
        "import sys, promptrail._feedback_token; "
        "print(sorted(m for m in sys.modules if m.startswith(('promptrail', 'opentelemetry', "
        "'httpx', 'pydantic'))))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()

    assert loaded == "['promptrail', 'promptrail._feedback_token', 'promptrail._version']"
