"""The provider stubs speak the real wire formats: the official SDKs read them correctly,
whether the answer is the script's fixed reply or follows the request (:class:`Replies`).

The runs tests trust these stubs to stand in for OpenAI and Anthropic; these tests are why.
"""

from __future__ import annotations

import re

import anthropic
import openai
import pytest

from promptrail.testing import FIXED_REPLY, AnthropicStub, OpenAIStub, Replies

REPLY = "Ada says hello back, politely."


def openai_client(stub: OpenAIStub) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{stub.url}/v1", api_key="sk-sdk", max_retries=0)


def anthropic_client(stub: AnthropicStub) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=stub.url, api_key="sk-ant-sdk", max_retries=0)


def test_openai_sdk_reads_a_whole_answer_and_its_usage(openai_stub: OpenAIStub) -> None:
    openai_stub.script.reply = REPLY

    with openai_client(openai_stub) as client:
        completion = client.chat.completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": "Say hello to Ada."}],
            temperature=0.2,
        )

    assert completion.choices[0].message.content == REPLY
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage is not None
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (4, 5)
    assert completion.usage.total_tokens == 9
    call = openai_stub.calls[0]
    assert call.path == "/v1/chat/completions"
    assert call.headers["authorization"] == "Bearer sk-sdk"
    assert call.body["temperature"] == 0.2


def test_openai_sdk_reads_a_stream_piece_by_piece_with_usage_last(
    openai_stub: OpenAIStub,
) -> None:
    openai_stub.script.reply = REPLY

    with openai_client(openai_stub) as client:
        chunks = list(
            client.chat.completions.create(
                model="gpt-4o-mini",
                messages=[{"role": "user", "content": "Say hello to Ada."}],
                stream=True,
                stream_options={"include_usage": True},
            )
        )

    deltas = [c.choices[0].delta for c in chunks if c.choices]
    pieces = [d.content for d in deltas if d.content]
    assert "".join(pieces) == REPLY
    assert len(pieces) == 5
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].choices == []
    assert chunks[-1].usage is not None
    assert (chunks[-1].usage.prompt_tokens, chunks[-1].usage.completion_tokens) == (4, 5)
    assert openai_stub.streams_completed == 1


def test_openai_stream_has_no_usage_unless_asked(openai_stub: OpenAIStub) -> None:
    with openai_client(openai_stub) as client:
        chunks = list(
            client.chat.completions.create(
                model="gpt-4o-mini", messages=[{"role": "user", "content": "Hi"}], stream=True
            )
        )

    assert all(c.usage is None for c in chunks)


@pytest.mark.parametrize(
    ("status", "error"),
    [(500, openai.InternalServerError), (429, openai.RateLimitError)],
)
def test_openai_sdk_sees_scripted_error_statuses(
    openai_stub: OpenAIStub, status: int, error: type[openai.APIStatusError]
) -> None:
    openai_stub.script.failures = [status]

    with openai_client(openai_stub) as client, pytest.raises(error) as raised:
        client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "Hi"}]
        )

    assert raised.value.status_code == status
    assert "stub failed" in raised.value.message


def test_openai_sdk_raises_on_an_error_inside_a_stream(openai_stub: OpenAIStub) -> None:
    openai_stub.script.break_after_chunks = 2
    openai_stub.script.break_with = "error_event"

    with openai_client(openai_stub) as client, pytest.raises(openai.APIError, match="broke off"):
        list(
            client.chat.completions.create(
                model="gpt-4o-mini", messages=[{"role": "user", "content": "Hi"}], stream=True
            )
        )


