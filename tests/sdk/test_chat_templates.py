"""Chat templates in the SDK (issue 48 point 4): create a chat prompt, fetch its template,
compile it, and hand it to the real openai and anthropic SDKs (against the wire stubs); a
live collector throughout, and a cold start that serves the copy on disk."""

from __future__ import annotations

import copy
from typing import Any

import anthropic
import openai
import pytest

import promptrail
from promptrail.collector.app import create_app
from promptrail.collector.config import Settings
from promptrail.testing import AnthropicStub, OpenAIStub, free_port, serve
from tests.capture import Records
from tests.keys import DEFAULT_KEY

MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": "You help with {{product}}.{{#formal}} Be formal.{{/formal}}"},
    {"type": "placeholder", "name": "history"},
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "Question: {{question}}"},
            {"type": "image_url", "image_url": {"url": "https://img.example/{{shot}}.png"}},
        ],
    },
]
HISTORY = [
    {"role": "user", "content": "Hi {{product}}"},  # a value is never rendered again
    {"role": "assistant", "content": "Hello!"},
]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The weather in a city",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    }
]
ANSWER = {
    "type": "json_schema",
    "json_schema": {
        "name": "forecast",
        "schema": {
            "type": "object",
            "properties": {"summary": {"type": "string"}},
            "required": ["summary"],
        },
    },
}
SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "days": {"type": "integer"},
        "metric": {"type": "boolean"},
    },
    "required": ["city", "days"],
}


def support(client: promptrail.Client, **fields: Any) -> promptrail.Prompt:
    """Create the chat prompt most tests here use, labeled production."""
    fields.setdefault("messages", MESSAGES)
    fields.setdefault("model", "gpt-4o-mini")
    return client.prompts.create("support", labels=["production"], **fields)


def weather(client: promptrail.Client, model: str, **fields: Any) -> promptrail.PromptTemplate:
    """Create a chat prompt with typed variables, tools and a JSON-schema answer; its template."""
    client.prompts.create(
        "weather",
        messages=[
            {"role": "system", "content": "You forecast the weather."},
            {"role": "developer", "content": "Units: {{#metric}}metric{{/metric}}."},
            {"type": "placeholder", "name": "history"},
            {"role": "user", "content": "{{city}} for {{days}} days?"},
        ],
        model=model,
        tools=TOOLS,
        variables_schema=SCHEMA,
        parameters={"temperature": 0.2, "max_tokens": 300},
        **fields,
    )
    return client.prompts.template("weather")


def test_a_chat_prompt_made_through_the_sdk_compiles_with_variables_and_placeholders(
    client: promptrail.Client,
) -> None:
    created = support(client, tool_choice="auto", config={"team": "support"})
    tpl = client.prompts.template("support", label="production")

    compiled = tpl.compile(
        {"history": HISTORY}, product="promptrail", question="How?", shot="a1", formal=True
    )

    assert created.type == "chat"
    assert created.messages == MESSAGES
    assert (tpl.type, tpl.is_chat, tpl.content, tpl.version) == ("chat", True, None, 1)
    assert tpl.message_templates == MESSAGES
    assert (tpl.placeholders, tpl.tool_choice, tpl.config) == (
        ["history"],
        "auto",
        {"team": "support"},
    )
    assert tpl.variable_names == ["product", "formal", "question", "shot"]
    assert compiled == [
        {"role": "system", "content": "You help with promptrail. Be formal."},
        *HISTORY,
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Question: How?"},
                {"type": "image_url", "image_url": {"url": "https://img.example/a1.png"}},
            ],
        },
    ]
    # A section's false value hides it; the template itself is left as fetched.
    assert tpl.compile({"history": []}, product="p", question="q", shot="s", formal=False)[0] == {
        "role": "system",
        "content": "You help with p.",
    }
    assert tpl.message_templates == MESSAGES


def test_an_update_through_the_sdk_makes_a_chat_version_the_template_serves(
    client: promptrail.Client,
) -> None:
    support(client)

    client.prompts.update(
        "support",
        messages=[{"role": "user", "content": "Hello {{name}}"}],
        tools=TOOLS,
        response_format=ANSWER,
        labels=["production"],
    )
    tpl = client.prompts.template("support", label="production")

    assert tpl.version == 2
    assert (tpl.tools, tpl.response_format, tpl.placeholders) == (TOOLS, ANSWER, [])
    assert tpl.compile(name="Ada") == [{"role": "user", "content": "Hello Ada"}]
    # The older name for a call's messages works too, user_input appended as a run does.
    assert tpl.messages({"name": "Ada"}, user_input="hi")[-1] == {"role": "user", "content": "hi"}


@pytest.mark.anyio
async def test_the_async_client_creates_and_compiles_chat_prompts(
    aclient: promptrail.AsyncClient,
) -> None:
    created = await aclient.prompts.create(
        "support", messages=MESSAGES, model="claude-sonnet-4", tool_choice="required"
    )
    await aclient.prompts.update("support", messages=[{"role": "user", "content": "{{q}}"}])
    tpl = await aclient.prompts.template("support")

    assert (created.type, created.tool_choice) == ("chat", "required")
    assert (tpl.version, tpl.provider) == (2, "anthropic")
    assert tpl.compile(q="Why?") == [{"role": "user", "content": "Why?"}]


