"""Completion from evidence: the record's verdict on a task, whatever the model says."""

from __future__ import annotations

from typing import Any

from bot.record.ending import stored_quality
from bot.record.evidence import judge, unresolved_failures
from bot.record.plan import parse_plan
from bot.record.state import ActionRecord, ActionStatus
from tests.agent import docs

PLAN = parse_plan(
    docs.plan(
        [
            docs.action("task_1", "read_file", arguments={"path": "README.md"}),
            docs.action("task_2", "write_file"),
        ]
    )
)
PASSED_GATE: dict[str, Any] = {
    "result": "passed",
    "passed": True,
    "lint": {"command": ["make", "lint"], "status": "passed", "counts": {"errors": 0}},
    "test": {"command": ["pytest", "-q"], "status": "passed", "counts": {"passed": 4}},
    "feedback": "Quality gate passed.",
}
FAILED_GATE: dict[str, Any] = {
    "result": "failed",
    "passed": False,
    "lint": {"command": ["make", "lint"], "status": "passed", "counts": {}},
    "test": {"command": ["pytest", "-q"], "status": "failed", "counts": {"failed": 1}},
    "feedback": "Tests failed: `pytest -q` failed (exit code 1).\nFix these.",
}


def record(key: str, tool: str, ok: bool, *, changed: bool = False, **kw: Any) -> ActionRecord:
    status = ActionStatus.DONE if ok else ActionStatus.FAILED
    task_id = kw.pop("task_id", key)
    output = "fine" if ok else "invalid arguments: 'content' is required"
    return ActionRecord(key, task_id, tool, status=status, changed=changed, output=output, **kw)


def test_failed_actions_are_problems_whatever_the_model_claims() -> None:
    records = [record("task_1", "read_file", False), record("task_2", "write_file", False)]
    verdict = judge(records, PLAN, {}, None)
    assert not verdict.agrees
    assert verdict.problems[:2] == (
        "[task_1] read_file failed: invalid arguments: 'content' is required",
        "[task_2] write_file failed: invalid arguments: 'content' is required",
    )
    assert "no action of the plan succeeded" in verdict.problems


def test_a_failure_superseded_by_a_successful_retry_of_the_same_step_is_resolved() -> None:
    records = [
        record("task_1", "read_file", False),
        record("task_1b", "search_files", True, task_id="task_1"),
        record("task_2", "write_file", True, changed=True),
    ]
    assert unresolved_failures(records, PLAN) == []
    verdict = judge(records, PLAN, {"branch": "agent/1"}, PASSED_GATE)
    assert verdict.agrees, verdict.problems


def test_a_step_a_revision_dropped_is_resolved_but_one_it_kept_is_not() -> None:
    revised = parse_plan(docs.plan([docs.action("task_3", "write_file")]), revision=1)
    dropped = record("task_1", "read_file", False)
    assert unresolved_failures([dropped], revised) == []
    kept = record("task_3", "write_file", False, revision=1)
    assert unresolved_failures([kept], revised) == [kept]


def test_changes_not_pushed_and_a_failed_gate_are_problems() -> None:
    records = [record("task_1", "read_file", True), record("task_2", "write_file", True,
                                                                 changed=True)]  # fmt: skip
    assert judge(records, PLAN, {}, None).problems == (
        "the changes were not pushed to the bot's branch",
    )
    failed = judge(records, PLAN, {"branch": "agent/1"}, FAILED_GATE)
    assert failed.problems == ("the quality gate failed: Tests failed: `pytest -q` failed "
                               "(exit code 1).",)  # fmt: skip
    not_configured = dict(PASSED_GATE, result="not_configured", passed=False)
    assert judge(records, PLAN, {"branch": "agent/1"}, not_configured).agrees


def test_each_criterion_gets_its_evidence_and_a_false_citation_is_a_problem() -> None:
    records = [record("task_1", "read_file", True), record("task_2", "write_file", True,
                                                                 changed=True)]  # fmt: skip
    criterion = PLAN.goal.success_criteria[0]
    cited = judge(records, PLAN, {"branch": "b"}, PASSED_GATE, cited={criterion: "gate.test"})
    [item] = cited.criteria
    assert item.confirmed and item.evidence == "quality gate test `pytest -q`: passed (4 passed)"
    by_action = judge(records, PLAN, {"branch": "b"}, None, cited={criterion: "[task_2]"})
    assert (
        by_action.criteria[0].confirmed and "[task_2] write_file" in by_action.criteria[0].evidence
    )
    records[0] = record("task_1", "read_file", False)
    records.append(record("task_1c", "read_file", True, task_id="task_1"))
    false = judge(records, PLAN, {"branch": "b"}, None, cited={criterion: "task_1"})
    assert not false.agrees
    assert false.problems[0].startswith(f"the evidence cited for “{criterion}” did not hold")
    uncited = judge(records, PLAN, {"branch": "b"}, PASSED_GATE)
    assert not uncited.criteria[0].confirmed and "quality gate test" in uncited.criteria[0].evidence


def test_a_delivery_kept_by_an_earlier_version_still_tells_the_gate() -> None:
    assert stored_quality({"quality": PASSED_GATE, "finished": True}) is PASSED_GATE
    old_failed = stored_quality({"branch": "b", "quality_passed": False, "finished": True})
    assert old_failed is not None
    assert judge([record("task_1", "read_file", True)], PLAN, {"branch": "b"}, old_failed).problems
    assert stored_quality({"branch": "b", "finished": True}) is None


def test_changes_that_left_nothing_to_push_are_not_unpushed_changes() -> None:
    # A command counts as a change (it may have written anything); when the delivery found
    # the workspace the same as the base, there was nothing to push.
    commands = parse_plan(docs.plan([docs.action("task_1", "run_command")]))
    records = [record("task_1", "run_command", True, changed=True)]
    assert judge(records, commands, {"workspace_changed": False}, None).agrees
    unpushed = judge(records, commands, {"workspace_changed": True}, None)
    assert unpushed.problems == ("the changes were not pushed to the bot's branch",)
