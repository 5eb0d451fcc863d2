"""The status comment's view: folded from progress events, rendered. Pure."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from bot.agent.context import ProgressEvent, ProgressKind
from bot.comments.render import render
from bot.comments.wording import gate_text, phase_label, waiting_label
from bot.llm.prices import dollars
from bot.storage.base import TaskState

WAITING_STATES = frozenset(
    {TaskState.AWAITING_INPUT, TaskState.AWAITING_APPROVAL, TaskState.PAUSED}
)
# What the status comment links to. Never a path on the bot's host.
LINK_KEYS = frozenset({"branch", "change_request_url", "report_url"})
ICONS = {"pending": "⬜", "running": "🔄", "done": "✅", "failed": "❌", "skipped": "⏭️"}


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

    def apply(self, event: ProgressEvent) -> None:
        data = event.data
        kind = event.kind
        if kind is ProgressKind.PHASE:
            self.phase = str(data.get("phase", self.phase))
        elif kind in (ProgressKind.PLAN, ProgressKind.REVISION) and isinstance(
            data.get("plan"), dict
        ):
            self.plan = data["plan"]
            self.statuses.update(data.get("statuses") or {})
            if kind is ProgressKind.REVISION:
                self.revisions = int(data.get("number", self.revisions + 1))
        elif kind is ProgressKind.ACTION and data.get("task_id"):
            self.statuses[str(data["task_id"])] = str(data.get("status", "running"))
        elif kind is ProgressKind.USAGE:
            self.tokens = int(data.get("total_tokens", self.tokens))
            self.cached_tokens = int(data.get("cached_tokens", self.cached_tokens))
            self.cost = float(data.get("cost", self.cost))
        elif kind is ProgressKind.LINKS:
            if isinstance(data.get("gate"), dict):
                self.gate = dict(data["gate"])
            shown = {k: v for k, v in data.items() if k in LINK_KEYS}
            self.links.update({k: str(v) for k, v in shown.items() if v is not None and v != ""})
        if kind is ProgressKind.CLARIFICATION:
            self.waiting = {"subject": "clarification"}
        elif kind is ProgressKind.APPROVAL_REQUEST:
            keys = ("subject", "what", "tool", "number")
            self.waiting = {k: data[k] for k in keys if data.get(k)}
        elif kind in (ProgressKind.ACTION, ProgressKind.PHASE):
            self.waiting = {}

    def restore(self, snapshot: dict[str, Any]) -> None:
        """Take over what a checkpoint says (``bot.agent.snapshot``): a restarted worker's
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

    def subtasks(self) -> list[dict[str, Any]]:
        decomposition = self.plan.get("task_decomposition") or {}
        items = decomposition.get("subtasks") if isinstance(decomposition, dict) else None
        return [s for s in items or [] if isinstance(s, dict)]

    def render(self, language: str) -> str:
        checklist = []
        for sub in self.subtasks():
            status = self.statuses.get(str(sub.get("id")), "pending")
            checklist.append(
                {
                    "status": status,
                    "icon": ICONS.get(status, "⬜"),
                    "description": str(sub.get("description", sub.get("id", ""))),
                }
            )
        done = sum(1 for item in checklist if item["status"] == "done")
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
