"""MCP tools against a REAL MCP server (tests/tools/mcp_server_fixture.py), stdio and HTTP."""

from __future__ import annotations

import asyncio
import base64
import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import mcp_types
import pytest

from bot.config import McpServer
from bot.tools.mcp import (
    McpToolset,
    exposed_name,
    render_content,
    stdio_parameters,
    usable_schema,
)
from bot.tools.registry import ToolRegistry, ToolResult

FIXTURE = str(Path(__file__).with_name("mcp_server_fixture.py"))
START = 60.0  # generous: the machine is shared and the server imports the SDK


def stdio_server(name: str = "fx", *, timeout: float = 10.0, **env: str) -> McpServer:
    return McpServer(
        name=name, command=sys.executable, args=(FIXTURE, "stdio"), env=env, timeout=timeout
    )


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def _call(registry: ToolRegistry, tool: str, **args: object) -> ToolResult:
    return await registry.call(tool, dict(args), timeout=60)


@pytest.fixture
async def stdio_tools() -> AsyncIterator[tuple[McpToolset, ToolRegistry]]:
    async with McpToolset((stdio_server(timeout=30.0),), start_timeout=START) as toolset:
        yield toolset, ToolRegistry(toolset.tools)


@pytest.fixture
def http_server() -> Iterator[tuple[str, subprocess.Popen[str]]]:
    proc = subprocess.Popen([sys.executable, FIXTURE, "http"], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    try:
        line = proc.stdout.readline()
        assert line.startswith("PORT "), f"the fixture server did not start: {line!r}"
        yield f"http://127.0.0.1:{int(line.split()[1])}/mcp", proc
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        proc.stdout.close()


# --- pure helpers ------------------------------------------------------------------------


def test_exposed_name_is_a_valid_function_name() -> None:
    assert exposed_name("fx", "echo") == "fx_echo"
    assert exposed_name("my-srv", "files/read.all") == "my-srv_files_read_all"


def test_stdio_parameters_keep_only_config_env_and_path() -> None:
    server = McpServer(name="s", command="srv", args=("--x",), env={"TOKEN": "t", "HOME": "/h"})
    params = stdio_parameters(server, path="/usr/bin:/bin")
    assert params.env == {"PATH": "/usr/bin:/bin", "TOKEN": "t", "HOME": "/h"}
    assert params.command == "env"
    assert params.args[-2:] == ["srv", "--x"]
    unset = params.args[:-2]
    assert "-u" in unset and "USER" in unset and "SHELL" in unset
    assert "HOME" not in unset and "PATH" not in unset


def test_usable_schema_falls_back_for_an_invalid_schema() -> None:
    good = {"type": "object", "properties": {"a": {"type": "integer"}}}
    assert usable_schema(good) is good
    assert usable_schema({"type": "object", "properties": {"a": {"type": 5}}}) == {"type": "object"}


def test_render_content_of_every_block_kind() -> None:
    result = mcp_types.CallToolResult(
        content=[
            mcp_types.TextContent(type="text", text="hello"),
            mcp_types.ImageContent(
                type="image", data=base64.b64encode(b"x" * 30).decode(), mime_type="image/png"
            ),
            mcp_types.EmbeddedResource(
                type="resource",
                resource=mcp_types.TextResourceContents(uri="file:///a.txt", text="inside"),
            ),
            mcp_types.EmbeddedResource(
                type="resource",
                resource=mcp_types.BlobResourceContents(uri="file:///b.bin", blob="AAAA"),
            ),
            mcp_types.ResourceLink(type="resource_link", uri="file:///c.txt", name="c"),
        ]
    )
    assert render_content(result, max_chars=1000).splitlines() == [
        "hello",
        "[image: image/png, 30 bytes]",
        "inside",
        "[binary resource file:///b.bin]",
        "[resource link file:///c.txt]",
    ]
    cut = render_content(result, max_chars=3)
    assert cut.startswith("hel\n[... ") and cut.endswith("more characters]")


def test_render_structured_only_result() -> None:
    result = mcp_types.CallToolResult(content=[], structured_content={"n": 1})
    assert render_content(result, max_chars=100) == '{"n": 1}'


# --- a real server over stdio -------------------------------------------------------------


async def test_tools_are_listed_with_prefix_schema_and_purpose(
    stdio_tools: tuple[McpToolset, ToolRegistry],
) -> None:
    toolset, registry = stdio_tools
    assert toolset.unavailable == {}
    assert {"fx_echo", "fx_add", "fx_fail", "fx_crash", "fx_slow", "fx_pid"} <= set(
        registry.names()
    )
    add = registry.get("fx_add")
    assert add is not None
    assert add.purpose == "[MCP fx] Add two integers."
    assert add.schema["required"] == ["a", "b"]
    assert add.schema["properties"]["a"]["type"] == "integer"
    assert add.writes  # the server gave no read-only hint


async def test_calls_return_text_and_structured_data(
    stdio_tools: tuple[McpToolset, ToolRegistry],
) -> None:
    _, registry = stdio_tools
    echo = await _call(registry, "fx_echo", text="hi there")
    assert echo.ok and echo.output == "hi there"
    add = await _call(registry, "fx_add", a=2, b=40)
    assert add.ok and add.output == "42"
    assert add.data == {"structured": {"result": 42}}


async def test_one_session_per_server(stdio_tools: tuple[McpToolset, ToolRegistry]) -> None:
    _, registry = stdio_tools
    first = await _call(registry, "fx_pid")
    second = await _call(registry, "fx_pid")
    assert first.ok and first.output == second.output
    assert int(first.output) != os.getpid()


async def test_session_ends_with_the_toolset() -> None:
    async with McpToolset((stdio_server(),), start_timeout=START) as toolset:
        result = await _call(ToolRegistry(toolset.tools), "fx_pid")
        pid = int(result.output)
        assert _pid_alive(pid)
    assert not _pid_alive(pid)


async def test_schema_is_checked_before_the_server_sees_the_call(
    stdio_tools: tuple[McpToolset, ToolRegistry],
) -> None:
    _, registry = stdio_tools
    result = await _call(registry, "fx_add", a="one", b=2)
    assert not result.ok
    assert result.output == "invalid arguments for fx_add: 'one' is not of type 'integer'"


async def test_an_error_result_is_a_failure(stdio_tools: tuple[McpToolset, ToolRegistry]) -> None:
    _, registry = stdio_tools
    result = await _call(registry, "fx_fail", reason="disk full")
    assert not result.ok
    assert result.output.startswith("fx_fail returned an error: ")
    assert "disk full" in result.output


async def test_a_slow_call_times_out_and_the_session_survives() -> None:
    async with McpToolset((stdio_server(timeout=3.0),), start_timeout=START) as toolset:
        registry = ToolRegistry(toolset.tools)
        before = await _call(registry, "fx_pid")
        slow = await _call(registry, "fx_slow", seconds=60)
        assert not slow.ok
        assert slow.output == "fx_slow timed out after 3 s (MCP server 'fx')"
        after = await _call(registry, "fx_pid")
        assert after.ok and after.output == before.output


async def test_concurrent_calls_share_the_session(
    stdio_tools: tuple[McpToolset, ToolRegistry],
) -> None:
    _, registry = stdio_tools
    slow, echo = await asyncio.gather(
        _call(registry, "fx_slow", seconds=0.5), _call(registry, "fx_echo", text="quick")
    )
    assert slow.output == "slept 0.5" and echo.output == "quick"


async def test_a_crash_is_a_failure_and_later_calls_fail_fast(
    stdio_tools: tuple[McpToolset, ToolRegistry],
) -> None:
    _, registry = stdio_tools
    crash = await _call(registry, "fx_crash")
    assert not crash.ok
    assert crash.output == "MCP server 'fx' closed the connection during fx_crash (crashed?)"
    later = await _call(registry, "fx_echo", text="anyone?")
    assert not later.ok
    assert later.output.startswith("MCP server 'fx' is not running: ")


async def test_environment_is_only_config_env_and_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "ghs_bot_secret")
    monkeypatch.setenv("LLM_API_KEY", "sk-bot-secret")
    server = stdio_server(SERVER_TOKEN="for-the-server")
    async with McpToolset((server,), start_timeout=START) as toolset:
        registry = ToolRegistry(toolset.tools)
        seen = {
            name: (await _call(registry, "fx_getenv", name=name)).output
            for name in ("SERVER_TOKEN", "GITHUB_TOKEN", "LLM_API_KEY", "HOME", "USER", "PATH")
        }
    assert seen["SERVER_TOKEN"] == "for-the-server"
    assert seen["GITHUB_TOKEN"] == seen["LLM_API_KEY"] == "<unset>"
    assert seen["HOME"] == seen["USER"] == "<unset>"
    assert seen["PATH"] == os.environ["PATH"]