def test_missing_variables_and_placeholders_raise_naming_them_sorted(
    client: promptrail.Client,
) -> None:
    support(client)
    tpl = client.prompts.template("support")

    with pytest.raises(promptrail.TemplateError) as missing:
        tpl.compile(question="q")
    with pytest.raises(promptrail.TemplateError) as unfilled:
        tpl.openai_kwargs(product="p", question="q", shot="s", formal=False)

    # A section's name ({{#formal}}) is required too, of any type (no variables_schema here).
    assert missing.value.missing_variables == ["formal", "product", "shot"]
    assert missing.value.missing_placeholders == ["history"]
    assert missing.value.code == "INVALID_TEMPLATE"
    assert missing.value.details["missing_variables"] == ["formal", "product", "shot"]
    assert "formal, product, shot" in str(missing.value) and "history" in str(missing.value)
    assert isinstance(missing.value, promptrail.ValidationError)
    assert (unfilled.value.missing_variables, unfilled.value.missing_placeholders) == (
        [],
        ["history"],
    )


def test_a_value_of_the_wrong_type_raises_naming_the_variable(client: promptrail.Client) -> None:
    tpl = weather(client, "gpt-4o-mini")

    with pytest.raises(promptrail.TemplateError) as text_for_integer:
        tpl.compile({"history": []}, city="Paris", days="3")
    with pytest.raises(promptrail.TemplateError) as bool_for_integer:
        tpl.compile({"history": []}, city="Paris", days=True)
    with pytest.raises(promptrail.TemplateError) as history:
        tpl.compile({"history": "earlier"}, city="Paris", days=3)
    with pytest.raises(promptrail.TemplateError) as required:
        tpl.compile({"history": []}, metric=True)

    assert text_for_integer.value.field == "variables.days"
    assert text_for_integer.value.code == "VALIDATION_ERROR"
    assert "variables.days" in str(text_for_integer.value)
    assert bool_for_integer.value.details["field"] == "variables.days"
    assert history.value.field == "placeholders.history"
    assert required.value.missing_variables == ["city", "days"]
    # The optional boolean may be left out; given, it shows its section.
    assert tpl.compile({"history": []}, city="Oslo", days=2)[1]["content"] == "Units: ."
    assert tpl.compile({"history": []}, city="Oslo", days=2, metric=True)[2] == {
        "role": "user",
        "content": "Oslo for 2 days?",
    }


def test_a_text_prompts_template_still_renders_and_compiles_to_one_message(
    client: promptrail.Client,
) -> None:
    client.prompts.create("greet", "Say hello to {name}.", "gpt-4o-mini")
    tpl = client.prompts.template("greet")

    assert (tpl.type, tpl.is_chat, tpl.message_templates) == ("text", False, None)
    assert tpl.render(name="Ada") == "Say hello to Ada."
    assert tpl.compile(name="Ada") == [{"role": "user", "content": "Say hello to Ada."}]
    with pytest.raises(promptrail.TemplateError):
        tpl.compile()


def test_openai_kwargs_drive_the_openai_sdk(
    client: promptrail.Client, openai_stub: OpenAIStub
) -> None:
    tpl = weather(client, "gpt-4o-mini", tool_choice="auto", response_format=ANSWER)
    kwargs = tpl.openai_kwargs({"history": HISTORY}, city="Paris", days=3, metric=True)

    with openai.OpenAI(
        api_key="sk-test", base_url=f"{openai_stub.url}/v1", max_retries=0
    ) as provider:
        answer = provider.chat.completions.create(**kwargs)

    (call,) = openai_stub.calls
    assert answer.choices[0].message.content
    assert call.body["model"] == "gpt-4o-mini"
    assert call.body["messages"] == [
        {"role": "system", "content": "You forecast the weather."},
        {"role": "developer", "content": "Units: metric."},
        *HISTORY,
        {"role": "user", "content": "Paris for 3 days?"},
    ]
    assert call.body["tools"] == TOOLS
    assert call.body["tool_choice"] == "auto"
    assert call.body["response_format"] == ANSWER
    assert (call.body["temperature"], call.body["max_tokens"]) == (0.2, 300)


