"""The agent's test harness: real store (SQLite), real tools, the one FakeForge, a script.

``Harness`` holds a task in a real ``SqliteStore``, the task's real tools (forge API
tools and workspace tools from ``bot.tools.factory.build_tools``, policy from the
settings), and records every progress event. ``run`` runs a fresh
``AgentLoop`` on it, as the worker does; running it again is what a
restarted (or re-queued) worker does.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.agent.cache import PlanCache
from bot.agent.loop import AgentLoop
from bot.agent.session import TaskContext
from bot.comments.render import agent_comment
from bot.config import PlanningSettings, Settings, StorageSettings, secret_values
from bot.events import IssueRef, RepoRef, TaskMode, TaskRequest
from bot.llm.base import LLM
from bot.llm.scripted import ScriptedLLM
from bot.run_events import Outcome, ProgressEvent, ProgressKind
from bot.storage.base import Task
from bot.storage.sqlite import SqliteStore
from bot.tools.factory import BuiltTools, build_tools
from bot.tools.registry import Tool, ToolRegistry
from tests.fakes import FakeForge

SCRIPTS = Path(__file__).with_name("scripts")
README = "# Widgets\n\nA small widget library.\n"
FILES = {"README.md": README, "src/widgets.py": "def widget():\n    return 1\n"}


def script(name: str) -> list[Any]:
    """A scripted LLM scenario from tests/agent/scripts/NAME.yaml."""
    data = yaml.safe_load((SCRIPTS / f"{name}.yaml").read_text(encoding="utf-8"))
    assert isinstance(data, dict) and isinstance(data.get("responses"), list), name
    return list(data["responses"])


def planning_settings(**sections: dict[str, Any]) -> PlanningSettings:
    """Planning settings with some sections (or top-level keys) overridden."""
    base = PlanningSettings().model_dump()
    for key, value in sections.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            base[key] = {**base[key], **value}
        else:
            base[key] = value
    return PlanningSettings.model_validate(base)


class Clock:
    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class Harness:
    tmp: Path
    settings: Settings
    store: SqliteStore
    forge: FakeForge
    repo: RepoRef
    issue: IssueRef
    task: Task
    built: BuiltTools
    clock: Clock
    events: list[ProgressEvent] = field(default_factory=list)
    extra_tools: list[Tool] = field(default_factory=list)
    cache: PlanCache | None = None

    @property
    def registry(self) -> ToolRegistry:
        registry = self.built.registry
        for tool in self.extra_tools:
            if registry.get(tool.name) is None:
                registry.add(tool)
        return registry

    async def emit(self, event: ProgressEvent) -> None:
        self.events.append(event)

    def ctx(self, llm: LLM) -> TaskContext:
        return TaskContext(
            task=self.task,
            issue=self.issue,
            settings=self.settings,
            store=self.store,
            forge=self.forge,
            llm=llm,
            tools=self.registry,
            emit=self.emit,
            data_dir=self.settings.data_dir,
            built=self.built,
        )

    def coordinator(self) -> AgentLoop:
        return AgentLoop(cache=self.cache, clock=self.clock)

    async def run(self, llm: LLM) -> Outcome:
        return await self.coordinator().run(self.ctx(llm))

    # --- what people would see -------------------------------------------------------------

    def kinds(self) -> list[ProgressKind]:
        return [e.kind for e in self.events]

    def of(self, kind: ProgressKind) -> list[dict[str, Any]]:
        return [e.data for e in self.events if e.kind is kind]

    def actions(self, status: str | None = None) -> list[dict[str, Any]]:
        found = self.of(ProgressKind.ACTION)
        return [a for a in found if status is None or a["status"] == status]

    def branch_file(self, path: str) -> str | None:
        content = self.forge.repo(self.repo).branches.get(self.built.branch, {}).get(path)
        return content.decode() if content is not None else None

    # --- what people say -------------------------------------------------------------------

    async def command(self, name: str, args: str = "", author: str = "alice") -> None:
        await self.store.add_message(
            self.task.id, "command", {"name": name, "args": args, "author": author}
        )

    async def feedback(self, body: str, author: str = "alice") -> None:
        await self.store.add_message(self.task.id, "feedback", {"author": author, "body": body})


async def make_harness(
    tmp_path: Path,
    stack: contextlib.AsyncExitStack,
    *,
    planning: PlanningSettings | None = None,
    mode: TaskMode = TaskMode.RUN,
    title: str = "Add installation steps to the README",
    body: str = "Please add a section that explains `pip install widgets`.",
    files: dict[str, str] | None = None,
    llm_settings: dict[str, Any] | None = None,
    clone_url: str = "",
    store: SqliteStore | None = None,
    forge: FakeForge | None = None,
    number: int = 7,
    repo_name: str = "acme/widgets",
    **settings_overrides: Any,
) -> Harness:
    llm_section = Settings().llm.model_copy(update=llm_settings or {})
    settings = Settings(
        storage=StorageSettings(data_dir=tmp_path / "data"),
        planning=planning or PlanningSettings(),
        llm=llm_section,
        **settings_overrides,
    )
    forge = forge or FakeForge()
    if repo_name in forge.repos:
        repo = forge.repos[repo_name].ref
    else:
        repo = forge.add_repo(repo_name, dict(files or FILES), clone_url=clone_url)
    issue = forge.add_issue(repo, number, title=title, body=body)
    if store is None:
        store = SqliteStore(tmp_path / "bot.sqlite3")
        await store.open()
        stack.push_async_callback(store.close)
    task, created = await store.create_task(TaskRequest(issue, requested_by="alice", mode=mode))
    assert created
    built = await build_tools(
        settings=settings,
        forge=forge,
        issue=issue,
        task_id=task.id,
        base_branch="main",
        repo_config=None,
        stack=stack,
        finish_comment=agent_comment(task.id, secret_values(settings)),
    )
    return Harness(tmp_path, settings, store, forge, repo, issue, task, built, Clock())


@pytest.fixture
async def stack() -> AsyncIterator[contextlib.AsyncExitStack]:
    async with contextlib.AsyncExitStack() as exit_stack:
        yield exit_stack


@pytest.fixture
async def harness(tmp_path: Path, stack: contextlib.AsyncExitStack) -> Harness:
    return await make_harness(tmp_path, stack)


def llm_of(responses: Sequence[Any]) -> ScriptedLLM:
    return ScriptedLLM(list(responses))