# --- a real server over streamable HTTP ----------------------------------------------------


async def test_http_server_tools_headers_and_one_session(
    http_server: tuple[str, subprocess.Popen[str]],
) -> None:
    url, proc = http_server
    server = McpServer(name="web", url=url, headers={"X-Api-Key": "k-123"}, timeout=10)
    async with McpToolset((server,), start_timeout=START) as toolset:
        registry = ToolRegistry(toolset.tools)
        assert "web_echo" in registry.names()
        header = await _call(registry, "web_header", name="X-Api-Key")
        assert header.ok and header.output == "k-123"
        pids = {(await _call(registry, "web_pid")).output for _ in range(2)}
        assert pids == {str(proc.pid)}
        echo = await _call(registry, "web_echo", text="over http")
        assert echo.output == "over http"


async def test_http_server_crash_does_not_take_the_task_down(
    http_server: tuple[str, subprocess.Popen[str]],
) -> None:
    url, proc = http_server
    server = McpServer(name="web", url=url, timeout=10)
    async with McpToolset((server,), start_timeout=START) as toolset:
        registry = ToolRegistry(toolset.tools)
        crash = await _call(registry, "web_crash")
        assert not crash.ok
        assert "MCP server 'web'" in crash.output
        assert proc.wait(timeout=10) == 3
        later = await _call(registry, "web_echo", text="still there?")
        assert not later.ok and "MCP server 'web'" in later.output
        # This task keeps running: the crash stayed inside the session's own task.
        await asyncio.sleep(0.05)


