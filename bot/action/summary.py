"""What a run says when it ends: the step's outputs (``GITHUB_OUTPUT``) and its summary
(``GITHUB_STEP_SUMMARY``, Markdown: the status comment's own view of the task, with the
plan checklist, the quality gate, tokens and cost). Rendering is pure; the two writers
append to the runner's files."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from bot.comments.status import StatusView
from bot.events import IssueRef, TaskState
from bot.llm.prices import dollars
from bot.redact import redact


class Conclusion(StrEnum):
    """The step's ``conclusion`` output."""

    DONE = "done"
    NEEDS_HUMAN = "needs_human"
    WAITING = "waiting"  # for people (approval, answers), paused, or queued for the next run
    STOPPED = "stopped"
    FAILED = "failed"
    SKIPPED = "skipped"  # no task ran: the event was ignored, refused or only answered


_BY_STATE = {
    TaskState.DONE: Conclusion.DONE,
    TaskState.NEEDS_HUMAN: Conclusion.NEEDS_HUMAN,
    TaskState.AWAITING_INPUT: Conclusion.WAITING,
    TaskState.AWAITING_APPROVAL: Conclusion.WAITING,
    TaskState.PAUSED: Conclusion.WAITING,
    TaskState.QUEUED: Conclusion.WAITING,
    TaskState.STOPPED: Conclusion.STOPPED,
    TaskState.FAILED: Conclusion.FAILED,
    TaskState.RUNNING: Conclusion.FAILED,  # a run that did not come to rest
}


def conclusion_of(state: TaskState) -> Conclusion:
    return _BY_STATE[state]


@dataclass
class Result:
    """How this run ended, and what of its task to show."""

    conclusion: Conclusion
    reason: str = ""
    issue: IssueRef | None = None
    task_id: str = ""
    state: TaskState | None = None
    snapshot: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return 1 if self.conclusion is Conclusion.FAILED else 0


def outputs(result: Result) -> dict[str, str]:
    links = result.snapshot.get("links") or {}
    cost = float(result.snapshot.get("cost") or 0.0)
    return {
        "conclusion": result.conclusion.value,
        "branch": str(links.get("branch", "")),
        "change_request_url": str(links.get("change_request_url", "")),
        "tokens": str(int(result.snapshot.get("total_tokens") or 0)),
        "cost": f"{cost:.6f}".rstrip("0").rstrip(".") if cost else "0",
    }


def summary_markdown(
    result: Result, *, language: str, run_url: str = "", secrets: tuple[str, ...] = ()
) -> str:
    """The step summary: a headline, the status comment's view of the task, notes."""
    lines = [f"## Coding agent: {result.conclusion.value}", ""]
    if result.issue is not None:
        issue = result.issue
        where = issue.web_url or f"{issue.repo.full_name}#{issue.number}"
        title = f" {issue.title}" if issue.title else ""
        lines += [f"Issue: {where}{title}", ""]
    if result.reason:
        lines += [result.reason, ""]
    if result.state is not None:
        view = StatusView(state=result.state)
        view.restore(result.snapshot)
        lines += [view.render(language), ""]
        cost = float(result.snapshot.get("cost") or 0.0)
        tokens = int(result.snapshot.get("total_tokens") or 0)
        lines += [f"Task `{result.task_id}` · tokens {tokens:,} · cost "
                  f"{dollars(cost) if cost else 'not priced'}", ""]  # fmt: skip
    for note in result.notes:
        lines.append(f"- {note}")
    if result.notes:
        lines.append("")
    if run_url:
        lines.append(f"Run: {run_url}")
    return redact("\n".join(lines).strip() + "\n", known=secrets)


def write_outputs(path: Path | None, values: dict[str, str]) -> None:
    """Append ``values`` to the runner's output file, each in the multi-line form with a
    delimiter the value cannot hold."""
    if path is None:
        return
    parts = []
    for name, value in values.items():
        delimiter = f"ghadelimiter_{uuid.uuid4().hex}"
        parts.append(f"{name}<<{delimiter}\n{value}\n{delimiter}\n")
    with path.open("a", encoding="utf-8") as file:
        file.write("".join(parts))


def write_summary(path: Path | None, text: str) -> None:
    if path is None:
        return
    with path.open("a", encoding="utf-8") as file:
        file.write(text)
