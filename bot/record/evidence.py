"""What the record shows: compact results for prompts, and completion from evidence.
Pure: no I/O.

``compact_results`` renders executed actions within a token budget, newest in full,
older ones as one line; a call and its result are never separated. ``done_text`` and
``remaining_text`` are what reflection and revision prompts show of the run.

The model's completion document is one input, not the verdict (docs/planning.md#completion).
``judge`` reads the record: the actions that mattered succeeded (a failed action counts
as resolved when a later call of the same subtask, or the same call again, succeeded, or
a revision dropped its subtask; the quality gate's fix calls are judged by the gate), the
changes were pushed to the bot's branch, and the quality gate passed where one is
configured. Each success criterion of the goal is listed with its evidence: the action or
gate step the model cited when the record confirms it, else the record's best evidence.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bot.llm.tokens import count_tokens
from bot.record.plan import PlanDocument
from bot.record.plan_rules import pending_actions
from bot.record.state import ActionRecord
from bot.text import clip
from bot.tools.quality import GateResult, StepStatus, gate_steps, stored_result

GATE_PREFIX = "gate."  # evidence naming a gate step: gate.lint, gate.test
GATE_TASK = "quality_gate"  # the task id of the quality gate's fix calls
ONE_LINE_CHARS = 160
REMAINING_LINES = 8


def _arguments_brief(arguments: dict[str, Any]) -> str:
    parts = []
    for key, value in arguments.items():
        text = value if isinstance(value, str) else repr(value)
        text = text.replace("\n", " ")
        parts.append(f"{key}={clip(text, 40, note='...')}")
    return ", ".join(parts)


def one_line(record: ActionRecord) -> str:
    text = f"(summary) {record.summary}" if record.summary else record.output
    text = text.strip().replace("\n", " ")
    text = clip(text, ONE_LINE_CHARS, note="...", fit=True)
    return (
        f"- [{record.key}] {record.tool}({_arguments_brief(record.arguments)}) "
        f"-> {record.status.value}: {text}"
    )


def full_entry(record: ActionRecord, max_chars: int) -> str:
    output = clip(record.output, max_chars)
    if record.summary and len(record.output) > max_chars:
        output = f"(summary) {record.summary}\n{output}"
    return (
        f"- [{record.key}] {record.tool}({_arguments_brief(record.arguments)}) "
        f"-> {record.status.value}:\n{output}"
    )


def compact_results(
    records: Sequence[ActionRecord],
    *,
    budget_tokens: int,
    count: Callable[[str], int],
    detail_chars: int = 6000,
) -> str:
    """Executed actions, oldest first, within ``budget_tokens``: the newest in full
    while they fit, older ones as one line each, the oldest dropped last of all."""
    entries: list[str] = []
    used = 0
    detailed = True
    for record in reversed(records):
        entry = full_entry(record, detail_chars) if detailed else one_line(record)
        cost = count(entry)
        if detailed and used + cost > budget_tokens:
            detailed = False
            entry = one_line(record)
            cost = count(entry)
        if used + cost > budget_tokens:
            entries.append(f"- ({len(records) - len(entries)} earlier actions omitted)")
            break
        entries.append(entry)
        used += cost
    return "\n".join(reversed(entries)) if entries else "(no actions yet)"


def done_text(records: Sequence[ActionRecord]) -> str:
    """What the run did so far, for a reflection or revision prompt."""
    return compact_results(records, budget_tokens=500, count=count_tokens)


def remaining_text(plan: PlanDocument | None, finished: set[str]) -> str:
    """The plan's actions not finished yet, a few lines at most."""
    if plan is None:
        return ""
    pending = pending_actions(plan, finished)
    lines = [f"- [{a.key}] {a.tool}: {a.purpose}" for a in pending[:REMAINING_LINES]]
    if len(pending) > REMAINING_LINES:
        lines.append(f"- ... {len(pending) - REMAINING_LINES} more")
    return "\n".join(lines) or "(nothing left)"


# --- completion from evidence --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Criterion:
    text: str
    evidence: str  # "" when the record holds none
    confirmed: bool  # the evidence is a successful action or a passed gate step


