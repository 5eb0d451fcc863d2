"""Rules over a plan: validation, scheduling, and which plan an approval binds
(docs/planning.md#plan-validation, #parallel-groups, #waiting). Pure: no I/O.

``validate_plan`` returns every reason to reject a plan (empty: the plan is
acceptable): unknown or policy-forbidden tools, duplicate ids, dangling dependencies,
dependency cycles, too many subtasks. ``next_batch`` returns the actions to run next:
the first ready action in execution order, plus the other ready actions of its
parallel group that do not depend on each other.

In plan-approval mode (the task was started with ``/agent plan``, or
``planning.revision.require_human_approval`` holds for revised plans) a plan runs only
when a person approved exactly that plan: the approval request keeps the digest of the
plan document it showed, an approval stores that digest, and the loop compares it with
the digest of the plan about to run. A revision makes a new digest, so it needs its own
approval. ``/agent approve <plan id>`` may name the plan (its first ``SHOWN_CHARS`` hex
digits or more); a name that is not the waiting plan's approves nothing.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Collection, Iterable
from typing import Any

from bot.record.plan import PlanDocument, PlannedAction, ToolCheck

# An action plan may hold a few actions per subtask; more suggests a runaway plan.
ACTIONS_PER_SUBTASK = 3


def _duplicates(values: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    dupes: list[str] = []
    for value in values:
        if value in seen and value not in dupes:
            dupes.append(value)
        seen.add(value)
    return dupes


def _tool_problems(plan: PlanDocument, check_tool: ToolCheck) -> list[str]:
    problems: list[str] = []
    named = [(f"action {a.key}", a.tool) for a in plan.actions]
    named += [(f"subtask {s.id}", t) for s in plan.subtasks for t in s.required_tools]
    reported: set[str] = set()
    for where, tool in named:
        if not tool:
            problems.append(f"{where} names no tool")
            continue
        decision = check_tool(tool)
        if not decision.allowed and tool not in reported:
            reported.add(tool)
            problems.append(f"{where}: {decision.reason}")
    return problems


def _structure_problems(plan: PlanDocument, max_subtasks: int) -> list[str]:
    problems: list[str] = []
    ids = [s.id for s in plan.subtasks]
    for dupe in _duplicates(ids):
        problems.append(f"duplicate subtask id {dupe!r}")
    if len(ids) > max_subtasks:
        problems.append(f"{len(ids)} subtasks is more than max_subtasks ({max_subtasks})")
    if not plan.actions:
        problems.append("the action plan has no actions")
    if len(plan.actions) > ACTIONS_PER_SUBTASK * max_subtasks:
        problems.append(
            f"{len(plan.actions)} actions is more than {ACTIONS_PER_SUBTASK} x max_subtasks"
        )
    for dupe in _duplicates(plan.execution_order):
        problems.append(f"execution_order lists {dupe!r} twice")
    for action in plan.actions:
        if action.action_type != "tool_call":
            problems.append(f"action {action.key}: unsupported action_type {action.action_type!r}")
    return problems


def _dangling(plan: PlanDocument) -> list[str]:
    known = {s.id for s in plan.subtasks}
    resolvable = known | plan.done_tasks
    problems: list[str] = []
    for task_id in plan.execution_order:
        if task_id not in known and task_id not in plan.done_tasks:
            problems.append(f"execution_order names unknown subtask {task_id!r}")
    for action in plan.actions:
        if action.task_id not in known:
            problems.append(f"action {action.key} belongs to unknown subtask {action.task_id!r}")
    for subtask in plan.subtasks:
        for dep in subtask.dependencies:
            if dep not in resolvable:
                problems.append(f"subtask {subtask.id} depends on unknown subtask {dep!r}")
    for action in plan.actions:
        for dep in action.dependencies:
            if dep not in resolvable:
                problems.append(f"action {action.key} depends on unknown subtask {dep!r}")
    return problems


def dependency_graph(plan: PlanDocument) -> dict[str, set[str]]:
    """Subtask id -> the subtask ids it waits for (its own and its actions' dependencies)."""
    graph: dict[str, set[str]] = {s.id: set(s.dependencies) for s in plan.subtasks}
    for action in plan.actions:
        graph.setdefault(action.task_id, set()).update(action.dependencies)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One dependency cycle as a path (first node repeated at the end), or None."""
    state: dict[str, int] = {}  # 1 = on the current path, 2 = finished
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                return [*path[path.index(dep) :], dep]
            if dep in graph and dep not in state:
                found = visit(dep)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def validate_plan(plan: PlanDocument, *, check_tool: ToolCheck, max_subtasks: int) -> list[str]:
    """Every reason to reject ``plan``; an empty list means it may run."""
    problems = _structure_problems(plan, max_subtasks)
    problems += _dangling(plan)
    cycle = find_cycle(dependency_graph(plan))
    if cycle:
        problems.append("dependency cycle: " + " -> ".join(cycle))
    problems += _tool_problems(plan, check_tool)
    return problems


# --- scheduling --------------------------------------------------------------------------------


def ordered_actions(plan: PlanDocument) -> list[PlannedAction]:
    """Actions in execution order (tasks the order omits come after, in plan order)."""
    rank = {task_id: index for index, task_id in enumerate(plan.execution_order)}
    last = len(rank)
    indexed = list(enumerate(plan.actions))
    indexed.sort(key=lambda pair: (rank.get(pair[1].task_id, last), pair[0]))
    return [action for _, action in indexed]


def _waits_for(plan: PlanDocument, action: PlannedAction) -> set[str]:
    subtask = plan.subtask(action.task_id)
    deps = set(action.dependencies)
    if subtask is not None:
        deps.update(subtask.dependencies)
    return deps - plan.done_tasks


def _ready(plan: PlanDocument, action: PlannedAction, finished: Collection[str]) -> bool:
    for dep in _waits_for(plan, action):
        if any(a.task_id == dep and a.key not in finished for a in plan.actions):
            return False
    return True


def next_batch(
    plan: PlanDocument, finished: Collection[str], *, max_parallel: int
) -> list[PlannedAction]:
    """The actions to run now; empty when every action has finished."""
    pending = [a for a in ordered_actions(plan) if a.key not in finished]
    first = next((a for a in pending if _ready(plan, a, finished)), None)
    if first is None:
        return []
    batch = [first]
    if first.parallel_group is None:
        return batch
    for action in pending:
        if len(batch) >= max_parallel:
            break
        if action is first or action.parallel_group != first.parallel_group:
            continue
        if _ready(plan, action, finished) and not _depends_on_batch(plan, action, batch):
            batch.append(action)
    return batch


def _depends_on_batch(
    plan: PlanDocument, action: PlannedAction, batch: list[PlannedAction]
) -> bool:
    waits = _waits_for(plan, action)
    return any(member.task_id in waits or member.task_id == action.task_id for member in batch)


def pending_actions(plan: PlanDocument, finished: Collection[str]) -> list[PlannedAction]:
    return [a for a in ordered_actions(plan) if a.key not in finished]


# --- which plan an approval binds ---------------------------------------------------------

SHOWN_CHARS = 10
_PLAN_ID = re.compile(r"[0-9a-f]{6,64}")


def plan_digest(document: dict[str, Any]) -> str:
    """SHA-256 of the plan document in a canonical JSON form."""
    canonical = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def plan_id(digest: str) -> str:
    """The short id people see and may quote."""
    return digest[:SHOWN_CHARS]


def named_plan(args: str) -> str | None:
    """The plan id an ``/agent approve`` names, if its first word looks like one."""
    words = args.split()
    if not words:
        return None
    word = words[0].strip("`").lower()
    return word if _PLAN_ID.fullmatch(word) else None


def names_other_plan(args: str, digest: str) -> bool:
    """``/agent approve <id>`` for a plan that is not ``digest`` (an older one)."""
    named = named_plan(args)
    return named is not None and bool(digest) and not digest.startswith(named)


def needs_plan_approval(*, plan_only: bool, require_for_revisions: bool, revised: bool) -> bool:
    return plan_only or (require_for_revisions and revised)
