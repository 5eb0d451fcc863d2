"""Everything one task may use, built in one place.

``build_tools`` gives a task its branch, its workspace (a clone made on first use),
its sandbox, its forge API tools, its workspace tools, the web tools the server turns
on (``web:``, narrowed by the repository) and the MCP servers' tools,
all in one ``ToolRegistry`` whose policy is the server's ``planning.security``
tightened by the repository's ``.agent.yaml``. The MCP sessions enter the task's
``AsyncExitStack`` and close with it.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from bot.config import Settings, is_bot_account, secret_values
from bot.events import IssueRef
from bot.forges.base import Forge
from bot.sandbox.output import LogQuota
from bot.sandbox.sandbox import Sandbox, hidden_paths
from bot.sandbox.setup import Preparer
from bot.sandbox.setup_cache import SetupCache
from bot.sandbox.setup_env import package_config
from bot.sandbox.setup_plan import Argv, sandbox_which
from bot.sandbox.workspace import Workspace, branch_name
from bot.tools.forge_tools import CommentFinisher, forge_tools
from bot.tools.mcp import McpToolset
from bot.tools.memo import MemoPad, memo_tool
from bot.tools.quality import QualityCommands
from bot.tools.registry import Tool, ToolRegistry
from bot.tools.repo_config import EffectivePolicy, RepoConfig, apply_repo_config
from bot.tools.web_policy import web_limits
from bot.tools.web_tools import web_tools
from bot.tools.workspace_tools import workspace_tools

log = logging.getLogger(__name__)

_TASK_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$")


@dataclass(frozen=True, slots=True)
class BuiltTools:
    """A task's tools and the parts behind them."""

    registry: ToolRegistry
    workspace: Workspace
    sandbox: Sandbox
    branch: str
    base_branch: str
    policy: EffectivePolicy
    quality: QualityCommands | None  # None: detected from the clone when the gate runs
    instructions: str = ""
    preparer: Preparer | None = None  # set-up before work (None: no set-up)
    mcp_unavailable: dict[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    memo: MemoPad = field(default_factory=MemoPad)  # the agent's notes (bound to its checkpoint)


def combine(builtin: list[Tool], extra: list[Tool]) -> tuple[list[Tool], list[str]]:
    """Built-in tools first; an extra (MCP) tool whose name is taken is left out."""
    taken = {tool.name for tool in builtin}
    kept = list(builtin)
    notes = []
    for tool in extra:
        if tool.name in taken:
            notes.append(f"MCP tool {tool.name} left out: a built-in tool has that name")
            continue
        taken.add(tool.name)
        kept.append(tool)
    return kept, notes


async def build_tools(
    *,
    settings: Settings,
    forge: Forge,
    issue: IssueRef,
    task_id: str,
    base_branch: str,
    repo_config: RepoConfig | None,
    stack: contextlib.AsyncExitStack,
    finish_comment: CommentFinisher,
    branch: str | None = None,
    run_dir: Path | None = None,
    round_tools: bool = False,
) -> BuiltTools:
    """Build the task's tools; MCP sessions close when ``stack`` closes.

    ``branch`` names an existing branch of the bot's own to continue on (a follow-up on
    its change request); by default the branch is derived from the issue. ``run_dir``:
    the task's run directory, where commands leave their whole output (``commands/``,
    within ``storage.run_dir_mb``). ``round_tools``: a round on the bot's change request
    (no person started it): its forge tools read only the comments of people with write
    access and the bot's (``bot.tools.writers``).

    Raises ``ValueError`` for a task id that cannot name a directory or a branch
    prefix that gives no valid branch name.
    """
    if not _TASK_ID.match(task_id):
        raise ValueError(f"task id {task_id!r} may hold only letters, digits, '_' and '-'")
    repo = repo_config or RepoConfig()
    effective = apply_repo_config(settings, repo)
    if branch is None:
        branch = branch_name(settings.workspace.branch_prefix, issue.number, issue.title)
    elif not branch.startswith(settings.workspace.branch_prefix):
        raise ValueError(f"{branch} is not one of the bot's branches")
    workspace = Workspace(
        settings.data_dir / "workspaces" / task_id,
        auth=functools.partial(forge.clone_auth, issue.repo),
        branch=branch,
        base_branch=base_branch,
        max_file_bytes=settings.workspace.max_file_bytes,
        lfs=settings.workspace.lfs or repo.lfs,
    )
    quota = LogQuota(run_dir, settings.storage.run_dir_mb << 20) if run_dir else None
    sandbox = Sandbox(
        settings.sandbox,
        network=effective.network,
        hide=hidden_paths(settings),
        expose=settings.sandbox.expose_paths,
        log_quota=quota,
    )
    preparer = _preparer(settings, issue, workspace, repo, quota)
    gate = repo.quality_gate
    quality = QualityCommands(lint=gate.lint, test=gate.test) if gate else None
    logs = run_dir / "commands" if run_dir is not None else None
    builtin = _builtin_tools(
        settings, forge, issue, finish_comment, workspace, sandbox, quality, effective, logs,
        round_tools,
    )  # fmt: skip
    web = web_limits(settings.web, repo.web)  # off unless the server turns the tools on
    builtin += web_tools(web, secrets=secret_values(settings))
    memo = MemoPad()
    builtin.append(memo_tool(memo))
    mcp = McpToolset(settings.mcp_servers, max_output_chars=settings.sandbox.max_output_chars)
    await stack.enter_async_context(mcp)
    tools, skipped = combine(builtin, mcp.tools)
    for note in skipped:
        log.warning("%s", note)
    unavailable = [
        f"MCP server {name} is unavailable: {why}" for name, why in mcp.unavailable.items()
    ]
    return BuiltTools(
        registry=ToolRegistry(tools, policy=effective.policy, secrets=secret_values(settings)),
        workspace=workspace,
        sandbox=sandbox,
        branch=branch,
        base_branch=base_branch,
        policy=effective,
        quality=quality,
        instructions=repo.instructions,
        preparer=preparer,
        mcp_unavailable=dict(mcp.unavailable),
        notes=effective.notes + web.notes + tuple(skipped) + tuple(unavailable),
        memo=memo,
    )


def _preparer(
    settings: Settings,
    issue: IssueRef,
    workspace: Workspace,
    repo: RepoConfig,
    quota: LogQuota | None,
) -> Preparer:
    repository = f"{issue.repo.forge.value}:{issue.repo.full_name}"  # hashed: one folder each
    return setup_preparer(settings, workspace, repo.setup, repository, quota)


def setup_preparer(
    settings: Settings,
    workspace: Workspace,
    configured: tuple[Argv, ...] | None,
    repository: str,
    quota: LogQuota | None = None,
) -> Preparer:
    """Set-up runs in a sandbox of its own: with network (the server's sandbox.network is
    for the agent's commands) unless it would run what the agent wrote, the same hidden
    paths, and the host's package-manager configuration files shown. ``configured``: the
    repository's ``setup:`` (None: detected); ``repository``: names its cache folder."""
    hidden = hidden_paths(settings)

    def sandbox(expose: tuple[Path, ...], network: bool) -> Sandbox:
        shown = (*settings.sandbox.expose_paths, *expose)
        return Sandbox(
            settings.sandbox, network=network, hide=hidden, expose=shown, log_quota=quota
        )

    package = functools.partial(
        package_config,
        dict(os.environ),
        Path.home(),
        secrets=secret_values(settings),
        own_files=hidden,
    )
    return Preparer(
        workspace=workspace,
        configured=configured,
        sandbox=sandbox,
        package=package,
        cache=SetupCache(settings.data_dir / "setup-cache", repository),
        timeout=float(settings.sandbox.setup_timeout),
        which=sandbox_which,
    )


def _builtin_tools(
    settings: Settings,
    forge: Forge,
    issue: IssueRef,
    finish_comment: CommentFinisher,
    workspace: Workspace,
    sandbox: Sandbox,
    quality: QualityCommands | None,
    effective: EffectivePolicy,
    command_logs: Path | None,
    round_tools: bool,
) -> list[Tool]:
    max_chars = settings.sandbox.max_output_chars

    def is_bot(login: str, account: str) -> bool:
        return is_bot_account(settings, issue.repo.forge, login=login, account_id=account)

    tools = forge_tools(
        forge,
        issue,
        branch=workspace.branch,
        base_branch=workspace.base_branch,
        max_file_bytes=settings.workspace.max_file_bytes,
        max_output_chars=max_chars,
        draft=settings.workspace.draft_change_requests,
        secrets=secret_values(settings),
        finish_comment=finish_comment,
        writers_only=is_bot if round_tools else None,
    )
    return tools + workspace_tools(
        workspace,
        sandbox,
        max_output_chars=max_chars,
        quality_commands=quality,
        guarded=effective.policy.guarded_paths,
        command_logs=command_logs,
    )
