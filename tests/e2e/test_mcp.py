"""The bot as an MCP server at /mcp, through the real app on a loopback port with the MCP
SDK's own client (streamable HTTP, ``ClientSession``): the token, the tools and their
schemas, each tool against the API's operations, and every refusal as a tool error."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import httpx2
import mcp_types
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from bot.config import McpServer
from bot.events import MessageKind
from bot.storage.base import TaskState
from bot.tools.mcp import McpToolset
from tests.agent import docs
from tests.e2e.support import (
    GH_REPO,
    gh_comment,
    github_repo,
    of_kind,
    served,
    settle,
)
from tests.e2e.test_api import AUTH, TOKEN, WITH_API
from tests.e2e.test_approval import NOTES, write_plan
from tests.harness import Harness
from tests.tools.conftest import Remote

pytestmark = pytest.mark.sandbox

ISSUE_URL = f"https://github.com/{GH_REPO}/issues/1"
TOOLS = {
    "list_tasks", "show_task", "read_report", "start_task", "approve", "reject", "stop",
    "pause", "resume", "pause_all", "resume_all", "answer", "open_ticket", "status",
}  # fmt: skip
# What the handshake asks for, as the SDK's client sends it.
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"},
    },
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@asynccontextmanager
async def mcp_client(base: str, token: str | None = TOKEN) -> AsyncIterator[ClientSession]:
    """The SDK's client, initialized, with the bearer token (``None``: without one)."""
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        streamable_http_client(f"{base}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def text(result: mcp_types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, mcp_types.TextContent))


async def call(session: ClientSession, tool: str, **arguments: Any) -> dict[str, Any]:
    """A tool's structured answer; the test fails on a tool error."""
    result = await session.call_tool(tool, arguments)
    assert not result.is_error, text(result)
    assert isinstance(result.structured_content, dict)
    assert json.loads(text(result)) == result.structured_content
    return result.structured_content


async def refused(session: ClientSession, tool: str, **arguments: Any) -> str:
    """A tool error's text."""
    result = await session.call_tool(tool, arguments)
    assert result.is_error, result
    return text(result)


async def test_without_a_token_configured_there_is_no_mcp(tmp_path: Path) -> None:
    async with Harness(tmp_path) as bot:
        answer = await bot.client.post("/mcp", json=INITIALIZE, headers={**AUTH, **MCP_HEADERS})
        assert answer.status_code == 404


async def test_every_request_needs_the_token_and_wrong_ones_count_with_the_apis(
    tmp_path: Path,
) -> None:
    overrides = {"server": {**WITH_API["server"], "auth_max_failures": 3}}
    async with (
        Harness(tmp_path, overrides=overrides) as bot,
        served(bot) as base,
        httpx.AsyncClient(base_url=base) as http,
    ):
        for auth in ({}, {"Authorization": "Bearer wrong"}):
            answer = await http.post("/mcp", json=INITIALIZE, headers={**MCP_HEADERS, **auth})
            assert answer.status_code == 401, auth
            assert answer.headers["www-authenticate"] == "Bearer"
            assert answer.json() == {"detail": "a valid bearer token is required"}
        # The SDK's client without the token gets no session.
        with pytest.raises(Exception):  # noqa: B017 (the SDK's error for a 401 varies)
            async with mcp_client(base, token=None):
                pass
        # Three wrong tokens from this address: the API refuses it too, for a while.
        throttled = await http.get("/api/tasks", headers=AUTH)
        assert throttled.status_code == 429 and "retry-after" in throttled.headers
        again = await http.post("/mcp", json=INITIALIZE, headers={**MCP_HEADERS, **AUTH})
        assert again.status_code == 429


async def test_the_tools_and_their_schemas(tmp_path: Path) -> None:
    async with (
        Harness(tmp_path, overrides=WITH_API) as bot,
        served(bot) as base,
        mcp_client(base) as session,
    ):
        listed = {tool.name: tool for tool in (await session.list_tools()).tools}
    assert set(listed) == TOOLS
    for tool in listed.values():
        assert tool.description and tool.input_schema["type"] == "object", tool.name
        assert tool.input_schema["additionalProperties"] is False, tool.name
    assert listed["show_task"].input_schema["required"] == ["task_id"]
    assert listed["show_task"].input_schema["properties"]["task_id"]["maxLength"] == 100
    assert listed["reject"].input_schema["required"] == ["task_id"]  # a reason is optional
    assert listed["reject"].input_schema["properties"]["reason"]["maxLength"] == 4000
    assert listed["start_task"].input_schema["required"] == ["issue_url"]
    assert listed["list_tasks"].input_schema["properties"]["limit"]["maximum"] == 200
    assert listed["read_report"].output_schema is None  # Markdown
    assert "tasks" in (listed["list_tasks"].output_schema or {})["properties"]
    assert listed["list_tasks"].annotations and listed["list_tasks"].annotations.read_only_hint
    assert listed["stop"].annotations and listed["stop"].annotations.destructive_hint


async def test_the_bots_own_mcp_client_uses_them(tmp_path: Path) -> None:
    """``McpToolset`` (the SDK's ``Client``, negotiating its protocol era itself), as a
    task of this bot would with ``mcp_servers: [{name: bot, url, headers}]``."""
    async with Harness(tmp_path, overrides=WITH_API) as bot, served(bot) as base:
        github_repo(bot)
        await bot.send_github("issue_comment", gh_comment("/agent run"))
        await bot.dispatch_all()
        [task] = await bot.tasks()
        auth = {"Authorization": f"Bearer {TOKEN}"}
        server = McpServer(name="bot", url=f"{base}/mcp", headers=auth, timeout=10)
        async with McpToolset((server,), start_timeout=10) as toolset:
            assert toolset.unavailable == {}
            tools = {tool.name: tool for tool in toolset.tools}
            assert set(tools) == {f"bot_{name}" for name in TOOLS}
            listed = await tools["bot_list_tasks"].handler({"state": "queued"})
            assert listed.ok and json.loads(listed.output)["tasks"][0]["id"] == task.id
            unknown = await tools["bot_show_task"].handler({"task_id": "no-such-task"})
            assert not unknown.ok and "no task 'no-such-task'" in unknown.output


async def test_a_task_started_planned_rejected_with_a_reason_approved_and_read(
    tmp_path: Path, remote: Remote
) -> None:
    """Everything through MCP: start a plan-only task, reject the plan with a reason (it
    reaches the model), approve the revised one, read the task and its report."""
    revised = docs.revision(
        [docs.action("task_2", "write_file", arguments={"path": "docs/NOTES.md", "content": NOTES},
                     purpose="Write docs/NOTES.md")],
        reason="put the notes under docs/ as asked",
    )  # fmt: skip
    script = [write_plan(), revised, docs.completion(done=1)]
    async with (
        Harness(tmp_path, script=script, overrides=WITH_API) as bot,
        served(bot) as base,
        mcp_client(base) as session,
    ):
        issue = github_repo(bot, remote)
        started = await call(
            session, "start_task", issue_url=ISSUE_URL, mode="plan", instructions="Keep it short."
        )
        assert started["requested_by"] == "ops (API)" and started["mode"] == "plan"
        task_id = started["task_id"]
        [task] = await bot.tasks()
        assert task.id == task_id and task.request.requested_by == "ops (API)"
        assert task.request.instructions == "Keep it short."
        busy = await refused(session, "start_task", issue_url=ISSUE_URL)
        active = f"issue {task.issue_key} has an active task: {task_id}"
        assert busy == f"start_task refused (409): {active}"

        await settle(bot)
        waiting = await call(session, "list_tasks", state="awaiting_approval")
        assert [t["id"] for t in waiting["tasks"]] == [task_id] and waiting["total"] == 1
        assert (await call(session, "list_tasks", state="done"))["tasks"] == []

        rejected = await call(session, "reject", task_id=task_id, reason="notes belong in docs/")
        assert rejected == {
            "task_id": task_id, "action": "reject", "by": "ops (API)",
            "detail": "sent; the task acts on it at its next safe point",
        }  # fmt: skip
        await settle(bot)
        assert "notes belong in docs/" in bot.llm.requests[1].messages[-1].content
        [revision] = of_kind(issue, "revision")
        assert revision.startswith("### 🔁 Plan revised (1/3)\n**Why:** put the notes under docs/")
        assert len(of_kind(issue, "approval_request")) == 2

        shown = await call(session, "show_task", task_id=task_id[:8])
        assert shown["id"] == task_id and shown["state"] == "awaiting_approval"
        assert shown["revisions"] == 1

        approved = await call(session, "approve", task_id=task_id)
        assert approved["by"] == "ops (API)"
        await settle(bot)
        done = await call(session, "show_task", task_id=task_id)
        assert done["state"] == "done"
        plan = [(item["description"], item["status"]) for item in done["plan"]]
        assert ("Write docs/NOTES.md", "done") in plan
        branch = "agent/1-spelling-error-in-the-readme-file"
        assert remote.show(branch, "docs/NOTES.md").decode() == NOTES

        report = await session.call_tool("read_report", {"task_id": task_id})
        assert not report.is_error and report.structured_content is None
        expected = (bot.settings.data_dir / "runs" / task_id / "report.md").read_text()
        assert text(report) == expected and "docs/NOTES.md" in expected
        ended = await refused(session, "stop", task_id=task_id)
        assert ended.startswith("stop refused (409): task ") and "has ended (done)" in ended


async def test_operator_actions_reach_the_task_from_the_tokens_name(tmp_path: Path) -> None:
    async with Harness(tmp_path, overrides=WITH_API) as bot, served(bot) as base:
        github_repo(bot)
        await bot.send_github("issue_comment", gh_comment("/agent run"))
        await bot.dispatch_all()
        [task] = await bot.tasks()
        async with mcp_client(base) as session, httpx.AsyncClient(base_url=base) as http:
            switched = await call(session, "pause_all")
            assert switched["paused"] is True and switched["by"] == "ops (API)"
            assert (await http.get("/readyz")).text.startswith("ready; all tasks paused by ops")
            assert (await http.get("/api/pause-all", headers=AUTH)).json()["paused"] is True
            assert await settle(bot) == []  # queued, not started
            assert (await call(session, "resume_all"))["paused"] is False

            for action in ("pause", "resume", "stop"):
                answer = await call(session, action, task_id=task.id)
                assert answer["action"] == action and answer["by"] == "ops (API)"
        sent = await bot.store.messages_after(task.id, 0)
        commands = [m.payload for m in sent if m.kind == MessageKind.COMMAND]
        assert [(c["name"], c["author"]) for c in commands] == [
            ("pause", "ops (API)"), ("resume", "ops (API)"), ("stop", "ops (API)"),
        ]  # fmt: skip
        await settle(bot)
        [stopped] = await bot.tasks()
        assert stopped.state is TaskState.STOPPED and stopped.error == "stopped by ops (API)"


async def test_unknown_tasks_and_hostile_arguments_are_tool_errors(tmp_path: Path) -> None:
    async with Harness(tmp_path, overrides=WITH_API) as bot, served(bot) as base:
        github_repo(bot)
        await bot.send_github("issue_comment", gh_comment("/agent run"))
        await bot.dispatch_all()
        [task] = await bot.tasks()
        async with mcp_client(base) as session:
            for tool in ("show_task", "read_report", "approve", "stop", "pause", "resume"):
                unknown = await refused(session, tool, task_id="no-such-task")
                assert unknown == f"{tool} refused (404): no task 'no-such-task'", tool
            long_reason = await refused(session, "reject", task_id=task.id, reason="x" * 5000)
            assert (
                long_reason
                == "invalid arguments: reason: String should have at most 4000 characters"
            )
            assert "no run report yet" in await refused(session, "read_report", task_id=task.id)

            huge = await refused(session, "show_task", task_id="x" * 100_000)
            assert huge == "invalid arguments: task_id: String should have at most 100 characters"
            wrong = await refused(session, "list_tasks", limit="many", state="exploded")
            assert wrong.startswith("invalid arguments: state: Input should be")
            assert "limit: Input should be a valid integer" in wrong
            number = await refused(session, "show_task", task_id=12)
            assert number == "invalid arguments: task_id: Input should be a valid string"
            extra = await refused(session, "pause_all", everything=True)
            assert extra == "invalid arguments: pause_all takes no 'everything'"
            nothing = await refused(session, "drop_database")
            assert nothing.startswith("no tool 'drop_database'; the tools are: list_tasks, ")
            for url, why in (
                ("ftp://github.com/a/b/issues/1", "issue_url: String should match pattern"),
                ("https://example.com/a/b/issues/1", "example.com is neither the configured"),
                ("https://github.com/a/b/wiki/1", "not a GitHub issue or pull request address"),
                ("https://github.com/" + "a" * 3000, "at most 2000 characters"),
            ):
                assert why in await refused(session, "start_task", issue_url=url), url
            gone = await refused(
                session, "start_task", issue_url=f"https://github.com/{GH_REPO}/issues/404"
            )
            assert gone.startswith("start_task refused (404): ")
            # the session still answers after all of it
            assert (await call(session, "list_tasks"))["total"] == 1
        async with httpx.AsyncClient(base_url=base) as http:
            body = b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"x": "'
            body += b"y" * 512 * 1024 + b'"}}'
            too_big = await http.post("/mcp", content=body, headers={**MCP_HEADERS, **AUTH})
            assert too_big.status_code == 413