def test_anthropic_sdk_reads_a_whole_answer_and_its_usage(anthropic_stub: AnthropicStub) -> None:
    anthropic_stub.script.reply = REPLY

    with anthropic_client(anthropic_stub) as client:
        message = client.messages.create(
            model="claude-haiku-4-5",
            max_tokens=200,
            system="Be kind.",
            messages=[{"role": "user", "content": "Say hello to Ada."}],
        )

    assert [b.text for b in message.content if b.type == "text"] == [REPLY]
    assert message.stop_reason == "end_turn"
    assert (message.usage.input_tokens, message.usage.output_tokens) == (6, 5)
    call = anthropic_stub.calls[0]
    assert call.path == "/v1/messages"
    # SDK 2.x sends the key as a bearer token; the Messages API also takes x-api-key.
    assert "sk-ant-sdk" in call.headers.get("authorization", call.headers.get("x-api-key", ""))
    assert call.headers["anthropic-version"]
    assert call.body["system"] == "Be kind."


def test_anthropic_sdk_reads_a_stream_piece_by_piece_with_usage(
    anthropic_stub: AnthropicStub,
) -> None:
    anthropic_stub.script.reply = REPLY

    with (
        anthropic_client(anthropic_stub) as client,
        client.messages.stream(
            model="claude-haiku-4-5",
            max_tokens=200,
            messages=[{"role": "user", "content": "Say hello to Ada."}],
        ) as stream,
    ):
        pieces = list(stream.text_stream)
        final = stream.get_final_message()

    assert "".join(pieces) == REPLY
    assert len(pieces) == 5
    assert final.stop_reason == "end_turn"
    assert (final.usage.input_tokens, final.usage.output_tokens) == (4, 5)
    assert anthropic_stub.streams_completed == 1


def test_anthropic_sdk_sees_scripted_errors_and_stream_error_events(
    anthropic_stub: AnthropicStub,
) -> None:
    anthropic_stub.script.failures = [529]
    anthropic_stub.script.break_after_chunks = 1
    anthropic_stub.script.break_with = "error_event"
    request = {
        "model": "claude-haiku-4-5",
        "max_tokens": 100,
        "messages": [{"role": "user", "content": "Hi"}],
    }

    with anthropic_client(anthropic_stub) as client:
        with pytest.raises(anthropic.APIStatusError) as raised:
            client.messages.create(**request)  # type: ignore[call-overload]
        with pytest.raises(anthropic.APIError, match="Overloaded"):
            list(client.messages.create(**request, stream=True))  # type: ignore[call-overload]

    assert raised.value.status_code == 529


def test_anthropic_stub_refuses_what_the_real_api_refuses(anthropic_stub: AnthropicStub) -> None:
    with (
        anthropic_client(anthropic_stub) as client,
        pytest.raises(anthropic.BadRequestError, match="system parameter"),
    ):
        client.messages.create(
            model="claude-haiku-4-5",
            max_tokens=100,
            messages=[{"role": "system", "content": "Be kind."}],
        )


# -- answers that follow the request (Replies: what promptrail stub-provider answers with) ------

RULES = Replies.from_json(
    [
        {"match": "PASSWORD", "reply": "Use the reset link on the sign-in page."},
        {"regex": r"^Translate\b", "reply": "Bonjour."},
    ]
)


def test_openai_sdk_reads_echoed_answers_whole_and_streamed(openai_stub: OpenAIStub) -> None:
    openai_stub.script.replies = Replies()
    asked = "Say   hello\nto Ada."

    with openai_client(openai_stub) as client:
        whole = client.chat.completions.create(
            model="gpt-4o-mini",
            messages=[
                {"role": "system", "content": "Be kind."},
                {"role": "user", "content": "An earlier question."},
                {"role": "assistant", "content": "An earlier answer."},
                {"role": "user", "content": asked},
            ],
        )
        other = client.chat.completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": [{"type": "text", "text": "Say bye."}]}],
        )
        chunks = list(
            client.chat.completions.create(
                model="gpt-4o-mini",
                messages=[{"role": "user", "content": asked}],
                stream=True,
                stream_options={"include_usage": True},
            )
        )

    echoed = "Echo: Say hello to Ada."
    assert whole.choices[0].message.content == echoed
    assert whole.choices[0].finish_reason == "stop"
    assert whole.usage is not None and whole.usage.completion_tokens == 5
    assert other.choices[0].message.content == "Echo: Say bye."
    pieces = [
        c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content
    ]
    assert "".join(pieces) == echoed
    assert len(pieces) == 5
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 5
    assert openai_stub.streams_completed == 1


