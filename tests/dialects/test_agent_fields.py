"""The fields the coding agents send (issue 37), each through the official SDK, translated and native.

Per field: what the backend received (the mock records each body: the chat request of a
translated one, the dialect body of a native one) and what the client got, whole and
streamed, next to a control request without the field. Refusals assert status, reason and
that the backend never saw the request, beside a control the same plan admits.

Messages (``anthropic``): a ``system`` turn inside ``messages`` (folded into the one leading
system message for a chat backend; as sent natively; refused on a plan with
``allow_system_prompt: false``), ``output_config.effort`` (chat's ``reasoning_effort``) and
``output_config.format`` (chat's ``response_format``, under the plan's structured-output
policy), ``context_management`` (forwarded natively, left out for chat), a tool's
``eager_input_streaming``. Responses (``openai``): ``client_metadata``, ``namespace`` tools
(top level and in an ``additional_tools`` item; flattened to ``NAMESPACE__TOOL`` for chat,
the call named back; entitled as ``NAMESPACE.TOOL``; two tools flattening to one chat name
refused naming both), ``custom`` tools (a one-string function for chat, the call back as a
``custom_tool_call``).
"""

from __future__ import annotations

import json
from typing import Any

import anthropic
import openai
import pytest
import pytest_asyncio
import yaml

from tests.support import MockBackend, RunningGateway, gateway_in_process, mock_backend

# one gateway per upstream kind for the module (start-up and shutdown were two thirds of the
# time with one per test); each test starts from a reset mock and closes its SDK clients
pytestmark = pytest.mark.asyncio(loop_scope="module")

MODEL = "small-chat"
MODES = {"translated": ("chat",), "native": ("chat", "responses", "messages")}
WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
SLEEP = {"type": "object", "properties": {"duration_ms": {"type": "integer"}}, "required": ["duration_ms"]}
QUESTION = "What is the weather in Paris today?"
TEXT = "tok " * 16          # the mock's answer: 16 tokens under the bound
STREAM = [False, True]


