"""The tool factory: one registry per task with forge, workspace and MCP tools under policy."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from bot.comments.render import agent_comment
from bot.config import (
    McpServer,
    PlanningSettings,
    SandboxSettings,
    SecuritySettings,
    Settings,
    StorageSettings,
    WebFetchSettings,
    WebSearchSettings,
    WebSettings,
    WorkspaceSettings,
)
from bot.events import ForgeKind, IssueRef
from bot.tools.factory import BuiltTools, build_tools, combine
from bot.tools.quality import QualityCommands
from bot.tools.registry import ApprovalRequired, Tool, ToolResult
from bot.tools.repo_config import RepoConfig, parse_repo_config
from bot.tools.workspace_tools import workspace_tools
from tests.fakes import FakeForge

if TYPE_CHECKING:
    from tests.tools.conftest import Remote

FIXTURE = str(Path(__file__).with_name("mcp_server_fixture.py"))
FORGE_TOOLS = (
    "get_file_contents",
    "list_files",
    "search_code",
    "get_issue",
    "create_branch",
    "create_or_update_file",
    "push_files",
    "add_issue_comment",
)


def _settings(tmp_path: Path, *, mcp: bool = True, **overrides: Any) -> Settings:
    servers = (
        (McpServer(name="fx", command=sys.executable, args=(FIXTURE, "stdio"), timeout=60),)
        if mcp
        else ()
    )
    return Settings(
        storage=StorageSettings(data_dir=tmp_path / "data"), mcp_servers=servers, **overrides
    )


def _issue(kind: ForgeKind) -> tuple[FakeForge, IssueRef]:
    forge = FakeForge(kind)
    repo = forge.add_repo(
        "acme/demo", {"README.md": "# Demo\n"}, clone_url="https://forge.example/acme/demo.git"
    )
    return forge, forge.add_issue(repo, 7, title="Fix the parser!", body="It splits wrong.")


@contextlib.asynccontextmanager
async def _built(
    settings: Settings,
    kind: ForgeKind = ForgeKind.GITHUB,
    repo_config: RepoConfig | None = None,
) -> AsyncIterator[tuple[BuiltTools, FakeForge]]:
    forge, issue = _issue(kind)
    async with contextlib.AsyncExitStack() as stack:
        built = await build_tools(
            settings=settings,
            forge=forge,
            issue=issue,
            task_id="task-1",
            base_branch="main",
            repo_config=repo_config,
            stack=stack,
            finish_comment=agent_comment("task", ()),
        )
        yield built, forge


@pytest.mark.parametrize(
    ("kind", "change_request"),
    [(ForgeKind.GITHUB, "create_pull_request"), (ForgeKind.GITLAB, "create_merge_request")],
)
async def test_registry_holds_forge_workspace_and_mcp_tools(
    tmp_path: Path, kind: ForgeKind, change_request: str
) -> None:
    async with _built(_settings(tmp_path), kind) as (built, forge):
        names = set(built.registry.names())
        prefix = f"{kind.value}_"
        forge_names = {prefix + name for name in (*FORGE_TOOLS, change_request)}
        assert forge_names <= names
        local = {
            t.name for t in workspace_tools(built.workspace, built.sandbox, max_output_chars=1000)
        }
        assert local and local <= names
        assert {"fx_echo", "fx_add", "fx_pid"} <= names
        other = "gitlab_" if kind is ForgeKind.GITHUB else "github_"
        assert not any(name.startswith(other) for name in names)
        assert built.mcp_unavailable == {}
        # Building asks the forge for nothing: the clone and its credentials come on first use.
        assert forge.calls_of("clone_auth") == []


async def test_branch_workspace_and_sandbox(tmp_path: Path) -> None:
    async with _built(_settings(tmp_path, mcp=False)) as (built, _):
        assert built.branch == "agent/7-fix-the-parser"
        assert built.workspace.branch == built.branch
        assert built.workspace.base_branch == built.base_branch == "main"
        assert built.workspace.path == (tmp_path / "data" / "workspaces" / "task-1").absolute()
        assert built.sandbox.network is False
        assert built.quality is None and built.instructions == ""


async def test_mcp_tools_call_through_the_registry_and_close_with_the_stack(
    tmp_path: Path,
) -> None:
    async with _built(_settings(tmp_path)) as (built, _):
        registry = built.registry
        result = await registry.call("fx_add", {"a": 2, "b": 3}, timeout=60)
        assert result.ok and result.output == "5"
    closed = await registry.call("fx_echo", {"text": "x"}, timeout=60)
    assert not closed.ok
    assert closed.output == "MCP server 'fx' is not running: closed"


async def test_settings_and_repo_policy_are_applied(tmp_path: Path) -> None:
    settings = _settings(
        tmp_path,
        planning=PlanningSettings(
            security=SecuritySettings(forbidden_tools=("*_delete_*", "fx_slow"))
        ),
    )
    repo = parse_repo_config(
        """
