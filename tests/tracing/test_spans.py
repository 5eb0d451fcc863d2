"""The spans' own rules, one by one: a tool call's arguments redacted and cut, a failed model
call marked by its error's type (never its message), the agent's typed exits and a
cancellation not taken for failures, and a wait that lasts until the run ends."""

from __future__ import annotations

import asyncio

import pytest
from opentelemetry.trace import StatusCode

from bot import tracing
from bot.llm.base import LLMRequest, LLMResponse, LLMUnavailable, Message
from bot.llm.budget import Budget
from bot.llm.calls import PhaseCaller
from bot.llm.prompts import PromptLibrary
from bot.llm.scripted import ScriptedLLM
from bot.tools.registry import Tool, ToolRegistry, ToolResult
from tests.tracing.conftest import Spans

TOKEN = "ghp_" + "A" * 36
KNOWN = "a-configured-secret-value"


async def test_a_tool_call_shows_its_arguments_redacted_and_cut(spans: Spans) -> None:
    async def write(arguments: dict[str, object]) -> ToolResult:
        return ToolResult.success("written")

    schema = {"type": "object", "properties": {"path": {"type": "string"},
                                               "content": {"type": "string"}}}  # fmt: skip
    registry = ToolRegistry([Tool("write_file", "Write a file.", schema, write, writes=True)],
                            secrets=(KNOWN,))  # fmt: skip
    content = f"token={TOKEN}\npassword: {KNOWN}\n" + "x" * 5000
    result = await registry.call("write_file", {"path": "a.txt", "content": content}, timeout=5)
    assert result.ok
    [call] = spans.named("execute_tool write_file")
    shown = str((call.attributes or {})["gen_ai.tool.call.arguments"])
    assert TOKEN not in shown and KNOWN not in shown and "[REDACTED]" in shown
    assert '"path": "a.txt"' in shown and len(shown) < 1100
    assert (call.attributes or {})["bot.tool.outcome"] == "ok"
    refused = await registry.call("no_such_tool", {}, timeout=5)
    assert not refused.ok
    [unknown] = spans.named("execute_tool no_such_tool")
    assert (unknown.attributes or {})["bot.tool.outcome"] == "refused"
    assert unknown.status.status_code is StatusCode.ERROR


class Down:
    name = "openai"
    model = "gpt-test"
    base_url = "http://model.test:8000/v1"

    async def complete(self, request: LLMRequest) -> LLMResponse:
        raise LLMUnavailable(f"connection refused; key {TOKEN}")


async def test_a_failed_model_call_says_its_type_and_never_its_message(spans: Spans) -> None:
    class Journal:
        def redact(self, text: str) -> str:
            return text

        def conversation(self, entry: dict[str, object]) -> None:
            return None

        def error(self, category: str, message: str) -> None:
            return None

    budget = Budget(max_tokens_per_task=100_000, max_tokens_per_call=4000, total_timeout=60)
    caller = PhaseCaller(Down(), PromptLibrary(), budget, journal=Journal())
    with pytest.raises(LLMUnavailable):
        # each model call of the agent goes through this recorder (journal, metrics, span)
        await caller._model("summarise").complete(LLMRequest("summarise", (Message("user", "hi"),)))
    [chat] = spans.named("chat gpt-test")
    attributes = dict(chat.attributes or {})
    assert attributes["error.type"] == "LLMUnavailable"
    assert attributes["server.address"] == "model.test" and attributes["server.port"] == 8000
    assert chat.status.status_code is StatusCode.ERROR
    assert TOKEN not in "\n".join(spans.values()) and not chat.events


async def test_typed_exits_and_cancellations_are_not_failures(spans: Spans) -> None:
    class Exit(Exception):
        pass

    async def leaves() -> None:
        raise Exit

    with pytest.raises(Exit):
        await tracing.stage("plan", leaves(), Exit)
    [stage] = spans.named("stage plan")
    assert stage.status.status_code is not StatusCode.ERROR

    async def cancelled() -> None:
        with tracing.span("long"):
            await asyncio.sleep(10)

    task = asyncio.create_task(cancelled())
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    [long] = spans.named("long")
    assert (long.attributes or {})["bot.cancelled"] is True
    assert long.status.status_code is not StatusCode.ERROR


async def test_a_wait_lasts_until_the_run_ends(spans: Spans) -> None:
    with tracing.run("task run") as run:
        with tracing.span("stage execute"):
            tracing.waiting("plan", f"the plan (token {TOKEN})")
        assert spans.named("wait plan") == []  # still open: the run goes on
        await asyncio.sleep(0.01)
        assert run.recording
    [wait] = spans.named("wait plan")
    [ran] = spans.named("task run")
    assert wait.end_time is not None and ran.end_time is not None
    assert wait.end_time <= ran.end_time and wait.end_time - wait.start_time >= 10_000_000  # type: ignore[operator]
    assert spans.parent(wait).name == "stage execute"  # type: ignore[union-attr]
    assert TOKEN not in str((wait.attributes or {})["bot.wait.what"])


async def test_the_scripted_model_says_why_it_stopped() -> None:
    answer = await ScriptedLLM(["ok"]).complete(LLMRequest("summary", (Message("user", "hi"),)))
    assert answer.finish_reasons == ("stop",)
