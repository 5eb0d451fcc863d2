"""The plan model: parsing, validation (seed 12.1.2) and scheduling (seed 11.2.1)."""

from __future__ import annotations

from typing import Any

import pytest

from bot.record.plan import PlanFormatError, parse_plan, revised_plan
from bot.record.plan_rules import find_cycle, next_batch, ordered_actions, validate_plan
from bot.tools.policy import ToolPolicy
from tests.agent import docs

KNOWN = {"read", "write", "list", "delete_repo"}
POLICY = ToolPolicy(forbidden=("delete_*",))


def check(name: str) -> Any:
    from bot.tools.policy import PolicyDecision

    if name not in KNOWN:
        return PolicyDecision(False, False, f"unknown tool {name!r}")
    return POLICY.decide(name)


def problems(doc: dict[str, Any], max_subtasks: int = 10) -> list[str]:
    return validate_plan(parse_plan(doc), check_tool=check, max_subtasks=max_subtasks)


def test_a_good_plan_parses_with_stable_action_keys() -> None:
    doc = docs.plan(
        [
            docs.action("t1", "read", arguments={"path": "a"}),
            docs.action("t1", "read", arguments={"path": "b"}),
            docs.action("t2", "write", group=2, dependencies=["t1"]),
        ]
    )
    plan = parse_plan(doc)

    assert [a.key for a in plan.actions] == ["t1", "t1.2", "t2"]
    assert plan.actions[2].parallel_group == 2 and plan.actions[2].dependencies == ("t1",)
    assert plan.goal.success_criteria == ("README.md has an Installation section",)
    assert problems(doc) == []
    again = parse_plan(plan.to_document())
    assert again == plan


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({}, "goal_understanding is missing"),
        (
            {**docs.plan([docs.action("t", "read")]), "task_decomposition": {"subtasks": "x"}},
            "subtasks is missing or not a list",
        ),
        ({**docs.plan([docs.action("t", "read")]), "action_plan": {}}, "actions is missing"),
        (
            {**docs.plan([docs.action("t", "read")]), "goal_understanding": {"main_objective": ""}},
            "main_objective is empty",
        ),
        (docs.plan([{**docs.action("t", "read"), "parallel_group": "soon"}]), "parallel_group"),
    ],
)
def test_malformed_documents_raise_a_clear_error(doc: dict[str, Any], message: str) -> None:
    with pytest.raises(PlanFormatError, match=message):
        parse_plan(doc)


def test_unknown_and_forbidden_tools_are_rejected() -> None:
    doc = docs.plan([docs.action("t1", "teleport"), docs.action("t2", "delete_repo")])

    found = problems(doc)

    assert "action t1: unknown tool 'teleport'" in found
    assert any("delete_repo is forbidden by the policy" in p for p in found)


def test_duplicate_ids_dangling_dependencies_and_too_many_subtasks() -> None:
    subtasks = [
        {"id": "t1", "description": "", "dependencies": [], "required_tools": []},
        {"id": "t1", "description": "", "dependencies": ["ghost"], "required_tools": []},
        {"id": "t2", "description": "", "dependencies": [], "required_tools": []},
    ]
    doc = docs.plan(
        [docs.action("t1", "read"), docs.action("t3", "read", dependencies=["phantom"])],
        subtasks=subtasks,
        order=["t1", "t1", "nowhere"],
    )

    found = problems(doc, max_subtasks=2)

    assert "duplicate subtask id 't1'" in found
    assert "3 subtasks is more than max_subtasks (2)" in found
    assert "execution_order lists 't1' twice" in found
    assert "execution_order names unknown subtask 'nowhere'" in found
    assert "action t3 belongs to unknown subtask 't3'" in found
    assert "subtask t1 depends on unknown subtask 'ghost'" in found
    assert "action t3 depends on unknown subtask 'phantom'" in found


def test_cycles_are_found_with_their_path() -> None:
    doc = docs.plan(
        [docs.action("a", "read"), docs.action("b", "read"), docs.action("c", "read")],
        dependencies={"a": ["c"], "b": ["a"], "c": ["b"]},
    )

    assert "dependency cycle: a -> c -> b -> a" in problems(doc)
    assert find_cycle({"x": {"x"}}) == ["x", "x"]
    assert find_cycle({"x": {"y"}, "y": set()}) is None


def test_a_plan_without_actions_or_with_other_action_types_is_rejected() -> None:
    doc = docs.plan([docs.action("t1", "read")])
    doc["action_plan"]["actions"] = []
    assert "the action plan has no actions" in problems(doc)
    odd = docs.plan([{**docs.action("t1", "read"), "action_type": "think"}])
    assert "action t1: unsupported action_type 'think'" in problems(odd)


def test_next_batch_follows_order_and_dependencies() -> None:
    plan = parse_plan(
        docs.plan(
            [docs.action("t2", "write"), docs.action("t1", "read")],
            dependencies={"t2": ["t1"]},
            order=["t2", "t1"],
        )
    )

    assert [a.key for a in ordered_actions(plan)] == ["t2", "t1"]
    assert [a.key for a in next_batch(plan, set(), max_parallel=4)] == ["t1"]
    assert [a.key for a in next_batch(plan, {"t1"}, max_parallel=4)] == ["t2"]
    assert next_batch(plan, {"t1", "t2"}, max_parallel=4) == []


def test_a_parallel_group_batches_independent_actions_up_to_the_limit() -> None:
    plan = parse_plan(
        docs.plan(
            [
                docs.action("a", "read", group=1),
                docs.action("b", "read", group=1),
                docs.action("c", "read", group=1, dependencies=["a"]),
                docs.action("d", "read", group=1),
                docs.action("e", "read", group=2),
            ]
        )
    )

    assert [a.key for a in next_batch(plan, set(), max_parallel=8)] == ["a", "b", "d"]
    assert [a.key for a in next_batch(plan, set(), max_parallel=2)] == ["a", "b"]
    assert [a.key for a in next_batch(plan, {"a", "b", "d"}, max_parallel=8)] == ["c"]


def test_a_revised_plan_keeps_finished_subtasks_resolvable_and_keys_unique() -> None:
    current = parse_plan(docs.plan([docs.action("t1", "read"), docs.action("t2", "write")]))
    updated = {"actions": [docs.action("t2", "write", dependencies=["t1"])]}

    plan = revised_plan(current, updated, revision=2, done_tasks={"t1", "t2"})

    assert [a.key for a in plan.actions] == ["r2/t2"]
    assert plan.done_tasks == frozenset({"t1"})  # t2 is to be done again
    assert validate_plan(plan, check_tool=check, max_subtasks=10) == []
    assert [a.key for a in next_batch(plan, set(), max_parallel=1)] == ["r2/t2"]
    new_task = revised_plan(
        current, {"actions": [docs.action("t9", "list")]}, revision=3, done_tasks=()
    )
    assert new_task.subtask("t9") is not None