def config(mock_url: str, tmp_path: Any, dialects: tuple[str, ...]) -> str:
    """Plans: ``agents`` (the tools of these tests, globs included, and structured output),
    ``plain`` (the same without the ``structured_output`` feature), ``nosystem``
    (``allow_system_prompt: false``)."""
    agents = {"models": [MODEL], "max_output_tokens": 512, "tokens_per_minute": 1_000_000,
              "allow_tools": ["get_weather", "clock.*", "apply_patch", "clock__sleep"],
              "features": ["structured_output"]}
    raw = {
        "upstreams": {"mock": {"base_url": mock_url, "forward_headers": ["x-mock-*"], "read_timeout_s": 10,
                               "dialects": list(dialects)}},
        "models": {MODEL: {"upstream": "mock", "tokenizer": "tiktoken:o200k_base", "context_window": 32768}},
        "plans": {"agents": agents, "plain": {**agents, "features": []},
                  "nosystem": {**agents, "allow_system_prompt": False}},
        "tenants": {name: {"plan": name} for name in ("agents", "plain", "nosystem")},
        "keystore": {"url": f"sqlite:///{tmp_path}/keys.db"},
        "logging": {"decisions": str(tmp_path / "decisions.jsonl")},
    }
    return yaml.safe_dump(raw)


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=sorted(MODES))
async def gateways(request, tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp(f"agent-fields-{request.param}")
    async with mock_backend() as backend:
        async with gateway_in_process(config(backend.url, tmp_path, MODES[request.param]),
                                      tmp_path / "decisions.jsonl") as gw:
            gw.extra["keys"] = {name: await gw.new_key(name) for name in ("agents", "plain", "nosystem")}
            yield request.param, backend, gw


@pytest_asyncio.fixture(loop_scope="module")
async def stack(gateways):
    """The module's gateway for one upstream kind, its mock's counters and last body reset."""
    mode, backend, gw = gateways
    await backend.client.post("/_mock/reset")
    gw.extra["clients"] = []
    yield gateways
    for client in gw.extra.pop("clients"):
        await client.close()


def oai(gw: RunningGateway, tenant: str = "agents", **headers: str) -> openai.AsyncOpenAI:
    client = openai.AsyncOpenAI(base_url=gw.url + "/v1", api_key=gw.extra["keys"][tenant], max_retries=0,
                                default_headers=headers)
    gw.extra["clients"].append(client)     # closed by ``stack``, in this loop
    return client


def ant(gw: RunningGateway, tenant: str = "agents", **headers: str) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(base_url=gw.url, api_key=gw.extra["keys"][tenant], max_retries=0,
                                    default_headers=headers)


async def sent(backend: MockBackend) -> dict[str, Any]:
    body: dict[str, Any] = await backend.last_body()
    return body


async def paths(backend: MockBackend) -> dict[str, int]:
    by_path: dict[str, int] = (await backend.stats())["by_path"]
    return by_path


def work_path(mode: str, dialect: str) -> str:
    return "/v1/chat/completions" if mode == "translated" else f"/v1/{dialect}"


async def message_turn(sdk: Any, stream: bool, **kwargs: Any) -> Any:
    """A Messages turn, whole or streamed (the SDK's accumulator builds the final message);
    ``sdk`` is ``client.messages`` or ``client.beta.messages``."""
    if not stream:
        return await sdk.create(**kwargs)
    async with sdk.stream(**kwargs) as events:
        kinds = [event.type async for event in events]
        final = await events.get_final_message()
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    return final


async def response_turn(sdk: openai.AsyncOpenAI, stream: bool, **kwargs: Any) -> tuple[Any, list[Any]]:
    """A Responses turn, whole or streamed (with the SDK's accumulator), and its events."""
    if not stream:
        return await sdk.responses.create(**kwargs), []
    async with sdk.responses.stream(**kwargs) as events:
        seen = [event async for event in events]
        final = await events.get_final_response()
    assert seen[0].type == "response.created" and seen[-1].type == "response.completed"
    return final, seen


# -- Messages: a system turn inside messages ---------------------------------------------------


@pytest.mark.parametrize("stream", STREAM)
async def test_a_system_turn_inside_messages(stack, stream):
    """Claude Code sends a ``system`` turn inside ``messages``: a chat backend receives it
    folded into the one leading system message (after ``system``, in order: nothing
    system-role after the first message), a native one as sent; the client's answer is the
    same as for the control, which sends the same texts in ``system``."""
    mode, backend, gw = stack
    turns = [{"role": "user", "content": "hello there"},
             {"role": "system", "content": [{"type": "text", "text": "Answer in French."}]},
             {"role": "user", "content": "and again"}]
    async with ant(gw) as sdk:
        control = await message_turn(sdk.messages, stream, model=MODEL, max_tokens=40, system="Be brief.",
                                     messages=[turns[0], {"role": "user", "content": "and again"}])
        control_sent = await sent(backend)
        answer = await message_turn(sdk.messages, stream, model=MODEL, max_tokens=40, system="Be brief.",
                                    messages=turns)
    body = await sent(backend)
    if mode == "translated":
        assert body["messages"][0] == {"role": "system", "content": [{"type": "text", "text": "Be brief."},
                                                                     {"type": "text", "text": "Answer in French."}]}
        assert [m["role"] for m in body["messages"]] == ["system", "user", "user"]
        assert body["messages"][1:] == control_sent["messages"][1:]
        assert control_sent["messages"][0] == {"role": "system", "content": "Be brief."}
    else:
        assert body["system"] == "Be brief." and body["messages"] == turns
    assert answer.content[0].text == control.content[0].text == TEXT
    assert answer.stop_reason == "end_turn" and answer.usage.output_tokens == 16
    assert await paths(backend) == {work_path(mode, "messages"): 2}


async def test_a_system_turn_is_refused_on_a_plan_without_system_prompts(stack):
    """``allow_system_prompt: false``: a system turn inside ``messages`` is a system prompt
    (``system_prompt_not_allowed``, the backend never asked), whole and streamed; the same
    conversation without it gets through."""
    mode, backend, gw = stack
    plain = [{"role": "user", "content": "hello there"}]
    system_turn = [*plain, {"role": "system", "content": "Answer in French."}, {"role": "user", "content": "go"}]
    async with ant(gw, "nosystem") as sdk:
        for stream in STREAM:
            with pytest.raises(anthropic.PermissionDeniedError) as caught:
                await message_turn(sdk.messages, stream, model=MODEL, max_tokens=8, messages=system_turn)
            assert caught.value.status_code == 403
            assert caught.value.body["error"]["code"] == "system_prompt_not_allowed"
            assert caught.value.response.headers["x-tokenward-reason"] == "system_prompt_not_allowed"
        assert await backend.requests() == 0
        answer = await sdk.messages.create(model=MODEL, max_tokens=8, messages=plain)
    assert answer.content[0].text == "tok " * 8 and await backend.requests() == 1


# -- Messages: output_config -------------------------------------------------------------------


@pytest.mark.parametrize("stream", STREAM)
async def test_output_config_effort(stack, stream):
    """``output_config.effort``: chat's ``reasoning_effort`` (``xhigh`` and ``max`` ask for the
    most chat offers, ``high``); natively, as sent. The control sends none and the backend
    gets none."""
    mode, backend, gw = stack
    asked = [{"role": "user", "content": "hello there"}]
    async with ant(gw) as sdk:
        control = await message_turn(sdk.messages, stream, model=MODEL, max_tokens=40, messages=asked)
        assert "reasoning_effort" not in await sent(backend) and "output_config" not in await sent(backend)
        for effort, chat in (("low", "low"), ("medium", "medium"), ("high", "high"), ("xhigh", "high"),
                             ("max", "high")):
            answer = await message_turn(sdk.messages, stream, model=MODEL, max_tokens=40, messages=asked,
                                        output_config={"effort": effort})
            body = await sent(backend)
            if mode == "translated":
                assert body["reasoning_effort"] == chat and "output_config" not in body
            else:
                assert body["output_config"] == {"effort": effort} and "reasoning_effort" not in body
            assert answer.content[0].text == control.content[0].text == TEXT
    assert await paths(backend) == {work_path(mode, "messages"): 6}


REPLY = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"],
         "additionalProperties": False}
