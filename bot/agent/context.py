"""What the worker hands the coordinator, and what it gets back.

The worker builds a ``TaskContext`` for each leased task and calls
``AgentLoop().run(ctx)``; the coordinator reports what people should see
through ``ctx.emit(ProgressEvent)`` (the comments module renders these into the
status comment and milestone comments) and returns an ``Outcome`` that the worker
stores and turns into labels.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from bot.config import Settings
from bot.config.overrides import EffectivePlanning
from bot.events import IssueRef
from bot.forges.base import Forge
from bot.llm.base import LLM
from bot.storage.base import Store, Task, TaskState
from bot.tools.factory import BuiltTools
from bot.tools.registry import ToolRegistry


class ProgressKind(StrEnum):
    """Moments of a task, from least to most worth a person's attention."""

    PHASE = "phase"  # phase changed (status comment only)
    PLAN = "plan"  # the plan (status comment checklist)
    ACTION = "action"  # an action started / finished (status comment only)
    USAGE = "usage"  # tokens used so far (status comment only)
    LINKS = "links"  # branch / change request / report links (status comment only)
    REVISION = "revision"  # a plan revision: its own comment
    REFLECTION = "reflection"  # a failure reflection: its own comment
    CLARIFICATION = "clarification"  # questions for the author: its own comment, waits
    APPROVAL_REQUEST = "approval_request"  # plan / tool call to approve: its own comment, waits
    PAUSED = "paused"  # paused (LLM down, approval timeout, /agent pause): its own comment
    COMPLETION = "completion"  # the completion summary: its own comment
    HUMAN_INTERVENTION = "human_intervention"  # docs/planning.md#run-endings: its own comment
    NOTICE = "notice"  # a short reply (e.g. to a command): its own comment
    SETTINGS_REFUSED = "settings_refused"  # .agent.yaml / personal planning values refused


@dataclass(frozen=True, slots=True)
class ProgressEvent:
    kind: ProgressKind
    data: dict[str, Any] = field(default_factory=dict)


Emit = Callable[[ProgressEvent], Awaitable[None]]


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


class PauseReason(StrEnum):
    """Why a task is paused (the value is the PAUSED event's ``reason``)."""

    LLM_UNAVAILABLE = "llm_unavailable"  # the model endpoint is down: woken by a health probe
    APPROVAL_TIMEOUT = "approval_timeout"  # nobody answered an approval request in time
    PERSON = "user"  # someone sent /agent pause


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a run ended. ``state`` is the task's next state; ``wake_at`` (epoch seconds)
    is when a waiting or paused task should be looked at again (None: only when a
    person acts); ``pause`` why a paused task is paused."""

    state: TaskState
    summary: dict[str, Any] = field(default_factory=dict)
    reason: str = ""
    wake_at: float | None = None
    pause: PauseReason | None = None
