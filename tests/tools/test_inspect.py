"""What the bot sees for itself of a write: the paths a file tool changed against the paths
it meant to change, the file read back, whether a path exists (a real git workspace)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bot.sandbox.workspace import Workspace
from bot.tools.inspect import PathWatch, exists, read_back
from bot.tools.registry import Tool, ToolResult, arg_paths


def _tool(ws: Workspace, *, also: str = "") -> Tool:
    """A ``write_file`` that writes its path (and, with ``also``, one more file)."""

    async def write(args: dict[str, Any]) -> ToolResult:
        (ws.path / args["path"]).write_text(args["content"])
        if also:
            (ws.path / also).write_text("a side effect\n")
        return ToolResult.success("written", changed=True)

    schema = {"type": "object"}
    return Tool("write_file", "write", schema, write, writes=True, paths=arg_paths("path"))


async def _compare(ws: Workspace, tool: Tool, args: dict[str, Any]) -> tuple[list[str], list[str]]:
    watch = await PathWatch.start(ws, tool, args)
    assert watch is not None
    await tool.handler(args)
    compared = await watch.compare()
    assert compared is not None
    return compared


async def test_a_write_that_changed_what_it_meant_is_as_expected(
    make_workspace: Callable[..., Workspace],
) -> None:
    ws = make_workspace()
    await ws.ensure()
    args = {"path": "README.md", "content": "# New\n"}
    assert await _compare(ws, _tool(ws), args) == ([], [])


async def test_a_write_that_changed_another_path_is_seen(
    make_workspace: Callable[..., Workspace],
) -> None:
    ws = make_workspace()
    await ws.ensure()
    args = {"path": "README.md", "content": "# New\n"}
    assert await _compare(ws, _tool(ws, also="setup.cfg"), args) == ([], ["setup.cfg"])


async def test_a_write_that_left_its_path_as_it_was_is_seen(
    make_workspace: Callable[..., Workspace],
) -> None:
    ws = make_workspace()
    await ws.ensure()
    same = (ws.path / "README.md").read_text()
    args = {"path": "README.md", "content": same}
    assert await _compare(ws, _tool(ws), args) == (["README.md"], [])


async def test_a_second_write_to_a_changed_file_is_a_change(
    make_workspace: Callable[..., Workspace],
) -> None:
    ws = make_workspace()
    await ws.ensure()
    (ws.path / "README.md").write_text("first\n")  # already differs from the commit
    args = {"path": "README.md", "content": "second\n"}
    assert await _compare(ws, _tool(ws), args) == ([], [])


async def test_no_watch_for_a_tool_that_names_no_path_or_a_path_outside(
    make_workspace: Callable[..., Workspace],
) -> None:
    ws = make_workspace()
    await ws.ensure()
    assert await PathWatch.start(ws, _tool(ws), {"path": "../outside", "content": ""}) is None
    command = Tool("run_command", "run", {"type": "object"}, _tool(ws).handler, writes=True)
    assert await PathWatch.start(ws, command, {"argv": ["true"]}) is None


async def test_read_back_checks_the_written_content(
    make_workspace: Callable[..., Workspace],
) -> None:
    ws = make_workspace()
    await ws.ensure()
    (ws.path / "README.md").write_text("# New\n")
    facts, holds = await read_back(ws, "write_file", {"path": "README.md", "content": "# New\n"})
    assert holds and facts[0] == "README.md holds exactly the content written"
    assert facts[1].startswith("diff:\n") and "+# New" in facts[1]
    facts, holds = await read_back(ws, "write_file", {"path": "README.md", "content": "other"})
    assert not holds and facts[0] == "README.md does not hold the content written"
    facts, holds = await read_back(ws, "delete_file", {"path": "README.md"})
    assert not holds and facts[0] == "README.md is still there"


async def test_exists_stays_in_the_workspace(make_workspace: Callable[..., Workspace]) -> None:
    ws = make_workspace()
    await ws.ensure()
    assert exists(ws, "README.md") is True
    assert exists(ws, "missing.md") is False
    assert exists(ws, "../etc/passwd") is None
    assert exists(ws, ".git/config") is None