policy:
  allowed_tools: ["github_*", "fx_*"]
  forbidden_tools: ["github_push_files"]
  require_approval: ["github_create_or_update_file"]
"""
    )
    async with _built(settings, repo_config=repo) as (built, forge):
        registry = built.registry

        async def call(name: str, **args: Any) -> ToolResult:
            return await registry.call(name, args, timeout=60)

        refused = await call(
            "github_push_files", files=[{"path": "a", "content": "x"}], message="m"
        )
        assert not refused.ok and "forbidden" in refused.output
        server_forbidden = await call("fx_slow", seconds=0.1)
        assert not server_forbidden.ok and "forbidden" in server_forbidden.output
        workspace_names = [
            t.name for t in workspace_tools(built.workspace, built.sandbox, max_output_chars=1000)
        ]
        narrowed = await call(workspace_names[0])
        assert not narrowed.ok and "not allowed by the repository" in narrowed.output
        with pytest.raises(ApprovalRequired):
            await call("github_create_or_update_file", path="a.txt", content="x", message="m")
        approved = await registry.call(
            "github_create_or_update_file",
            {"path": "a.txt", "content": "x", "message": "m"},
            timeout=60,
            approved=True,
        )
        assert approved.ok
        read = await call("github_get_file_contents", path="README.md")
        assert read.ok and read.output == "# Demo\n"
        assert (await call("fx_echo", text="allowed")).output == "allowed"
        usable = {t.name for t in registry.usable()}
        assert "github_push_files" not in usable and "fx_slow" not in usable
        assert commits_on(forge, built.branch) == [{"a.txt"}]


def commits_on(forge: FakeForge, branch: str) -> list[set[str]]:
    repo = next(iter(forge.repos.values()))
    return [set(files) for name, _, files in repo.commits if name == branch]


async def test_repo_quality_gate_instructions_and_network(tmp_path: Path) -> None:
    repo = parse_repo_config(
        """
quality_gate:
  test: [pytest, -q]
instructions: Prefer small commits.
sandbox:
  network: true
