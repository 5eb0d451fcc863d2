"""What the worker hands the coordinator, and what it gets back.

The worker builds a ``TaskContext`` for each leased task and calls
``AgentLoop().run(ctx)``; the coordinator reports what people should see
through ``ctx.emit(ProgressEvent)`` (the comments module renders these into the
status comment and milestone comments) and returns an ``Outcome`` that the worker
stores and turns into labels.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bot.config import Settings
from bot.config.overrides import EffectivePlanning
from bot.events import IssueRef
from bot.forges.base import Forge
from bot.llm.base import LLM
from bot.run_events import Emit, Outcome, PauseReason, ProgressEvent, ProgressKind
from bot.storage.base import Store, Task
from bot.tools.factory import BuiltTools
from bot.tools.registry import ToolRegistry


@dataclass
class TaskContext:
    task: Task
    issue: IssueRef
    settings: Settings
    store: Store
    forge: Forge
    llm: LLM
    tools: ToolRegistry
    emit: Emit
    data_dir: Path
    workspace: Path | None = None
    # The parts behind ``tools`` (workspace clone, sandbox, the task's branch, the quality
    # gate): the coordinator delivers through them. None: no workspace, no branch.
    built: BuiltTools | None = None
    # How ``settings.planning`` was merged from the server's, the repository's and the
    # requester's (the run report shows it). None: the server's, unchanged.
    planning: EffectivePlanning | None = None


__all__ = ["Emit", "Outcome", "PauseReason", "ProgressEvent", "ProgressKind", "TaskContext"]