@dataclass(frozen=True, slots=True)
class Verdict:
    problems: tuple[str, ...]  # why the record does not show the goal achieved
    criteria: tuple[Criterion, ...]
    gate: GateResult | None  # None: the gate did not run

    @property
    def agrees(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {
            "problems": list(self.problems),
            "criteria": [
                {"criterion": c.text, "evidence": c.evidence, "confirmed": c.confirmed}
                for c in self.criteria
            ],
            "gate": self.gate.value if self.gate is not None else None,
        }


def _resolved(
    record: ActionRecord,
    later: Sequence[ActionRecord],
    plan: PlanDocument | None,
    open_loop: bool = False,
) -> bool:
    for other in later:
        if other.ok and (
            open_loop  # the model saw the failure and went on: a later success answers it
            or other.task_id == record.task_id
            or (other.tool == record.tool and other.arguments == record.arguments)
        ):
            return True
    if plan is None or record.revision >= plan.revision:
        return False
    return record.task_id not in {a.task_id for a in plan.actions}  # a revision dropped it


def unresolved_failures(
    records: Sequence[ActionRecord], plan: PlanDocument | None, *, open_loop: bool = False
) -> list[ActionRecord]:
    """Failed actions no later success or revision made up for (gate fixes excluded); in
    the open tool loop, any later successful call makes up for a failed one."""
    out = []
    for index, record in enumerate(records):
        if record.ok or not record.finished or record.task_id == GATE_TASK:
            continue
        if not _resolved(record, records[index + 1 :], plan, open_loop):
            out.append(record)
    return out


def _first_line(text: str) -> str:
    return (text.strip().splitlines() or ["(no output)"])[0][:160]


def _step_line(step: Mapping[str, Any]) -> str:
    counts = ", ".join(f"{v} {k}" for k, v in (step.get("counts") or {}).items())
    command = f" `{step['command']}`" if step.get("command") else ""
    return f"quality gate {step['name']}{command}: {step['status']}" + (
        f" ({counts})" if counts else ""
    )


def _cited(
    reference: str, records: Mapping[str, ActionRecord], quality: Mapping[str, Any] | None
) -> tuple[str, bool] | None:
    """What a cited reference points at, and whether it holds; None when it names nothing."""
    if reference.startswith(GATE_PREFIX) and quality is not None:
        name = reference.removeprefix(GATE_PREFIX)
        for step in gate_steps(quality):
            if step["name"] == name:
                return _step_line(step), step["status"] == StepStatus.PASSED.value
        return None
    record = records.get(reference.strip("[] "))
    if record is None:
        return None
    return one_line(record).removeprefix("- "), record.ok


def _fallback(records: Sequence[ActionRecord], quality: Mapping[str, Any] | None) -> str:
    if quality is not None:
        passed = [s for s in gate_steps(quality) if s["status"] == StepStatus.PASSED.value]
        if passed:
            return _step_line(passed[-1])
    changed = [r for r in records if r.ok and r.changed]
    return one_line(changed[-1]).removeprefix("- ") if changed else ""


def _criteria(
    plan: PlanDocument | None,
    records: Sequence[ActionRecord],
    quality: Mapping[str, Any] | None,
    cited: Mapping[str, str],
) -> tuple[list[Criterion], list[str]]:
    criteria: list[Criterion] = []
    problems: list[str] = []
    by_key = {r.key: r for r in records}
    for text in plan.goal.success_criteria if plan else ():
        reference = cited.get(text, "")
        found = _cited(reference, by_key, quality) if reference else None
        if found is not None and not found[1]:
            problems.append(f"the evidence cited for “{text}” did not hold: {found[0]}")
        if found is not None:
            criteria.append(Criterion(text, found[0], found[1]))
        else:
            evidence = _fallback(records, quality)
            criteria.append(Criterion(text, evidence, False))
    return criteria, problems


def judge(
    records: Sequence[ActionRecord],
    plan: PlanDocument | None,
    delivery: Mapping[str, Any],
    quality: Mapping[str, Any] | None,
    cited: Mapping[str, str] | None = None,
    *,
    open_loop: bool = False,
) -> Verdict:
    """The record's verdict on the task. ``delivery``: the delivered links (a ``branch``
    when something was pushed); ``quality``: the gate's stored report (None: not run);
    ``cited``: success criterion -> the action key or ``gate.<step>`` the model cited;
    ``open_loop``: the steps of the open tool loop (``planning.enabled: false``)."""
    problems = [
        f"[{r.key}] {r.tool} failed: {_first_line(r.output)}"
        for r in unresolved_failures(records, plan, open_loop=open_loop)
    ]
    if not any(r.ok for r in records if r.task_id != GATE_TASK):
        problems.append("no action of the plan succeeded")
    # A command counts as a change whatever it did; the delivery saw whether the workspace
    # really differs (``workspace_changed``), and nothing to push is nothing unpushed.
    changed = any(r.ok and r.changed for r in records)
    if changed and delivery.get("workspace_changed", True) and not delivery.get("branch"):
        problems.append("the changes were not pushed to the bot's branch")
    gate = stored_result(quality)
    if gate is GateResult.FAILED:
        feedback = _first_line(str((quality or {}).get("feedback", "")))
        problems.append(f"the quality gate failed: {feedback}")
    criteria, cited_problems = _criteria(plan, records, quality, cited or {})
    return Verdict(tuple(problems + cited_problems), tuple(criteria), gate)
