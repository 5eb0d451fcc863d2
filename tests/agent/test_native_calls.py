"""The execution call asked natively: offered under names the APIs accept, turned back
into the execution document, validated and re-asked like any other answer (through the
real OpenAI-compatible provider and a model server on loopback)."""

from __future__ import annotations

import json
from typing import Any

from bot.llm.base import FunctionCall, Message
from bot.llm.documents import ask_phase
from bot.llm.offers import native_offer, safe_name
from bot.llm.openai import OpenAICompatibleLLM
from bot.tools.registry import Tool
from tests.llm.local_server import ModelServer, Queue
from tests.llm.payloads import chat_completion, tool_call_completion

MESSAGES = [Message("system", "You execute."), Message("user", "Search the docs")]
SCHEMA = {"type": "object", "required": ["query"], "properties": {"query": {"type": "string"}}}


async def _handler(arguments: dict[str, Any]) -> Any:
    raise AssertionError("not called")


def tool(name: str) -> Tool:
    return Tool(name, f"the {name} tool", SCHEMA, _handler)


def test_names_the_apis_refuse_get_an_alias_that_maps_back() -> None:
    assert safe_name("write_file", 0) == "write_file"
    assert safe_name("docs.search", 1) == "t1_docs_search"
    assert len(safe_name("x" * 80, 2)) == 64
    offer = native_offer("task_3", [tool("write_file"), tool("docs.search")])
    assert [f.name for f in offer.functions] == ["write_file", "t1_docs_search"]
    assert offer.functions[1].parameters == SCHEMA
    assert offer.functions[1].description == "the docs.search tool"
    document = offer.document(FunctionCall("t1_docs_search", '{"query": "tools"}'), " Looking. ")
    assert document == {
        "phase": "execution",
        "current_task": "task_3",
        "function_call": {"name": "docs.search", "arguments": {"query": "tools"}},
        "comment": "Looking.",
    }


def test_broken_arguments_are_repaired_and_empty_ones_are_an_empty_object() -> None:
    offer = native_offer("task_1", [tool("search")])
    broken = offer.document(FunctionCall("search", '{"query": "tools"'), "")
    assert broken["function_call"]["arguments"] == {"query": "tools"}
    assert offer.document(FunctionCall("search", ""), "")["function_call"]["arguments"] == {}
    # no object at all: kept as it came, so validation says what is wrong
    assert (
        offer.document(FunctionCall("search", "[1, 2]"), "")["function_call"]["arguments"]
        == "[1, 2]"
    )


async def test_a_native_call_is_the_execution_document() -> None:
    answer = tool_call_completion("t0_docs_search", '{"query": "tools"}', cached=512)
    with ModelServer(Queue((200, answer))).running() as server:
        llm = OpenAICompatibleLLM(base_url=server.url, model="m", probe=False)
        offer = native_offer("task_1", [tool("docs.search")])
        result = await ask_phase(llm, "execution", MESSAGES, max_tokens=300, native=offer)
        await llm.aclose()
    assert result.calls == 1 and result.data is not None
    assert result.data["function_call"] == {"name": "docs.search", "arguments": {"query": "tools"}}
    assert json.loads(result.raw) == result.data
    assert result.usage.cached_tokens == 512
    [sent] = server.bodies()
    assert sent["tools"][0]["function"]["name"] == "t0_docs_search"


async def test_an_unusable_native_call_is_re_asked_with_the_errors() -> None:
    answers = Queue(
        (200, tool_call_completion("search", "[1, 2]")),
        (200, tool_call_completion("search", '{"query": "tools"}')),
    )
    with ModelServer(answers).running() as server:
        llm = OpenAICompatibleLLM(base_url=server.url, model="m", probe=False)
        offer = native_offer("task_1", [tool("search")])
        result = await ask_phase(llm, "execution", MESSAGES, max_tokens=300, native=offer)
        await llm.aclose()
    assert result.calls == 2 and result.data is not None
    assert result.data["function_call"]["arguments"] == {"query": "tools"}
    _, second = server.bodies()
    assert "tools" in second  # still offered natively
    reask = second["messages"]
    assert json.loads(reask[2]["content"])["function_call"]["arguments"] == "[1, 2]"
    assert "function_call.arguments" in reask[3]["content"]


async def test_a_text_answer_to_a_native_offer_is_read_then_re_asked_without_functions() -> None:
    """Some servers (Ollama) ignore tool_choice: a text answer is read as the document, and
    when it is not one the re-ask asks for the document the usual way."""
    doc = {
        "phase": "execution",
        "current_task": "task_1",
        "function_call": {"name": "search", "arguments": {"query": "tools"}},
        "comment": "",
    }
    answers = Queue(
        (200, chat_completion("I would search the docs.")), (200, chat_completion(json.dumps(doc)))
    )
    with ModelServer(answers).running() as server:
        llm = OpenAICompatibleLLM(base_url=server.url, model="m", probe=False)
        offer = native_offer("task_1", [tool("search")])
        result = await ask_phase(llm, "execution", MESSAGES, max_tokens=300, native=offer)
        await llm.aclose()
    assert (result.calls, result.data) == (2, doc)
    first, second = server.bodies()
    assert "tools" in first
    assert "tools" not in second and second["response_format"]["type"] == "json_schema"
