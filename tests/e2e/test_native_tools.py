"""A labelled issue driven end to end by the real OpenAI-compatible provider against a
model server on loopback: the execution phase's call comes as a native tool call, or,
from a server that refuses tools, as the JSON execution document; either way the task
finishes with the same record."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bot.llm.openai import OpenAICompatibleLLM
from bot.storage.base import TaskState
from tests.agent import docs
from tests.e2e.support import GH_BRANCH, gh_labeled, github_repo, settle
from tests.harness import Harness
from tests.llm.local_server import ModelServer
from tests.llm.payloads import chat_completion, tool_call_completion
from tests.tools.conftest import Remote

pytestmark = pytest.mark.sandbox

B_ARGS = {"path": "b.txt", "content": "B\n"}
OLLAMA_NO_TOOLS = {"error": "registry.ollama.ai/library/gemma2:2b does not support tools"}


class Endpoint:
    """Answers by the document asked for; ``tools``: how to answer a request with tools."""

    def __init__(self, *, tools: bool) -> None:
        self.tools = tools
        first, execution = two_writes()
        self.documents: dict[str, Any] = {
            "planning": first,
            "execution": execution,
            "completion": docs.completion(),
        }

    def __call__(self, path: str, body: Any) -> tuple[int, Any]:
        if "tools" in body:
            if not self.tools:
                return 400, OLLAMA_NO_TOOLS
            [tool] = body["tools"]
            name = tool["function"]["name"]
            return 200, tool_call_completion(name, json.dumps(B_ARGS), cached=1024)
        return 200, chat_completion(json.dumps(self.documents[asked_for(body)]))


def two_writes() -> tuple[dict[str, Any], dict[str, Any]]:
    first = docs.action(
        "task_1", "write_file", arguments={"path": "a.txt", "content": "A\n"}, purpose="Write a"
    )
    second = docs.action("task_2", "write_file", purpose="Write b", dependencies=["task_1"])
    plan = docs.plan([first, second], dependencies={"task_2": ["task_1"]})
    return plan, docs.execution("task_2", "write_file", B_ARGS)


def asked_for(body: Any) -> str:
    """The document a request without tools asks for (its json_schema's name)."""
    return str(body.get("response_format", {}).get("json_schema", {}).get("name", ""))


def conversation(bot: Harness, task_id: str) -> list[dict[str, Any]]:
    path = bot.settings.data_dir / "runs" / task_id / "conversation.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.parametrize("tools", [True, False], ids=["native-call", "server-refuses-tools"])
async def test_the_execution_call_comes_natively_or_as_the_document(
    tmp_path: Path, remote: Remote, tools: bool
) -> None:
    with ModelServer(Endpoint(tools=tools)).running() as server:
        async with Harness(tmp_path) as bot:
            llm = OpenAICompatibleLLM(
                base_url=server.url + "/v1", model="qwen2.5-coder", probe=False
            )
            bot.runtime.llm = llm
            issue = github_repo(bot, remote)
            await bot.send_github("issues", gh_labeled())
            await settle(bot)
            [task] = await bot.tasks()
            entries = conversation(bot, task.id)
            checkpoint = await bot.store.load_checkpoint(task.id)
            await llm.aclose()

    assert task.state is TaskState.DONE
    assert remote.show(GH_BRANCH, "b.txt") == b"B\n"  # the call's arguments were used
    sent = server.bodies()
    execution = [b for b in sent if "tools" in b or asked_for(b) == "execution"]
    [entry] = [e for e in entries if e["phase"] == "execution"]
    assert checkpoint is not None
    # what is stored is the same record either way: the call of the execution document
    record = next(r for r in checkpoint["records"].values() if r["task_id"] == "task_2")
    assert (record["tool"], record["arguments"]) == ("write_file", B_ARGS)
    if tools:
        [asked] = execution
        assert asked["tools"][0]["function"]["name"] == "write_file"
        assert entry["function_call"] == {"name": "write_file", "arguments": json.dumps(B_ARGS)}
        # the provider's cached tokens are counted apart in the task's usage
        assert checkpoint["usage"]["cached_tokens"] == 1024
        assert "(1,024 cached)" in issue.comments[0].body
    else:
        refused, fallback = execution
        assert "tools" in refused and "tools" not in fallback
        assert "function_call" not in entry and json.loads(entry["answer"])["phase"] == "execution"
        assert "cached_tokens" not in checkpoint["usage"]