COSTLY = {"type": "object", "properties": {"answer": {"type": "string", "pattern": "(a+)+$"}}}


@pytest.mark.parametrize("stream", STREAM)
async def test_output_config_format(stack, stream):
    """``output_config.format``: chat's ``response_format`` (``json_schema``, the schema byte
    for byte), natively as sent; structured output under the plan's policy: refused on the
    plan without ``structured_output`` as a chat request with the same ``response_format``
    is, and a schema whose regex the gateway cannot show is cheap is
    ``structured_output_denied`` on any plan without ``guided_regex``."""
    mode, backend, gw = stack
    asked = [{"role": "user", "content": "hello there"}]
    fmt = {"type": "json_schema", "schema": REPLY}
    async with ant(gw) as sdk:
        answer = await message_turn(sdk.messages, stream, model=MODEL, max_tokens=40, messages=asked,
                                    output_config={"format": fmt})
    body = await sent(backend)
    if mode == "translated":
        assert body["response_format"] == {"type": "json_schema", "json_schema": {"name": "output", "schema": REPLY}}
        assert "output_config" not in body
    else:
        assert body["output_config"] == {"format": fmt} and "response_format" not in body
    assert answer.content[0].text == TEXT
    before = await backend.requests()
    # the chat twin on the plan without structured output: the refusal the dialect must match
    with pytest.raises(openai.APIStatusError) as twin:
        await oai(gw, "plain").chat.completions.create(
            model=MODEL, max_tokens=8, messages=asked,
            response_format={"type": "json_schema", "json_schema": {"name": "output", "schema": REPLY}})
    expected = twin.value.response.headers["x-tokenward-reason"]
    # the entitlement stage answers first: the feature is the plan's to grant (403)
    assert (expected, twin.value.status_code) == ("feature_not_entitled", 403)
    for tenant, schema, code, status, param in (
            ("plain", REPLY, expected, 403, "output_config.format"),
            ("agents", COSTLY, "structured_output_denied", 400, "output_config.format.schema")):
        async with ant(gw, tenant) as sdk:
            with pytest.raises(anthropic.APIStatusError) as caught:
                await message_turn(sdk.messages, stream, model=MODEL, max_tokens=8, messages=asked,
                                   output_config={"format": {"type": "json_schema", "schema": schema}})
        assert caught.value.status_code == status and caught.value.body["error"]["code"] == code
        assert caught.value.body["error"]["param"] == param
    assert await backend.requests() == before
    async with ant(gw, "plain") as sdk:     # the control: the same plan, no format
        assert (await sdk.messages.create(model=MODEL, max_tokens=8, messages=asked)).content[0].text == "tok " * 8
    assert await backend.requests() == before + 1


# -- Messages: context_management, eager_input_streaming ---------------------------------------

CLEAR_THINKING = {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]}