"""
    )
    async with _built(_settings(tmp_path, mcp=False), repo_config=repo) as (built, _):
        assert built.quality == QualityCommands(lint=None, test=("pytest", "-q"))
        assert built.instructions == "Prefer small commits."
        assert built.sandbox.network is False  # the server does not allow network
        assert any("does not allow it" in note for note in built.notes)
    server_allows = _settings(tmp_path, mcp=False, sandbox=SandboxSettings(network=True))
    async with _built(server_allows, repo_config=repo) as (built, _):
        assert built.sandbox.network is True


async def test_unavailable_mcp_server_is_a_note_not_a_failure(tmp_path: Path) -> None:
    settings = _settings(tmp_path, mcp=False).model_copy(
        update={"mcp_servers": (McpServer(name="gone", command="no-such-mcp-binary"),)}
    )
    async with _built(settings) as (built, _):
        assert built.mcp_unavailable == {"gone": "command 'no-such-mcp-binary' not found on PATH"}
        assert "MCP server gone is unavailable: command" in " ".join(built.notes)
        assert "github_get_issue" in built.registry.names()


@pytest.mark.parametrize("task_id", ["", "../escape", "a/b", ".hidden", "x" * 200])
async def test_bad_task_id_is_refused(tmp_path: Path, task_id: str) -> None:
    forge, issue = _issue(ForgeKind.GITHUB)
    async with contextlib.AsyncExitStack() as stack:
        with pytest.raises(ValueError, match="task id"):
            await build_tools(
                settings=_settings(tmp_path, mcp=False),
                forge=forge,
                issue=issue,
                task_id=task_id,
                base_branch="main",
                repo_config=None,
                stack=stack,
                finish_comment=agent_comment("task", ()),
            )


def test_combine_keeps_builtin_tools_on_a_name_clash() -> None:
    async def handler(args: dict[str, Any]) -> ToolResult:
        return ToolResult.success("")

    def tool(name: str, purpose: str) -> Tool:
        return Tool(name=name, purpose=purpose, schema={"type": "object"}, handler=handler)

    builtin = [tool("github_get_issue", "built-in")]
    extra = [tool("github_get_issue", "mcp"), tool("github_list_commits", "mcp")]
    kept, notes = combine(builtin, extra)
    assert [(t.name, t.purpose) for t in kept] == [
        ("github_get_issue", "built-in"),
        ("github_list_commits", "mcp"),
    ]
    assert notes == ["MCP tool github_get_issue left out: a built-in tool has that name"]


async def test_workspace_clones_with_the_forge_credentials_on_first_use(
    tmp_path: Path, remote: Remote
) -> None:
    forge = FakeForge()
    repo = forge.add_repo("acme/demo", {"README.md": "# Demo\n"}, clone_url=remote.url)
    issue = forge.add_issue(repo, 7, title="Fix the parser")
    async with contextlib.AsyncExitStack() as stack:
        built = await build_tools(
            settings=_settings(tmp_path, mcp=False),
            forge=forge,
            issue=issue,
            task_id="task-9",
            base_branch="main",
            repo_config=None,
            stack=stack,
            finish_comment=agent_comment("task", ()),
        )
        assert forge.calls_of("clone_auth") == []
        read = await built.registry.call("read_file", {"path": "README.md"}, timeout=120)
        assert read.ok, read.output
        assert "A demo project." in read.output
        asked = forge.calls_of("clone_auth")
        assert asked and set(asked) == {("acme/demo",)}
        assert (built.workspace.path / ".git").is_dir()
        assert built.workspace.path.is_relative_to(tmp_path / "data" / "workspaces")


async def test_the_web_tools_are_off_by_default_and_the_server_turns_them_on(
    tmp_path: Path,
) -> None:
    async with _built(_settings(tmp_path, mcp=False)) as (built, _):
        assert not {"fetch_url", "web_search"} & set(built.registry.names())
    web = WebSettings(
        fetch=WebFetchSettings(enabled=True, allowed_domains=("docs.python.org",)),
        search=WebSearchSettings(enabled=True, url="http://127.0.0.1:8888"),
    )
    async with _built(_settings(tmp_path, mcp=False, web=web)) as (built, _):
        tools = {t.name: t for t in built.registry.usable()}
        assert {"fetch_url", "web_search"} <= set(tools)
        assert "docs.python.org" in tools["fetch_url"].purpose
        assert not tools["fetch_url"].writes and not tools["web_search"].writes
        # The whole fetch gets its own time even under a shorter action timeout.
        assert tools["fetch_url"].min_timeout > web.fetch.timeout
    repo = parse_repo_config("web:\n  fetch: false\n  allowed_domains: [example.org]\n")
    async with _built(_settings(tmp_path, mcp=False, web=web), repo_config=repo) as (built, _):
        assert "fetch_url" not in built.registry.names()
        assert "web_search" in built.registry.names()
        assert any("example.org" in note for note in built.notes)


@pytest.mark.parametrize(
    ("server", "agent_yaml", "lfs"),
    [
        (False, "", False),
        (False, "lfs: true\n", True),
        (True, "", True),
        (False, "lfs: false\n", False),
    ],
)
async def test_lfs_is_off_unless_the_server_or_the_repository_asks(
    tmp_path: Path, server: bool, agent_yaml: str, lfs: bool
) -> None:
    settings = _settings(tmp_path, mcp=False, workspace=WorkspaceSettings(lfs=server))
    repo = parse_repo_config(agent_yaml) if agent_yaml else None
    async with _built(settings, repo_config=repo) as (built, _):
        assert built.workspace.lfs is lfs
