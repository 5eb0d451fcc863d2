"""What the status comment shows of a task, read from its checkpoint (or, for a task whose
checkpoint is not at hand, its planning history: ``history_snapshot``). Pure: no I/O.

A restarted (or re-queued, or resumed) worker starts a fresh reporter; the
coordinator does not re-announce the plan it already has. ``status_snapshot``
gives the reporter the plan, each subtask's status, the tokens used, the
revisions, what the task waits for and the delivery links, so the status comment
it edits keeps showing them instead of an empty checklist.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from bot.record.history import HistoryKind
from bot.record.plan import PlanDocument, PlanFormatError, parse_plan
from bot.record.state import ActionStatus, AgentState
from bot.run_events import SubtaskStatus
from bot.tracing import trace_id_of

_SHOWN_STATUS = {
    ActionStatus.RUNNING: SubtaskStatus.RUNNING,
    ActionStatus.DONE: SubtaskStatus.DONE,
    ActionStatus.FAILED: SubtaskStatus.FAILED,
}
# report_path: kept in old checkpoints' links; the status comment no longer shows it
_LINK_KEYS = ("branch", "change_request_url", "report_path")


def plan_of(document: dict[str, Any] | None) -> PlanDocument | None:
    """The checkpoint's plan document, typed (None when there is none)."""
    if document is None:
        return None
    return parse_plan(
        document,
        revision=int(document.get("revision", 0)),
        done_tasks=document.get("done_tasks", ()),
    )


def subtask_statuses(state: AgentState, plan: PlanDocument | None) -> dict[str, str]:
    """Subtask id -> pending / running / done / failed, for the plan checklist."""
    out: dict[str, str] = {r.task_id: _SHOWN_STATUS[r.status] for r in state.records.values()}
    if plan is not None:
        finished = state.finished_keys()
        for action in plan.actions:
            if action.key not in finished and action.key not in state.records:
                out[action.task_id] = SubtaskStatus.PENDING
    return out


def waiting_of(state: AgentState) -> dict[str, Any]:
    """What the task waits on people for, as the APPROVAL_REQUEST / CLARIFICATION events
    say it ({} when it waits for nothing)."""
    waiting = state.waiting
    if waiting is None:
        return {}
    if not waiting.approval:
        return {"subject": waiting.kind.value}
    tool = waiting.call.tool if waiting.call is not None else None
    shown = {"subject": waiting.kind.value, "what": waiting.what, "tool": tool,
             "number": waiting.number}  # fmt: skip
    return {k: v for k, v in shown.items() if v}


def status_snapshot(checkpoint: dict[str, Any] | None) -> dict[str, Any] | None:
    """The status view's data in a checkpoint, or None when it holds nothing to show
    (no checkpoint yet, or one this version cannot read)."""
    if not checkpoint:
        return None
    try:
        state = AgentState.from_dict(checkpoint)
        plan = plan_of(state.plan)
    except (ValueError, TypeError, KeyError, PlanFormatError):
        return None
    usage = state.usage or {}
    delivery = state.delivery or {}
    snapshot: dict[str, Any] = {
        "phase": state.phase().value,
        "plan": plan.to_document() if plan is not None else {},
        "statuses": subtask_statuses(state, plan),
        "total_tokens": int(usage.get("prompt_tokens", 0)) + int(usage.get("completion_tokens", 0)),
        "revisions": state.revisions,
        "waiting": waiting_of(state),
        "links": {k: str(delivery[k]) for k in _LINK_KEYS if delivery.get(k)},
    }
    if usage.get("cached_tokens"):  # said only when the provider's cache was used
        snapshot["cached_tokens"] = int(usage["cached_tokens"])
    if usage.get("cost"):  # said only when the model has a price
        snapshot["cost"] = float(usage["cost"])
    if isinstance(delivery.get("gate"), dict):
        snapshot["gate"] = dict(delivery["gate"])
    if state.course:
        snapshot["course"] = list(state.course)
    if state.traces:  # the last run's trace (bot.tracing), when traces were on
        snapshot["trace_id"] = trace_id_of(state.traces[-1])
    return snapshot


def run_traces(checkpoint: dict[str, Any] | None) -> list[str]:
    """The ``traceparent`` of each earlier run of the task that was traced, oldest first."""
    traces = (checkpoint or {}).get("traces")
    return [t for t in traces if isinstance(t, str)] if isinstance(traces, list) else []


def checklist(snapshot: dict[str, Any]) -> list[dict[str, str]]:
    """The plan's subtasks with their status ({id, description, status}), in plan order."""
    decomposition = snapshot.get("plan", {}).get("task_decomposition") or {}
    statuses = snapshot.get("statuses", {})
    return [
        {
            "id": str(item.get("id", "")),
            "description": str(item.get("description", "")),
            "status": str(statuses.get(str(item.get("id", "")), SubtaskStatus.PENDING.value)),
        }
        for item in decomposition.get("subtasks", [])
        if isinstance(item, dict)
    ]


def history_snapshot(entries: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The plan and its subtasks' statuses as ``status_snapshot`` gives them, read from a
    planning history instead of a checkpoint (an eval task's ``trajectory.jsonl``): the
    last plan or revised plan, each finished action's subtask done or failed, and the
    subtasks of the plan's actions not run yet pending (``checklist`` shows it)."""
    plan: PlanDocument | None = None
    finished: dict[str, tuple[str, bool]] = {}  # action key -> (subtask id, ok)
    for entry in entries:
        kind = entry.get("type")
        document = entry.get("plan")
        if kind in (HistoryKind.PLAN, HistoryKind.REVISION) and isinstance(document, dict):
            try:
                plan = plan_of(document)
            except (ValueError, TypeError, PlanFormatError):
                continue
        elif kind == HistoryKind.ACTION and isinstance(entry.get("key"), str):
            finished[entry["key"]] = (str(entry.get("task_id", "")), entry.get("ok") is True)
    statuses: dict[str, str] = {
        task: (SubtaskStatus.DONE if ok else SubtaskStatus.FAILED).value
        for task, ok in finished.values()
    }
    for action in plan.actions if plan is not None else ():
        if action.key not in finished:
            statuses[action.task_id] = SubtaskStatus.PENDING.value
    return {"plan": plan.to_document() if plan is not None else {}, "statuses": statuses}