@pytest.mark.parametrize("stream", STREAM)
async def test_context_management(stack, stream):
    """Claude Code's default ``context_management`` (the SDK's beta param): forwarded to a
    native upstream as sent; a chat backend receives exactly the control's request."""
    mode, backend, gw = stack
    asked = [{"role": "user", "content": "hello there"}]
    async with ant(gw) as sdk:
        control = await message_turn(sdk.beta.messages, stream, model=MODEL, max_tokens=40, messages=asked)
        control_sent = await sent(backend)
        answer = await message_turn(sdk.beta.messages, stream, model=MODEL, max_tokens=40, messages=asked,
                                    context_management=CLEAR_THINKING)
    body = await sent(backend)
    if mode == "translated":
        assert body == control_sent and "context_management" not in json.dumps(body)
    else:
        assert body == {**control_sent, "context_management": CLEAR_THINKING}
    assert answer.content[0].text == control.content[0].text == TEXT
    assert await paths(backend) == {work_path(mode, "messages"): 2}


@pytest.mark.parametrize("stream", STREAM)
async def test_eager_input_streaming_on_a_tool(stack, stream):
    """``eager_input_streaming`` on a Messages tool (the Vercel AI SDK sends it): accepted; a
    chat backend receives the control's function, a native one the tool as sent; the model's
    call reaches the client as a ``tool_use``."""
    mode, backend, gw = stack
    asked = [{"role": "user", "content": QUESTION}]
    tool = {"name": "get_weather", "description": "Weather now", "input_schema": WEATHER}
    async with ant(gw, **{"x-mock-tool-call": "get_weather"}) as sdk:
        control = await message_turn(sdk.messages, stream, model=MODEL, max_tokens=200, messages=asked, tools=[tool])
        control_sent = await sent(backend)
        eager = {**tool, "eager_input_streaming": True}
        answer = await message_turn(sdk.messages, stream, model=MODEL, max_tokens=200, messages=asked, tools=[eager])
    body = await sent(backend)
    if mode == "translated":
        assert body == control_sent
        assert body["tools"] == [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER,
                                                                   "description": "Weather now"}}]
    else:
        assert body["tools"] == [eager] and control_sent["tools"] == [tool]
    (use,) = [block for block in answer.content if block.type == "tool_use"]
    assert use.name == "get_weather" and use.input == {"echo": QUESTION} and answer.stop_reason == "tool_use"
    assert [b.type for b in control.content] == [b.type for b in answer.content]


# -- Responses: client_metadata ----------------------------------------------------------------

# what Codex sends there: a JSON document as a string value
CODEX_METADATA = {"x-codex-turn-metadata": json.dumps({"turn_id": "t-1", "sandbox": "seatbelt", "cwd": "/w"})}


@pytest.mark.parametrize("stream", STREAM)
async def test_client_metadata(stack, stream):
    """``client_metadata`` (Codex sends it on every request; not in the SDK's types, so
    ``extra_body``): accepted; a chat backend receives the control's request, a native
    one the field as sent."""
    mode, backend, gw = stack
    sdk = oai(gw)
    control, _ = await response_turn(sdk, stream, model=MODEL, input="hello there", max_output_tokens=40)
    control_sent = await sent(backend)
    answer, _ = await response_turn(sdk, stream, model=MODEL, input="hello there", max_output_tokens=40,
                                    extra_body={"client_metadata": CODEX_METADATA})
    body = await sent(backend)
    if mode == "translated":
        assert body == control_sent and "client_metadata" not in body
    else:
        assert body == {**control_sent, "client_metadata": CODEX_METADATA}
    assert answer.output_text == control.output_text == TEXT and answer.status == "completed"
    assert await paths(backend) == {work_path(mode, "responses"): 2}


# -- Responses: namespace tools ----------------------------------------------------------------

CLOCK = {"type": "namespace", "name": "clock", "description": "Time tools",
         "tools": [{"type": "function", "name": "sleep", "description": "Sleep a while", "parameters": SLEEP},
                   {"type": "function", "name": "now", "parameters": {"type": "object", "properties": {}}}]}
OPS = {"type": "namespace", "name": "ops", "description": "Machine tools",
       "tools": [{"type": "function", "name": "rm", "parameters": {"type": "object", "properties": {}}}]}
SLEEP_ARGS = json.dumps({"duration_ms": 1})