def test_anthropic_sdk_reads_answers_by_rule_whole_and_streamed(
    anthropic_stub: AnthropicStub,
) -> None:
    anthropic_stub.script.replies = RULES

    def ask(text: str) -> str:
        message = client.messages.create(
            model="claude-haiku-4-5",
            max_tokens=200,
            system="Translate everything.",  # the system text is not the user's message
            messages=[{"role": "user", "content": [{"type": "text", "text": text}]}],
        )
        return "".join(b.text for b in message.content if b.type == "text")

    with anthropic_client(anthropic_stub) as client:
        answers = [ask("I forgot my password"), ask("Translate 'hello'"), ask("Why translate?")]
        with client.messages.stream(
            model="claude-haiku-4-5",
            max_tokens=200,
            messages=[{"role": "user", "content": "How do I change my Password?"}],
        ) as stream:
            pieces = list(stream.text_stream)
            final = stream.get_final_message()

    assert answers == [
        "Use the reset link on the sign-in page.",
        "Bonjour.",
        "Echo: Why translate?",  # no rule: the echo (the regex wants it first)
    ]
    assert "".join(pieces) == "Use the reset link on the sign-in page."
    assert len(pieces) == 8
    assert final.stop_reason == "end_turn"
    assert final.usage.output_tokens == 8
    assert anthropic_stub.streams_completed == 1


def test_without_the_echo_what_no_rule_answers_gets_the_fixed_reply(
    openai_stub: OpenAIStub,
) -> None:
    openai_stub.script.replies = Replies(RULES.rules, echo=False)

    with openai_client(openai_stub) as client:
        answers = [
            client.chat.completions.create(
                model="gpt-4o-mini", messages=[{"role": "user", "content": text}]
            )
            .choices[0]
            .message.content
            for text in ("my password?", "Hi there")
        ]
        # Nothing to echo (no user message): the fixed reply, even with the echo on.
        openai_stub.script.replies = Replies()
        system_only = client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "system", "content": "Be kind."}]
        )

    assert answers == ["Use the reset link on the sign-in page.", FIXED_REPLY]
    assert system_only.choices[0].message.content == FIXED_REPLY


def test_a_stub_answers_the_same_request_the_same_way() -> None:
    replies = Replies(RULES.rules)

    assert replies.reply("What is 2 + 2?", FIXED_REPLY) == "Echo: What is 2 + 2?"
    assert replies.reply("What is 2 + 2?", FIXED_REPLY) == replies.reply(
        "What is  2 + 2?", FIXED_REPLY
    )
    assert replies.reply("What is 3 + 3?", FIXED_REPLY) != replies.reply(
        "What is 2 + 2?", FIXED_REPLY
    )


@pytest.mark.parametrize(
    ("document", "said"),
    [
        ({"match": "a", "reply": "b"}, "a JSON list"),
        (["a"], "rule 1 is not an object"),
        ([{"match": "a", "reply": "b"}, {"match": "a"}], "rule 2 needs a reply"),
        ([{"match": "a", "reply": " "}], "rule 1 needs a reply"),
        ([{"match": "a", "answer": "b"}], "unknown keys ['answer']"),
        ([{"match": "a", "regex": "b", "reply": "c"}], "match and regex: one of them"),
        ([{"regex": "(", "reply": "c"}], "rule 1: the regex does not compile"),
        ([{"match": 3, "reply": "c"}], "rule 1: match is a non-empty string"),
    ],
)
def test_bad_replies_are_refused_naming_the_rule(document: object, said: str) -> None:
    with pytest.raises(ValueError, match=re.escape(said)):
        Replies.from_json(document)