async def test_http_timeout(http_server: tuple[str, subprocess.Popen[str]]) -> None:
    url, _ = http_server
    server = McpServer(name="web", url=url, timeout=1)
    async with McpToolset((server,), start_timeout=START) as toolset:
        registry = ToolRegistry(toolset.tools)
        slow = await _call(registry, "web_slow", seconds=20)
        assert slow.output == "web_slow timed out after 1 s (MCP server 'web')"
        assert (await _call(registry, "web_add", a=1, b=1)).output == "2"


# --- servers that cannot start ---------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_unavailable_servers_are_reported_and_others_work() -> None:
    servers = (
        McpServer(name="missing", command="no-such-mcp-server-binary"),
        McpServer(name="nobody", url=f"http://127.0.0.1:{_free_port()}/mcp", timeout=5),
        stdio_server(),
    )
    async with McpToolset(servers, start_timeout=START) as toolset:
        assert toolset.unavailable["missing"] == (
            "command 'no-such-mcp-server-binary' not found on PATH"
        )
        assert "ConnectError" in toolset.unavailable["nobody"]
        names = {tool.name for tool in toolset.tools}
        assert "fx_echo" in names
        assert not any(name.startswith(("missing_", "nobody_")) for name in names)


async def test_a_server_that_never_answers_times_out() -> None:
    silent = McpServer(name="silent", command="sleep", args=("60",), timeout=1)
    async with McpToolset((silent,), start_timeout=1.0) as toolset:
        assert toolset.tools == []
        assert "silent" in toolset.unavailable
        assert toolset.unavailable["silent"] == "did not start within 1 s"


async def test_no_servers_no_tools() -> None:
    async with McpToolset(()) as toolset:
        assert toolset.tools == [] and toolset.unavailable == {}


async def test_cancelled_while_starting_leaves_no_process(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    script = f"echo $$ > {pid_file}; exec sleep 60"
    hung = McpServer(name="hung", command="sh", args=("-c", script), timeout=30)

    async def enter() -> None:
        async with McpToolset((hung,), start_timeout=30):
            raise AssertionError("the server never answers, so this is not reached")

    task = asyncio.create_task(enter())
    for _ in range(200):
        if pid_file.exists() and pid_file.read_text().strip():
            break
        await asyncio.sleep(0.05)
    pid = int(pid_file.read_text())
    assert _pid_alive(pid)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not _pid_alive(pid)
