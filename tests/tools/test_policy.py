"""The tool policy (seed 004, 12.1.1) and the registry's call path."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest

from bot.config import SecuritySettings, Settings
from bot.events import ForgeKind
from bot.tools.forge_tools import forge_tools
from bot.tools.policy import ToolPolicy, guarded_by
from bot.tools.registry import ApprovalRequired, Tool, ToolRegistry, ToolResult, arg_paths
from bot.tools.repo_config import apply_repo_config, parse_repo_config
from tests.fakes import FakeForge

# The example of seed 004, 12.1.1.
SEED_POLICY = ToolPolicy(
    allowed=("github_get_*", "github_create_or_update_file", "github_search_*"),
    forbidden=("github_delete_*", "*_admin_*"),
    require_approval=("github_create_or_update_file", "github_merge_*"),
)

NAMES = (
    "github_get_file_contents",
    "github_get_issue",
    "github_search_code",
    "github_create_or_update_file",
    "github_push_files",
    "github_delete_file",
    "github_admin_settings",
    "github_merge_pull_request",
    "gitlab_get_file_contents",
    "fs_read_file",
    "shell_run",
    "mcp_admin_tool",
)


@pytest.mark.parametrize(
    ("name", "allowed", "approval"),
    [
        ("github_get_file_contents", True, False),
        ("github_get_issue", True, False),
        ("github_search_code", True, False),
        ("github_create_or_update_file", True, True),
        ("github_push_files", False, False),
        ("github_delete_file", False, False),
        ("gitlab_get_file_contents", False, False),
        ("github_merge_pull_request", False, False),
    ],
)
def test_seed_example_policy(name: str, allowed: bool, approval: bool) -> None:
    decision = SEED_POLICY.decide(name)
    assert (decision.allowed, decision.needs_approval) == (allowed, approval)
    if not allowed:
        assert name in decision.reason


def test_forbidden_wins_over_allowed() -> None:
    policy = ToolPolicy(allowed=("*",), forbidden=("*_delete_*",))
    decision = policy.decide("github_delete_file")
    assert not decision.allowed
    assert "forbidden" in decision.reason and "*_delete_*" in decision.reason
    assert policy.decide("github_get_file_contents").allowed


def test_forbidden_wins_even_when_approval_is_listed() -> None:
    policy = ToolPolicy(forbidden=("github_merge_*",), require_approval=("github_merge_*",))
    assert not policy.decide("github_merge_pull_request").allowed


def test_globs_are_case_sensitive() -> None:
    policy = ToolPolicy(forbidden=("*_delete_*",))
    assert policy.decide("github_DELETE_file").allowed
    assert not policy.decide("github_delete_file").allowed


def test_default_security_settings_forbid_dangerous_names() -> None:
    from bot.config import SecuritySettings
    from bot.tools.repo_config import server_policy

    policy = server_policy(SecuritySettings())
    for name in ("github_delete_branch", "gitlab_admin_users", "github_merge_pull_request"):
        assert not policy.decide(name).allowed, name
    assert policy.decide("github_create_or_update_file").allowed


# --- tightened() never loosens ------------------------------------------------------------

BASES = (
    ToolPolicy(),
    SEED_POLICY,
    ToolPolicy(allowed=("github_*", "fs_*"), forbidden=("*_admin_*",)),
    ToolPolicy(allowed=("*",), require_approval=("shell_*",)),
)
REPO_RULES: tuple[dict[str, Any], ...] = (
    {},
    {"forbidden": ("github_push_*",)},
    {"require_approval": ("fs_*",)},
    {"allowed": ("*",)},
    {"allowed": ("github_get_*", "shell_run")},
    {"allowed": ()},
    {"allowed": ("fs_*",), "forbidden": ("fs_delete_*",), "require_approval": ("*",)},
)


@pytest.mark.parametrize(("base", "rules"), list(itertools.product(BASES, REPO_RULES)))
def test_tightened_never_loosens(base: ToolPolicy, rules: dict[str, Any]) -> None:
    tight = base.tightened(**rules)
    for name in NAMES:
        before, after = base.decide(name), tight.decide(name)
        if not before.allowed:
            assert not after.allowed, f"{name} became allowed by {rules}"
        if before.allowed and before.needs_approval and after.allowed:
            assert after.needs_approval, f"{name} lost its approval by {rules}"


def test_tightened_twice_stays_within_both_narrowings() -> None:
    once = ToolPolicy().tightened(allowed=("github_*",))
    twice = once.tightened(allowed=("github_get_*", "fs_*"))
    assert twice.decide("github_get_issue").allowed
    assert not twice.decide("fs_read_file").allowed
    assert not twice.decide("github_push_files").allowed


def test_tightened_does_not_widen_a_narrow_server_list() -> None:
    base = ToolPolicy(allowed=("github_get_*",))
    assert not base.tightened(allowed=("*",)).decide("github_push_files").allowed


def test_tightened_adds_forbidden_and_approval() -> None:
    tight = ToolPolicy().tightened(forbidden=("shell_*",), require_approval=("fs_write*",))
    assert not tight.decide("shell_run").allowed
    decision = tight.decide("fs_write_file")
    assert decision.allowed and decision.needs_approval


def test_empty_allowed_list_allows_nothing() -> None:
    tight = ToolPolicy().tightened(allowed=())
    assert not any(tight.decide(name).allowed for name in NAMES)


# --- the registry -------------------------------------------------------------------------


def _tool(name: str, handler: Any = None, **schema_props: Any) -> Tool:
    async def echo(args: dict[str, Any]) -> ToolResult:
        return ToolResult.success(f"ran {name} with {sorted(args)}")

    schema = {
        "type": "object",
        "properties": schema_props or {"path": {"type": "string"}},
        "required": list(schema_props or ["path"]),
        "additionalProperties": False,
    }
    return Tool(name=name, purpose=f"{name} purpose", schema=schema, handler=handler or echo)


def _registry(*tools: Tool, policy: ToolPolicy | None = None) -> ToolRegistry:
    return ToolRegistry(tools, policy=policy)


async def test_call_runs_an_allowed_tool() -> None:
    registry = _registry(_tool("fs_read"))
    result = await registry.call("fs_read", {"path": "a"}, timeout=5)
    assert result.ok
    assert result.output == "ran fs_read with ['path']"
    assert result.duration >= 0


async def test_unknown_tool_is_refused() -> None:
    registry = _registry(_tool("fs_read"))
    result = await registry.call("fs_write", {"path": "a"}, timeout=5)
    assert not result.ok
    assert "unknown tool 'fs_write'" in result.output


async def test_forbidden_tool_is_refused_and_not_run() -> None:
    ran: list[str] = []

    async def handler(args: dict[str, Any]) -> ToolResult:
        ran.append("yes")
        return ToolResult.success("ran")

    registry = _registry(
        _tool("github_delete_file", handler), policy=ToolPolicy(forbidden=("*_delete_*",))
    )
    result = await registry.call("github_delete_file", {"path": "a"}, timeout=5)
    assert not result.ok and result.output.startswith("refused:")
    assert ran == []
    assert registry.usable() == []


async def test_schema_invalid_arguments_name_the_problem() -> None:
    registry = _registry(_tool("fs_read"))
    missing = await registry.call("fs_read", {}, timeout=5)
    assert not missing.ok and "'path' is a required property" in missing.output
    wrong = await registry.call("fs_read", {"path": 3}, timeout=5)
    assert not wrong.ok and "3 is not of type 'string'" in wrong.output
    extra = await registry.call("fs_read", {"path": "a", "mode": "x"}, timeout=5)
    assert not extra.ok and "'mode'" in extra.output


async def test_timeout_is_a_failed_result() -> None:
    async def slow(args: dict[str, Any]) -> ToolResult:
        await asyncio.sleep(5)
        return ToolResult.success("late")

    registry = _registry(_tool("shell_run", slow))
    result = await registry.call("shell_run", {"path": "x"}, timeout=0.05)
    assert not result.ok
    assert result.output == "shell_run timed out after 0.05 s"


async def test_handler_exception_is_a_failed_result() -> None:
    async def broken(args: dict[str, Any]) -> ToolResult:
        raise KeyError("boom")

    registry = _registry(_tool("fs_read", broken))
    result = await registry.call("fs_read", {"path": "x"}, timeout=5)
    assert not result.ok
    assert result.output == "fs_read failed: KeyError: 'boom'"


async def test_approval_required_unless_approved() -> None:
    registry = _registry(
        _tool("github_create_or_update_file"),
        policy=ToolPolicy(require_approval=("github_create_or_update_file",)),
    )
    with pytest.raises(ApprovalRequired) as caught:
        await registry.call("github_create_or_update_file", {"path": "a"}, timeout=5)
    assert caught.value.tool == "github_create_or_update_file"
    assert caught.value.arguments == {"path": "a"}
    result = await registry.call(
        "github_create_or_update_file", {"path": "a"}, timeout=5, approved=True
    )
    assert result.ok


async def test_an_invalid_schema_is_a_failed_result() -> None:
    tool = Tool(
        name="mcp_odd",
        purpose="odd",
        schema={"type": "object", "properties": {"x": {"type": "no-such-type"}}},
        handler=_tool("x").handler,
    )
    result = await _registry(tool).call("mcp_odd", {"x": 1}, timeout=5)
    assert not result.ok
    assert "mcp_odd has an invalid argument schema" in result.output


def test_a_name_registered_twice_is_an_error() -> None:
    registry = _registry(_tool("fs_read"))
    with pytest.raises(ValueError, match="fs_read is registered twice"):
        registry.add(_tool("fs_read"))


def test_usable_lists_only_allowed_tools_sorted() -> None:
    registry = _registry(
        _tool("b_tool"),
        _tool("a_tool"),
        _tool("x_delete_y"),
        policy=ToolPolicy(forbidden=("*_delete_*",)),
    )
    assert [t.name for t in registry.usable()] == ["a_tool", "b_tool"]
    assert registry.names() == ["a_tool", "b_tool", "x_delete_y"]
    assert registry.usable()[0].describe()["purpose"] == "a_tool purpose"


async def test_tool_output_is_redacted_before_anyone_sees_it() -> None:
    async def leak(args: dict) -> ToolResult:  # type: ignore[type-arg]
        return ToolResult.success("env: GITHUB_TOKEN=ghs_" + "a" * 36 + " and s3cr3t-value")

    tool = Tool("leak", "leaks", {"type": "object"}, leak)
    registry = ToolRegistry([tool], secrets=("s3cr3t-value",))
    result = await registry.call("leak", {}, timeout=5)
    assert "ghs_" not in result.output and "s3cr3t-value" not in result.output
    assert result.output.count("[REDACTED]") == 2


# --- paths whose writing needs approval (CI definitions) -------------------------------------

CI = SecuritySettings().require_approval_paths


@pytest.mark.parametrize(
    "path",
    [
        ".github/workflows/ci.yml",
        "./.github/workflows/deep/x.yaml",
        "src/../.github/actions/setup/action.yml",
        ".github",  # a folder that holds workflows: moving or deleting it moves them
        ".github/workflows",
        ".gitlab-ci.yml",
        ".gitlab/ci/build.yml",
        "docs/.gitlab-ci.yml",  # a pipeline file by its name (an include, a custom CI path)
        ".circleci/config.yml",
        "Jenkinsfile",
        "azure-pipelines.yml",
        ".buildkite/pipeline.yml",
        "/.gitlab-ci.yml",
        ".",
    ],
)
def test_ci_definitions_are_guarded_by_default(path: str) -> None:
    assert guarded_by(path, CI) is not None


@pytest.mark.parametrize(
    "path",
    # A folder is guarded only when it holds a guarded path by name (.github above): any
    # folder might hold an action.yml, and those are checked file by file.
    ["README.md", ".github/CODEOWNERS", "docs/gitlab-ci.md", "src/Jenkinsfile.md", "src",
     "tools/faction.yml"],
)  # fmt: skip
def test_other_paths_are_not(path: str) -> None:
    assert guarded_by(path, CI) is None


async def test_a_write_to_a_guarded_path_needs_approval_whatever_the_tool_policy() -> None:
    async def write(args: dict[str, Any]) -> ToolResult:
        return ToolResult.success("written", changed=True)

    schema = {"type": "object", "properties": {"path": {"type": "string"}}}
    tool = Tool("write_file", "Write", schema, write, writes=True, paths=arg_paths("path"))
    registry = ToolRegistry([tool], policy=ToolPolicy(approval_paths=CI))
    assert (await registry.call("write_file", {"path": "notes.md"}, timeout=5)).ok
    with pytest.raises(ApprovalRequired) as asked:
        await registry.call("write_file", {"path": ".github/workflows/x.yml"}, timeout=5)
    assert asked.value.why == "it writes .github/workflows/x.yml (CI definitions need approval)"
    approved = await registry.call(
        "write_file", {"path": ".github/workflows/x.yml"}, timeout=5, approved=True
    )
    assert approved.ok


def test_the_forge_commit_tools_name_the_paths_they_write() -> None:
    forge = FakeForge(ForgeKind.GITHUB)
    repo = forge.add_repo("acme/demo", {"README.md": "x"})
    issue = forge.add_issue(repo, 7, title="t", body="b")
    tools = forge_tools(forge, issue, branch="agent/7-t", base_branch="main", finish_comment="")
    registry = ToolRegistry(tools, policy=ToolPolicy(approval_paths=CI))
    one = {"path": ".gitlab-ci.yml", "content": "x", "message": "m"}
    many = {"files": [{"path": "a", "content": "x"}, {"path": "Jenkinsfile", "content": "x"}]}
    assert registry.guarded_paths("github_create_or_update_file", one) == [".gitlab-ci.yml"]
    assert registry.guarded_paths("github_push_files", {**many, "message": "m"}) == ["Jenkinsfile"]


def test_a_repository_adds_guarded_paths_and_never_removes_the_servers() -> None:
    repo = parse_repo_config("policy:\n  require_approval_paths: ['deploy/**']\n")
    effective = apply_repo_config(Settings(), repo).policy
    assert effective.guarded_paths(["deploy/prod.env", ".github/workflows/a.yml", "x"]) == [
        "deploy/prod.env",
        ".github/workflows/a.yml",
    ]
    empty = apply_repo_config(
        Settings(), parse_repo_config("policy:\n  require_approval_paths: []\n")
    )
    assert empty.policy.guarded_paths([".gitlab-ci.yml"]) == [".gitlab-ci.yml"]
