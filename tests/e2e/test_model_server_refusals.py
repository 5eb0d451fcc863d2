"""A model server that refuses the request's JSON schema is not down: the bot falls back
to the next structured-output mode at once and finishes the task, without a pause.
When no mode works, the task ends needing a person, with the server's own words.

Through the real httpx client against a local HTTP server playing an OpenAI-compatible
endpoint (``tests/llm/model_server.py``), with the bot's real store and the FakeForge.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from bot.llm.dialect import Dialect
from bot.llm.openai import OpenAICompatibleLLM
from bot.storage.base import TaskState
from tests.agent import docs
from tests.e2e.support import (
    gh_comment,
    github_repo,
    of_kind,
    settle,
    two_writes,
)
from tests.harness import Harness
from tests.llm.model_server import ModelServer, Reply, Sent, model_server
from tests.llm.payloads import chat_completion, model_list_owned, openai_error
from tests.tools.conftest import Remote

pytestmark = pytest.mark.sandbox

API_KEY = "sk-proj-e2e-refusal-0123456789abcdef"

# The three ways servers say "not this request" to response_format json_schema.
REFUSALS = {
    # OpenAI (and servers copying its error object): 400 naming the parameter
    "400 with an error object": Reply(
        400,
        openai_error(
            "Invalid parameter: 'response_format' of type 'json_schema' is not supported "
            "with this model.",
            param="response_format",
        ),
    ),
    # a FastAPI server's request validation (pydantic's error list)
    "422": Reply(
        422,
        {
            "detail": [
                {
                    "type": "literal_error",
                    "loc": ["body", "response_format", "type"],
                    "msg": "Input should be 'text' or 'json_object'",
                    "input": "json_schema",
                }
            ]
        },
    ),
    # vLLM's / LiteLLM's answer: a 500 whose message is a validation error
    "500 with a validation message": Reply(
        500,
        {
            "object": "error",
            "message": "1 validation error for ChatCompletionRequest\nresponse_format.type\n"
            "  Input should be 'text' or 'json_object' [type=literal_error, "
            "input_value='json_schema']",
            "type": "BadRequestError",
            "param": None,
            "code": 500,
        },
    ),
}


def serving(documents: list[Any], refusal: Reply) -> Callable[[Sent], Reply]:
    """An endpoint that refuses JSON schemas as ``refusal`` says and answers everything
    else: the probe with {"ok": true}, the task's calls with ``documents`` in order."""
    queue = list(documents)

    def answer(sent: Sent) -> Reply:
        if sent.method == "GET":  # a server that says nothing of its kind
            return Reply(200, model_list_owned("system", "qwen2.5-coder"))
        if sent.path != "/v1/chat/completions":
            return Reply(404, {"error": "not found"})
        if sent.body.get("response_format", {}).get("type") == "json_schema":
            return refusal
        if sent.body["messages"][-1]["content"] == "Are you there?":
            return Reply(200, chat_completion('{"ok": true}'))
        return Reply(200, chat_completion(json.dumps(queue.pop(0))))

    return answer


def use_server(bot: Harness, server: ModelServer, waits: list[float]) -> OpenAICompatibleLLM:
    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    llm = OpenAICompatibleLLM(
        base_url=server.url + "/v1",
        model="qwen2.5-coder",
        api_key=API_KEY,
        sleep=sleep,
        dialects=bot.store,
    )
    bot.runtime.llm = llm
    return llm


@pytest.mark.parametrize("shape", list(REFUSALS))
async def test_a_refused_json_schema_falls_back_and_the_task_finishes(
    tmp_path: Path, remote: Remote, shape: str
) -> None:
    waits: list[float] = []
    script = serving([*two_writes(), docs.completion()], REFUSALS[shape])
    with model_server(script) as server:
        async with Harness(tmp_path) as bot:
            llm = use_server(bot, server, waits)
            try:
                issue = github_repo(bot, remote)
                await bot.send_github("issue_comment", gh_comment("/agent run"))
                await settle(bot)
                [task] = await bot.tasks()
                kept = await bot.store.get_llm_dialect(server.url + "/v1", "qwen2.5-coder")
            finally:
                await llm.aclose()

    assert task.state is TaskState.DONE, task.error
    assert issue.labels == ["coding agent done"]
    assert of_kind(issue, "paused") == [] and of_kind(issue, "end-paused") == []
    assert waits == []  # nothing was retried as if the server were down
    assert llm.dialect is Dialect.JSON_OBJECT
    assert kept is not None and kept[0] == "json_object"
    posts = server.of("/v1/chat/completions")
    refused = [p for p in posts if p.body.get("response_format", {}).get("type") == "json_schema"]
    assert len(refused) == 1  # refused once, while probing; never asked again
    # every later call is in JSON mode, but an execution call offered as native tools
    asked = [p.body.get("response_format") for p in posts[1:] if "tools" not in p.body]
    assert len(asked) >= 3 and asked == [{"type": "json_object"}] * len(asked)


async def test_a_server_refusing_every_mode_ends_the_task_needing_a_person(
    tmp_path: Path, remote: Remote
) -> None:
    words = f"response_format is not supported for key {API_KEY}"
    refusal = Reply(400, openai_error(words, param="response_format"))

    def refuses(sent: Sent) -> Reply:
        if sent.method == "GET":
            return Reply(200, model_list_owned("system", "qwen2.5-coder"))
        return refusal

    waits: list[float] = []
    with model_server(refuses) as server:
        overrides = {"llm": {"api_key": SecretStr(API_KEY)}}
        async with Harness(tmp_path, overrides=overrides) as bot:
            llm = use_server(bot, server, waits)
            try:
                issue = github_repo(bot, remote)
                await bot.send_github("issue_comment", gh_comment("/agent run"))
                await settle(bot)
                [task] = await bot.tasks()
            finally:
                await llm.aclose()

    assert task.state is TaskState.NEEDS_HUMAN
    assert issue.labels == ["coding agent help needed"]
    assert of_kind(issue, "paused") == [] and waits == []
    [closing] = of_kind(issue, "human_intervention") or of_kind(issue, "end-needs_human")
    assert "response_format is not supported for key" in closing  # the server's own words
    assert API_KEY not in closing  # redacted
    assert "pin llm.structured_output" in closing
    assert all(API_KEY not in body for body in (c.body for c in issue.comments))
