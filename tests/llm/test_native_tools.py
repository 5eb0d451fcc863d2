"""Native tool calling and prompt caching through the real HTTP client and a local
server on loopback, with the providers' documented request and response shapes."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from bot.llm.anthropic import AnthropicLLM
from bot.llm.base import (
    FunctionCall,
    FunctionSpec,
    LLMBadRequest,
    LLMRequest,
    Message,
    NativeTools,
    Usage,
)
from bot.llm.openai import OpenAICompatibleLLM
from tests.llm.local_server import ModelServer, Queue
from tests.llm.payloads import (
    anthropic_error,
    anthropic_message,
    cached_usage,
    chat_completion,
    openai_error,
    tool_call_completion,
    tool_use,
)

Sleep = Callable[[float], Awaitable[None]]
WRITE = FunctionSpec(
    "write_file",
    "Write a file of the workspace",
    {
        "type": "object",
        "required": ["path", "content"],
        "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
    },
)
READ = FunctionSpec(
    "read_file",
    "Read a file of the workspace",
    {"type": "object", "required": ["path"], "properties": {"path": {"type": "string"}}},
)
SCHEMA = {"type": "object", "required": ["phase"], "properties": {"phase": {"const": "execution"}}}
DOC = '{"phase": "execution"}'
ARGS = '{"path": "b.txt", "content": "B\\n"}'


def request(*functions: FunctionSpec, system: bool = True) -> LLMRequest:
    messages = (Message("system", "You execute."),) if system else ()
    return LLMRequest(
        "execution",
        (*messages, Message("user", "Write b.txt")),
        SCHEMA,
        max_tokens=500,
        temperature=0.1,
        functions=functions,
    )


def openai(server: ModelServer, sleep: Sleep, native: NativeTools = "auto") -> OpenAICompatibleLLM:
    return OpenAICompatibleLLM(
        base_url=server.url + "/v1",
        model="gpt-4.1",
        sleep=sleep,
        native_tools=native,
        probe=False,  # about native calls; tests/llm/test_dialect.py probes
    )


def anthropic(server: ModelServer, sleep: Sleep, **kwargs: Any) -> AnthropicLLM:
    return AnthropicLLM(base_url=server.url, model="claude-sonnet-4-5", sleep=sleep, **kwargs)


# --- OpenAI-compatible ---------------------------------------------------------------------


async def test_openai_offers_the_function_and_reads_the_call(sleep: Sleep) -> None:
    with ModelServer(
        Queue((200, tool_call_completion("write_file", ARGS, cached=1920)))
    ).running() as server:
        llm = openai(server, sleep)
        response = await llm.complete(request(WRITE))
        await llm.aclose()
    assert response.function_call == FunctionCall("write_file", ARGS)
    assert response.text == ""
    # prompt_tokens includes the cached ones; they are reported apart
    assert response.usage == Usage(2006, 300, cached_tokens=1920)
    [sent] = server.requests
    assert sent.path == "/v1/chat/completions"
    assert sent.body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "write_file",
                "description": "Write a file of the workspace",
                "parameters": WRITE.parameters,
            },
        }
    ]
    # one function: it is named; the call is the answer, so no response format
    assert sent.body["tool_choice"] == {"type": "function", "function": {"name": "write_file"}}
    assert "response_format" not in sent.body
    assert sent.body["messages"][0] == {"role": "system", "content": "You execute."}


async def test_openai_several_functions_require_a_call_of_one(sleep: Sleep) -> None:
    with ModelServer(
        Queue((200, tool_call_completion("read_file", '{"path": "a"}')))
    ).running() as server:
        llm = openai(server, sleep)
        response = await llm.complete(request(READ, WRITE))
        await llm.aclose()
    assert response.function_call == FunctionCall("read_file", '{"path": "a"}')
    assert server.bodies()[0]["tool_choice"] == "required"
    assert [t["function"]["name"] for t in server.bodies()[0]["tools"]] == [
        "read_file",
        "write_file",
    ]


async def test_openai_call_of_a_function_not_offered_is_no_call(sleep: Sleep) -> None:
    answer = tool_call_completion("delete_repo", "{}", content=DOC)
    with ModelServer(Queue((200, answer))).running() as server:
        llm = openai(server, sleep)
        response = await llm.complete(request(WRITE))
        await llm.aclose()
    assert (response.function_call, response.text) == (None, DOC)


# What servers answer when they cannot take tools: Ollama for a model without tool support,
# vLLM without its tool parser, a FastAPI-based proxy whose request model has no tools (500).
OLLAMA_NO_TOOLS = {"error": "registry.ollama.ai/library/gemma2:2b does not support tools"}
VLLM_NO_PARSER = openai_error(
    '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set',
    type_="BadRequestError",
)
PROXY_500 = {
    "object": "error",
    "message": "1 validation error for ChatCompletionRequest\ntools\n  Extra inputs are not "
    "permitted [type=extra_forbidden]",
    "type": "BadRequestError",
    "code": 500,
}


@pytest.mark.parametrize(
    ("code", "refusal"), [(400, OLLAMA_NO_TOOLS), (400, VLLM_NO_PARSER), (500, PROXY_500)]
)
async def test_openai_auto_falls_back_to_the_json_document_and_remembers(
    sleep: Sleep, waits: list[float], code: int, refusal: Any
) -> None:
    answers = Queue((code, refusal), (200, chat_completion(DOC)), (200, chat_completion(DOC)))
    with ModelServer(answers).running() as server:
        llm = openai(server, sleep)
        first = await llm.complete(request(WRITE))
        second = await llm.complete(request(WRITE))
        await llm.aclose()
    assert (first.function_call, first.text, first.mode) == (None, DOC, "json_schema")
    assert second.text == DOC and waits == []  # a refusal, not an outage: no backoff
    refused, fallback, later = server.bodies()
    assert "tools" in refused
    for body in (fallback, later):  # the JSON document, asked the usual way
        assert "tools" not in body and "tool_choice" not in body
        assert body["response_format"]["type"] == "json_schema"


async def test_openai_on_never_falls_back(sleep: Sleep) -> None:
    with ModelServer(Queue((400, OLLAMA_NO_TOOLS))).running() as server:
        llm = openai(server, sleep, native="on")
        with pytest.raises(LLMBadRequest, match="does not support tools"):
            await llm.complete(request(WRITE))
        await llm.aclose()
    assert len(server.requests) == 1


async def test_openai_off_never_offers_tools(sleep: Sleep) -> None:
    with ModelServer(Queue((200, chat_completion(DOC)))).running() as server:
        llm = openai(server, sleep, native="off")
        response = await llm.complete(request(WRITE))
        await llm.aclose()
    assert response.text == DOC
    assert "tools" not in server.bodies()[0]


async def test_openai_other_refusals_of_a_tools_request_are_not_blamed_on_tools(
    sleep: Sleep,
) -> None:
    """A refusal that does not name tools changes what it names (the length field)."""
    newer = openai_error(
        "Unsupported parameter: 'max_tokens' is not supported with this model. "
        "Use 'max_completion_tokens' instead.",
        param="max_tokens",
    )
    answers = Queue((400, newer), (200, tool_call_completion("write_file", ARGS)))
    with ModelServer(answers).running() as server:
        llm = openai(server, sleep)
        response = await llm.complete(request(WRITE))
        await llm.aclose()
    assert response.function_call == FunctionCall("write_file", ARGS)
    assert "tools" in server.bodies()[1] and "max_completion_tokens" in server.bodies()[1]


# --- Anthropic -----------------------------------------------------------------------------


async def test_anthropic_offers_the_tools_and_reads_tool_use(sleep: Sleep) -> None:
    answer = anthropic_message(
        [
            {"type": "text", "text": "Writing b.txt."},
            tool_use("write_file", {"path": "b.txt", "content": "B\n"}),
        ]
    )
    cached_usage(answer, read=1800, written=0, uncached=300)
    with ModelServer(Queue((200, answer))).running() as server:
        llm = anthropic(server, sleep)
        response = await llm.complete(request(READ, WRITE))
        await llm.aclose()
    assert response.function_call is not None
    assert response.function_call.name == "write_file"
    assert json.loads(response.function_call.arguments) == {"path": "b.txt", "content": "B\n"}
    assert response.text == "Writing b.txt."
    # the prompt is input_tokens + the cache's parts; the cached part is reported apart
    assert response.usage == Usage(2100, 503, cached_tokens=1800, cache_write_tokens=0)
    [sent] = server.requests
    assert sent.path == "/v1/messages"
    assert sent.body["tools"] == [
        {"name": "read_file", "description": READ.description, "input_schema": READ.parameters},
        {"name": "write_file", "description": WRITE.description, "input_schema": WRITE.parameters},
    ]
    assert sent.body["tool_choice"] == {"type": "any"}
    # one cache breakpoint, at the end of the stable prefix (tools, then system)
    assert sent.body["system"] == [
        {"type": "text", "text": "You execute.", "cache_control": {"type": "ephemeral"}}
    ]


async def test_anthropic_without_system_prompt_marks_the_last_tool(sleep: Sleep) -> None:
    answer = cached_usage(anthropic_message([tool_use("write_file", {})]), read=0, written=1500)
    with ModelServer(Queue((200, answer))).running() as server:
        llm = anthropic(server, sleep)
        response = await llm.complete(request(WRITE, system=False))
        await llm.aclose()
    assert response.usage == Usage(1800, 503, cached_tokens=0, cache_write_tokens=1500)
    [tool] = server.bodies()[0]["tools"]
    assert tool["cache_control"] == {"type": "ephemeral"}
    assert server.bodies()[0]["tool_choice"] == {"type": "tool", "name": "write_file"}


async def test_anthropic_refused_tools_fall_back_to_the_phase_document(sleep: Sleep) -> None:
    refused = anthropic_error("invalid_request_error", "tools.0.input_schema: unsupported")
    doc = anthropic_message([tool_use("execution", {"phase": "execution"})])
    with ModelServer(Queue((400, refused), (200, doc))).running() as server:
        llm = anthropic(server, sleep)
        response = await llm.complete(request(WRITE))
        await llm.aclose()
    assert (response.function_call, json.loads(response.text)) == (None, {"phase": "execution"})
    assert [t["name"] for t in server.bodies()[1]["tools"]] == ["execution"]


async def test_anthropic_refused_cache_control_is_dropped_and_remembered(sleep: Sleep) -> None:
    refused = anthropic_error(
        "invalid_request_error", "system.0.cache_control: Extra inputs are not permitted"
    )
    doc = anthropic_message([tool_use("execution", {"phase": "execution"})])
    answers = Queue((400, refused), (200, doc), (200, doc))
    with ModelServer(answers).running() as server:
        llm = anthropic(server, sleep, native_tools="off")
        await llm.complete(request(WRITE))
        await llm.complete(request(WRITE))
        await llm.aclose()
    assert "cache_control" in json.dumps(server.bodies()[0])
    for body in server.bodies()[1:]:
        assert body["system"] == "You execute." and "cache_control" not in json.dumps(body)


async def test_anthropic_prompt_cache_off(sleep: Sleep) -> None:
    doc = anthropic_message([tool_use("execution", {"phase": "execution"})])
    with ModelServer(Queue((200, doc))).running() as server:
        llm = anthropic(server, sleep, prompt_cache=False)
        response = await llm.complete(request())
        await llm.aclose()
    assert response.usage == Usage(2095, 503)
    assert "cache_control" not in json.dumps(server.bodies()[0])