def with_additional(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The input as Codex sends it: its tools in an ``additional_tools`` item, then the turn."""
    return [{"type": "additional_tools", "role": "developer", "tools": tools},
            {"role": "user", "content": "sleep a millisecond"}]


@pytest.mark.parametrize("where", ["tools", "additional_tools"])
@pytest.mark.parametrize("stream", STREAM)
async def test_a_namespace_tool(stack, stream, where):
    """A ``namespace`` tool, top level or in an ``additional_tools`` item: a chat backend
    receives its members as ``NAMESPACE__TOOL`` functions; the model's call of one reaches
    the client as a ``function_call`` with ``name`` and ``namespace``; a native upstream
    receives the tool as sent and its own call passes through. Then the result goes back as
    an agent loop sends it (the call, its output)."""
    mode, backend, gw = stack
    call_name = "clock__sleep" if mode == "translated" else "clock.sleep"    # as the backend names it
    sdk = oai(gw, **{"x-mock-tool-call": call_name, "x-mock-tool-args": SLEEP_ARGS})
    asked = [{"role": "user", "content": "sleep a millisecond"}] if where == "tools" else with_additional([CLOCK])
    tools = {"tools": [CLOCK]} if where == "tools" else {}
    answer, events = await response_turn(sdk, stream, model=MODEL, max_output_tokens=100, input=asked, **tools)
    body = await sent(backend)
    if mode == "translated":
        assert body["tools"] == [
            {"type": "function", "function": {"name": "clock__sleep", "description": "Sleep a while",
                                              "parameters": SLEEP}},
            {"type": "function", "function": {"name": "clock__now", "parameters": {"type": "object",
                                                                                   "properties": {}}}}]
        assert body["messages"] == [{"role": "user", "content": "sleep a millisecond"}]
    elif where == "tools":
        assert body["tools"] == [CLOCK]
    else:
        assert body["input"] == with_additional([CLOCK]) and "tools" not in body
    (call,) = answer.output
    assert call.type == "function_call" and (call.name, call.namespace) == ("sleep", "clock")
    assert call.arguments == SLEEP_ARGS and answer.status == "completed"
    if stream:
        added = [e.item for e in events if e.type == "response.output_item.added"]
        assert [(i.type, i.name, i.namespace) for i in added] == [("function_call", "sleep", "clock")]
        deltas = "".join(e.delta for e in events if e.type == "response.function_call_arguments.delta")
        assert deltas == SLEEP_ARGS
    result = {"type": "function_call_output", "call_id": call.call_id, "output": "Sleep completed"}
    again = await oai(gw).responses.create(model=MODEL, max_output_tokens=100, input=[*asked, call, result],
                                           **tools)
    body = await sent(backend)
    if mode == "translated":
        assert body["messages"][-2]["tool_calls"] == [{"id": call.call_id, "type": "function", "function": {
            "name": "clock__sleep", "arguments": SLEEP_ARGS}}]
        assert body["messages"][-1] == {"role": "tool", "tool_call_id": call.call_id, "content": "Sleep completed"}
    else:
        assert body["input"][-1] == result and body["input"][-2]["namespace"] == "clock"
    assert again.output_text == TEXT
    assert await paths(backend) == {work_path(mode, "responses"): 2}


@pytest.mark.parametrize("where", ["tools", "additional_tools"])
async def test_namespace_members_are_entitled_by_their_dotted_name(stack, where):
    """``allow_tools: ["clock.*"]`` admits every member of ``clock``; a member of ``ops``
    (``ops.rm``) is ``tools_not_entitled``, the param naming it in the client's request,
    whole and streamed, the backend never asked."""
    mode, backend, gw = stack
    sdk = oai(gw)

    def place(tools: list[dict[str, Any]]) -> dict[str, Any]:
        return {"tools": tools, "input": "hello"} if where == "tools" else {"input": with_additional(tools)}

    for stream in STREAM:
        with pytest.raises(openai.PermissionDeniedError) as caught:
            await response_turn(sdk, stream, model=MODEL, max_output_tokens=8, **place([CLOCK, OPS]))
        assert caught.value.status_code == 403 and caught.value.code == "tools_not_entitled"
        assert caught.value.param == ("tools[1].tools[0].name" if where == "tools"
                                      else "input[0].tools[1].tools[0].name")
        assert "ops.rm" in caught.value.message
    assert await backend.requests() == 0
    answer, _ = await response_turn(sdk, False, model=MODEL, max_output_tokens=8, **place([CLOCK]))
    assert answer.output_text == "tok " * 8 and await backend.requests() == 1


async def test_two_tools_that_flatten_to_one_chat_name_are_refused_naming_both(stack):
    """A function ``clock__sleep`` beside the namespace ``clock`` with ``sleep``: a chat
    backend would see both as ``clock__sleep``, so the request is refused (``invalid_field``,
    both named), translated and native alike (the parse is one); each alone gets through."""
    mode, backend, gw = stack
    sdk = oai(gw)
    flat = {"type": "function", "name": "clock__sleep", "parameters": SLEEP}
    for stream in STREAM:
        with pytest.raises(openai.BadRequestError) as caught:
            await response_turn(sdk, stream, model=MODEL, max_output_tokens=8, input="hello", tools=[flat, CLOCK])
        assert caught.value.code == "invalid_field" and caught.value.param == "tools"
        assert "`clock__sleep`" in caught.value.message and "`clock.sleep`" in caught.value.message
    with pytest.raises(openai.BadRequestError) as caught:      # one at the top, one in additional_tools
        await sdk.responses.create(model=MODEL, max_output_tokens=8, tools=[flat], input=with_additional([CLOCK]))
    assert "`clock__sleep`" in caught.value.message and "`clock.sleep`" in caught.value.message
    assert await backend.requests() == 0
    for tools in ([flat], [CLOCK]):
        answer = await sdk.responses.create(model=MODEL, max_output_tokens=8, input="hello", tools=tools)
        assert answer.output_text == "tok " * 8
    assert await backend.requests() == 2


# -- Responses: custom tools -------------------------------------------------------------------

GRAMMAR = 'start: "*** Begin Patch" /(.|\\n)*/ "*** End Patch"'
APPLY_PATCH = {"type": "custom", "name": "apply_patch", "description": "Apply a patch to files",
               "format": {"type": "grammar", "syntax": "lark", "definition": GRAMMAR}}
PATCH = "*** Begin Patch\n*** Add File: note.txt\n+hi\n*** End Patch"


@pytest.mark.parametrize("stream", STREAM)
async def test_a_custom_tool(stack, stream):
    """A ``custom`` tool (free-form input under a grammar): a chat backend receives a
    function of one string argument ``input`` with the grammar in its description, and the
    model's call reaches the client as a ``custom_tool_call`` with that ``input``, whole and
    streamed; the call and its output go back to chat as a tool call and a tool message. A
    native upstream receives the tool as sent."""
    mode, backend, gw = stack
    args = json.dumps({"input": PATCH})
    sdk = oai(gw, **{"x-mock-tool-call": "apply_patch", "x-mock-tool-args": args})
    if mode == "native":      # the mock writes function calls only: here it answers text
        answer, _ = await response_turn(oai(gw), stream, model=MODEL, max_output_tokens=100, input="patch it",
                                        tools=[APPLY_PATCH])
        assert (await sent(backend))["tools"] == [APPLY_PATCH] and answer.output_text == TEXT
        return
    answer, events = await response_turn(sdk, stream, model=MODEL, max_output_tokens=200, input="patch it",
                                         tools=[APPLY_PATCH])
    (function,) = (await sent(backend))["tools"]
    assert function["function"]["name"] == "apply_patch"
    assert function["function"]["parameters"] == {"type": "object", "properties": {"input": {"type": "string"}},
                                                  "required": ["input"]}
    description = function["function"]["description"]
    assert description.startswith("Apply a patch to files") and GRAMMAR in description and "lark" in description
    (call,) = answer.output
    assert call.type == "custom_tool_call" and call.name == "apply_patch" and call.input == PATCH
    if stream:
        kinds = [e.type for e in events]
        assert "response.custom_tool_call_input.done" in kinds and "response.function_call_arguments.delta" not in kinds
        pieces = "".join(e.delta for e in events if e.type == "response.custom_tool_call_input.delta")
        assert pieces == PATCH
    output = {"type": "custom_tool_call_output", "call_id": call.call_id, "output": "Done"}
    again = await oai(gw).responses.create(model=MODEL, max_output_tokens=100, tools=[APPLY_PATCH],
                                           input=[{"role": "user", "content": "patch it"}, call, output])
    messages = (await sent(backend))["messages"]
    back = messages[1]["tool_calls"][0]["function"]
    assert back["name"] == "apply_patch" and json.loads(back["arguments"]) == {"input": PATCH}
    assert messages[2] == {"role": "tool", "tool_call_id": call.call_id, "content": "Done"}
    assert again.output_text == TEXT
