"""The tools the bot serves to MCP clients (``mcp_server.py``), each one of the API's
operations: the endpoint of ``TaskApi`` that the REST route under ``/api`` calls, with
the same parameter model and the same answer, so a tool and its route cannot part.

A tool names its operation (``call``), the model its arguments are validated into
(``params``, whose JSON schema is the tool's input schema) and the model of its answer
(``answer``, the output schema; ``None``: the answer is Markdown text). The operator's
actions on one task are ``TaskApi.act`` with the action fixed by the tool's name.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from bot.api.models import (
    Action,
    ActionResult,
    NewTask,
    NewTicket,
    NoParameters,
    SwitchState,
    TaskAction,
    TaskAnswer,
    TaskCreated,
    TaskDetail,
    TaskFilter,
    TaskId,
    TaskPage,
    TaskReject,
    TicketCreated,
)
from bot.api.operations import Answer
from bot.api.routes import TaskApi
from bot.api.status import Status

P = TypeVar("P", bound=BaseModel)


@dataclass(frozen=True, slots=True)
class McpTool(Generic[P]):
    name: str
    description: str
    call: Callable[[P], Awaitable[Answer]]
    params: type[P]
    answer: type[BaseModel] | None  # None: Markdown text
    read_only: bool = False
    destructive: bool = False


def _act(api: TaskApi, action: Action) -> Callable[[TaskId], Awaitable[Answer]]:
    """``TaskApi.act`` (``POST /api/tasks/{task_id}/{action}``) for one ``action``."""

    async def call(params: TaskId) -> Answer:
        return await api.act(TaskAction(task_id=params.task_id, action=action))

    return call


def task_tools(api: TaskApi) -> list[McpTool[Any]]:
    """Every tool, over ``api``'s operations."""

    waiting = " The task acts on it at its next safe point and says so in its issue."
    task_id = " A task id may be shortened to its first characters when no other starts so."
    return [
        McpTool(
            "list_tasks",
            "Tasks, newest first, filtered by state, forge and repository, a page at a time.",
            api.list_tasks, TaskFilter, TaskPage, read_only=True,
        ),
        McpTool(
            "show_task",
            "A task: its state, stage, plan with each item's status, timeline, tokens, cost"
            " and links (branch, change request)." + task_id,
            api.show_task, TaskId, TaskDetail, read_only=True,
        ),
        McpTool(
            "read_report",
            "A task's run report (report.md, Markdown): what it did, the evidence, the"
            " outcome. Refused until the run has written it." + task_id,
            api.task_report, TaskId, None, read_only=True,
        ),
        McpTool(
            "start_task",
            "Start a task on an issue, pull request or merge request, given its web address"
            " on the configured GitHub or GitLab: mode 'run' does the work and delivers a"
            " draft change request, 'plan' only plans. Refused when the issue has an active"
            " task. Answers the new task's id.",
            api.create_task, NewTask, TaskCreated,
        ),
        McpTool(
            "approve",
            "Approve the plan a task waits on, as /agent approve does in the issue." + waiting,
            _act(api, Action.APPROVE), TaskId, ActionResult,
        ),
        McpTool(
            "reject",
            "Reject the plan a task waits on, with the reason the agent revises it by, as"
            " /agent reject REASON does in the issue." + waiting,
            api.reject, TaskReject, ActionResult, destructive=True,
        ),
        McpTool(
            "stop",
            "Stop a task for good (its work so far stays on its branch)." + waiting,
            api.stop_task, TaskId, ActionResult, destructive=True,
        ),
        McpTool(
            "answer",
            "Answer what a task asked (it waits for input), as a comment in its issue would."
            + waiting,
            api.answer, TaskAnswer, ActionResult,
        ),
        McpTool(
            "open_ticket",
            "Open an issue in a repository of the configured GitHub or GitLab, labelled to"
            " start a task, and start it. Answers the issue's address and the task's id.",
            api.create_ticket, NewTicket, TicketCreated,
        ),
        McpTool(
            "status",
            "The bot's state in numbers: workers (alive, busy, lease age), queue depth, tasks"
            " by state, success rate over 24 h and 7 days, the model's health, the emergency"
            " stop.",
            api.status, NoParameters, Status, read_only=True,
        ),
        McpTool(
            "pause", "Pause a task until it is resumed." + waiting,
            _act(api, Action.PAUSE), TaskId, ActionResult,
        ),
        McpTool(
            "resume", "Resume a paused task." + waiting,
            _act(api, Action.RESUME), TaskId, ActionResult,
        ),
        McpTool(
            "pause_all",
            "Emergency stop: every running task pauses at its next safe point and queued"
            " ones wait until resume_all.",
            api.pause_all, NoParameters, SwitchState,
        ),
        McpTool(
            "resume_all",
            "End the emergency stop and resume the tasks it paused (not those people paused).",
            api.resume_all, NoParameters, SwitchState,
        ),
    ]  # fmt: skip
