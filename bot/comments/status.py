"""The status comment's view: folded from progress events, rendered. Pure."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from bot.comments.render import render
from bot.comments.wording import gate_text, phase_label, waiting_label
from bot.events import TaskState
from bot.llm.prices import dollars
from bot.run_events import (
    ActionProgress,
    ApprovalAsked,
    ClarificationAsked,
    CourseChanged,
    LinksShown,
    PhaseChanged,
    PlanMade,
    ProgressEvent,
    Revised,
    SubtaskStatus,
    UsageReport,
)

WAITING_STATES = frozenset(
    {TaskState.AWAITING_INPUT, TaskState.AWAITING_APPROVAL, TaskState.PAUSED}
)
# What the status comment links to. Never a path on the bot's host.
LINK_KEYS = frozenset({"branch", "change_request_url", "report_url"})
COURSE_SHOWN = 5  # the latest changes of course the status comment lists
ICONS: dict[str, str] = {
    SubtaskStatus.PENDING: "⬜",
    SubtaskStatus.RUNNING: "🔄",
    SubtaskStatus.DONE: "✅",
    SubtaskStatus.FAILED: "❌",
    SubtaskStatus.SKIPPED: "⏭️",
}


@dataclass
class StatusView:
    state: TaskState = TaskState.QUEUED
    phase: str = ""
    plan: dict[str, Any] = field(default_factory=dict)
    statuses: dict[str, str] = field(default_factory=dict)
    tokens: int = 0
    cached_tokens: int = 0  # of ``tokens``, read from the provider's prompt cache
    cost: float = 0.0  # US dollars at llm.prices; 0: the model has no price (local)
    revisions: int = 0
    waiting: dict[str, Any] = field(default_factory=dict)  # subject, what, tool, number
    links: dict[str, str] = field(default_factory=dict)
    gate: dict[str, Any] = field(default_factory=dict)  # result, steps (LINKS ``gate``)
    course: list[str] = field(default_factory=list)  # where the bot changed course (COURSE)

    def apply(self, event: ProgressEvent) -> None:
        match event:
            case PhaseChanged():
                self.phase = event.phase
            case PlanMade():
                self.plan = event.plan
                self.statuses.update(event.statuses)
            case Revised() if event.plan is not None:
                self.plan = event.plan
                self.statuses.update(event.statuses)
                self.revisions = event.number
            case ActionProgress() if event.task_id:
                self.statuses[event.task_id] = event.status
            case UsageReport():
                self.tokens = event.total_tokens
                self.cached_tokens = event.cached_tokens
                self.cost = event.cost
            case CourseChanged():
                self.course = [*self.course, event.reason][-COURSE_SHOWN:]
            case LinksShown():
                if event.gate is not None:
                    self.gate = dict(event.gate)
                shown = {"branch": event.branch, "change_request_url": event.change_request_url}
                self.links.update({k: v for k, v in shown.items() if v})
        match event:
            case ClarificationAsked():
                self.waiting = {"subject": "clarification"}
            case ApprovalAsked():
                asked: dict[str, Any] = {"subject": event.subject, "what": event.what,
                                         "tool": event.tool, "number": event.number}  # fmt: skip
                self.waiting = {k: v for k, v in asked.items() if v}
            case ActionProgress() | PhaseChanged():
                self.waiting = {}

    def restore(self, snapshot: dict[str, Any]) -> None:
        """Take over what a checkpoint says (``bot.record.snapshot``): a restarted worker's
        status comment keeps its plan, progress, tokens, revisions, waiting and links."""
        self.phase = str(snapshot.get("phase") or self.phase)
        if isinstance(snapshot.get("plan"), dict):
            self.plan = snapshot["plan"]
        self.statuses.update(snapshot.get("statuses") or {})
        self.tokens = int(snapshot.get("total_tokens", self.tokens))
        self.cached_tokens = int(snapshot.get("cached_tokens", self.cached_tokens))
        self.cost = float(snapshot.get("cost", self.cost))
        self.revisions = int(snapshot.get("revisions", self.revisions))
        waiting = snapshot.get("waiting")
        self.waiting = dict(waiting) if isinstance(waiting, dict) else {}
        links = snapshot.get("links") or {}
        self.links.update({k: str(v) for k, v in links.items() if k in LINK_KEYS})
        if isinstance(snapshot.get("gate"), dict):
            self.gate = dict(snapshot["gate"])
        course = snapshot.get("course")
        if isinstance(course, list):
            self.course = [str(item) for item in course][-COURSE_SHOWN:]

    def subtasks(self) -> list[dict[str, Any]]:
        decomposition = self.plan.get("task_decomposition") or {}
        items = decomposition.get("subtasks") if isinstance(decomposition, dict) else None
        return [s for s in items or [] if isinstance(s, dict)]

    def render(self, language: str) -> str:
        checklist = []
        for sub in self.subtasks():
            status = self.statuses.get(str(sub.get("id")), SubtaskStatus.PENDING)
            checklist.append(
                {
                    "status": status,
                    "icon": ICONS.get(status, "⬜"),
                    "description": str(sub.get("description", sub.get("id", ""))),
                }
            )
        done = sum(1 for item in checklist if item["status"] == SubtaskStatus.DONE)
        return render(
            "status",
            language,
            state=render(f"state_{self.state.value}", language),
            waiting=waiting_label(self.waiting, language) if self.state in WAITING_STATES else "",
            phase=phase_label(self.phase, language),
            done=done,
            total=len(checklist),
            tokens=f"{self.tokens:,}",
            cached=f"{self.cached_tokens:,}" if self.cached_tokens else "",
            cost=dollars(self.cost) if self.cost else "",
            revisions=self.revisions,
            checklist=checklist,
            links=render_links(self.links, language),
            gate=gate_text(self.gate, language),
            course=self.course,
            plan_json=json.dumps(self.plan, ensure_ascii=False, indent=2) if self.plan else "",
        )


def render_links(links: dict[str, str], language: str) -> str:
    if not links:
        return ""
    return render(
        "links",
        language,
        branch=links.get("branch", ""),
        change_request_url=links.get("change_request_url", ""),
        report_url=links.get("report_url", ""),
    )