def test_anthropic_kwargs_drive_the_anthropic_sdk(
    client: promptrail.Client, anthropic_stub: AnthropicStub
) -> None:
    tpl = weather(client, "claude-sonnet-4", tool_choice="required", response_format=ANSWER)
    history = [
        {"role": "user", "content": "And Rome?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Rome"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "Sunny"},
    ]
    kwargs = tpl.anthropic_kwargs({"history": history}, city="Paris", days=3, metric=True)

    with anthropic.Anthropic(
        api_key="sk-ant-test", base_url=anthropic_stub.url, max_retries=0
    ) as provider:
        answer = provider.messages.create(**kwargs)

    (call,) = anthropic_stub.calls
    assert answer.content
    assert call.body["model"] == "claude-sonnet-4"
    assert call.body["system"] == "You forecast the weather.\n\nUnits: metric."
    assert call.body["messages"] == [
        {"role": "user", "content": "And Rome?"},
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "call_1",
                    "name": "get_weather",
                    "input": {"city": "Rome"},
                }
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "call_1", "content": "Sunny"}],
        },
        {"role": "user", "content": "Paris for 3 days?"},
    ]
    function = TOOLS[0]["function"]
    assert call.body["tools"] == [
        {
            "name": "get_weather",
            "description": function["description"],
            "input_schema": function["parameters"],
        },
        {
            "name": "forecast",
            "description": "Answer with this tool: its input is the answer.",
            "input_schema": ANSWER["json_schema"]["schema"],  # type: ignore[index]
        },
    ]
    # The JSON-schema answer is forced, over the prompt's own tool choice.
    assert call.body["tool_choice"] == {"type": "tool", "name": "forecast"}
    assert (call.body["temperature"], call.body["max_tokens"]) == (0.2, 300)


def test_tool_choice_maps_to_anthropics_and_max_tokens_defaults(
    client: promptrail.Client, anthropic_stub: AnthropicStub
) -> None:
    client.prompts.create(
        "pick",
        messages=[{"role": "user", "content": "{{q}}"}],
        model="claude-sonnet-4",
        tools=TOOLS,
    )
    choices: dict[str, Any] = {
        "auto": {"type": "auto"},
        "none": {"type": "none"},
        "required": {"type": "any"},
    }
    named = {"type": "function", "function": {"name": "get_weather"}}
    seen = []
    for choice in [*choices, named]:
        client.prompts.update("pick", tool_choice=copy.deepcopy(choice))
        seen.append(client.prompts.template("pick").anthropic_kwargs(q="Rain?"))

    with anthropic.Anthropic(
        api_key="sk-ant-test", base_url=anthropic_stub.url, max_retries=0
    ) as provider:
        provider.messages.create(**seen[-1])

    assert [kwargs["tool_choice"] for kwargs in seen] == [
        *choices.values(),
        {"type": "tool", "name": "get_weather"},
    ]
    assert all("system" not in kwargs for kwargs in seen)
    assert anthropic_stub.calls[0].body["max_tokens"] == 1024
    assert anthropic_stub.calls[0].body["tool_choice"] == {"type": "tool", "name": "get_weather"}


def test_a_chat_template_is_served_from_disk_when_the_collector_is_down(
    settings: Settings,
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with serve(create_app(settings), port=port), promptrail.Client(DEFAULT_KEY, url) as client:
        support(client, tools=TOOLS, response_format=ANSWER, config={"team": "support"})
        fetched = client.prompts.template("support", label="production")

    # A new client (a process started during the outage) has nothing in memory.
    with promptrail.Client(DEFAULT_KEY, url, max_retries=0) as cold:
        served = cold.prompts.template("support", label="production")

    assert served.stale is True
    assert served.model_copy(update={"stale": False}) == fetched
    assert (served.message_templates, served.tools, served.config) == (
        MESSAGES,
        TOOLS,
        {"team": "support"},
    )
    assert served.compile({"history": []}, product="p", question="q", shot="s", formal=0)[0] == {
        "role": "system",
        "content": "You help with p.",
    }
    assert (
        served.openai_kwargs({"history": []}, product="p", question="q", shot="s", formal=0)[
            "response_format"
        ]
        == ANSWER
    )


def test_calls_made_with_compiled_messages_are_logged_with_the_prompt_version(
    capture: str, records: Records, openai_stub: OpenAIStub, anthropic_stub: AnthropicStub
) -> None:
    # promptrail.instrument() patches both SDKs (the capture fixture); nothing else is passed.
    with promptrail.Client(DEFAULT_KEY, capture) as rest:
        tpl = weather(rest, "gpt-4o-mini")
        rest.prompts.update("weather", model="claude-sonnet-4")
        claude = rest.prompts.template("weather")
    values = {"city": "Paris", "days": 3, "metric": True}

    with openai.OpenAI(api_key="sk-test", base_url=f"{openai_stub.url}/v1") as provider:
        provider.chat.completions.create(**tpl.openai_kwargs({"history": HISTORY}, **values))
    with anthropic.Anthropic(api_key="sk-ant-test", base_url=anthropic_stub.url) as provider:
        provider.messages.create(**claude.anthropic_kwargs({"history": []}, **values))

    by_provider = {r["provider"]: r for r in records(expected=2)}
    assert (by_provider["openai"]["prompt_name"], by_provider["openai"]["version"]) == (
        "weather",
        1,
    )
    assert (by_provider["anthropic"]["prompt_name"], by_provider["anthropic"]["version"]) == (
        "weather",
        2,
    )
    assert by_provider["openai"]["input_variables"] == values
    assert by_provider["anthropic"]["input_variables"] == values
