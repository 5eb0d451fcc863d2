"""Pure decisions: planning granularity, when to reflect, what the inbox says."""

from __future__ import annotations

import pytest

from bot.agent.planning import classify_complexity, planning_level
from bot.config import ComplexityThreshold, ReflectionSettings
from bot.record.inbox import Decision, read_inbox
from bot.record.judgement import (
    periodic_interval,
    should_reflect,
    unexpected_result,
    unmet_precondition,
)
from bot.record.plan import Complexity, PlannedAction, parse_plan
from bot.record.state import ActionRecord, ActionStatus, Feedback
from bot.storage.base import TaskMessage
from tests.agent import docs
from tests.agent.conftest import planning_settings


@pytest.mark.parametrize(
    ("tokens", "expected"), [(1, "simple"), (100, "simple"), (101, "moderate"), (501, "complex")]
)
def test_complexity_follows_the_thresholds(tokens: int, expected: str) -> None:
    assert classify_complexity(tokens, ComplexityThreshold()) == expected


def test_the_level_follows_complexity_only_when_auto_adjusting() -> None:
    long_text = "word " * 800
    assert planning_level(planning_settings(), "Fix a typo") == ("simple", "minimal")
    assert planning_level(planning_settings(), long_text) == ("complex", "detailed")
    fixed = planning_settings(auto_adjust_level=False, decomposition_level="detailed")
    assert planning_level(fixed, "Fix a typo") == ("simple", "detailed")


def _record(ok: bool, *, changed: bool = False, output: str = "text") -> ActionRecord:
    status = ActionStatus.DONE if ok else ActionStatus.FAILED
    return ActionRecord("k", "t", "tool", status=status, output=output, changed=changed)


def test_reflection_triggers() -> None:
    settings = ReflectionSettings(trigger_interval=3)
    assert should_reflect(settings, _record(False), differs=False, since_last=0) == "error"
    assert should_reflect(settings, _record(True), differs=True, since_last=0) == "unexpected"
    assert should_reflect(settings, _record(True), differs=False, since_last=3) == "periodic"
    assert should_reflect(settings, _record(True), differs=False, since_last=2) is None
    assert should_reflect(settings, _record(True), differs=False, since_last=9, interval=0) is None
    assert should_reflect(settings, _record(True), differs=False, since_last=4, interval=5) is None
    assert should_reflect(settings, _record(True), differs=False, since_last=5, interval=5)
    quiet = ReflectionSettings(trigger_on_error=False, trigger_interval=0)
    assert should_reflect(quiet, _record(False), differs=False, since_last=99) is None
    off = ReflectionSettings(enabled=False)
    assert should_reflect(off, _record(False), differs=True, since_last=99) is None


def test_a_result_differs_from_the_plan_when_a_write_changed_nothing_or_nothing_came_back() -> None:
    action = PlannedAction("k", "t", "tool", expected_outcome="the file text")
    write = _record(True, changed=False)
    write.writes = True
    assert unexpected_result(action, write) == "the write changed nothing"
    write.changed = True
    assert unexpected_result(action, write) == ""
    assert "empty" in unexpected_result(action, _record(True, output="  "))
    assert unexpected_result(action, _record(False, output="")) == ""
    assert unexpected_result(None, _record(True, output="")) == ""


def test_a_write_that_left_its_path_alone_or_changed_another_is_unexpected() -> None:
    action = PlannedAction("k", "t", "write_file")
    record = _record(True, changed=True)
    record.unchanged_paths = ["README.md"]
    assert unexpected_result(action, record) == "it meant to change README.md, which is unchanged"
    record.unchanged_paths, record.unexpected_paths = [], ["setup.py"]
    assert unexpected_result(action, record) == (
        "it changed setup.py, which it did not mean to change"
    )


def test_periodic_reflection_follows_the_tasks_size() -> None:
    auto = planning_settings()  # auto_adjust_level, trigger_interval 3
    assert periodic_interval(auto, Complexity.SIMPLE) == 0
    assert periodic_interval(auto, Complexity.MODERATE) == 5
    assert periodic_interval(auto, Complexity.COMPLEX) == 3
    assert periodic_interval(auto, None) == 3  # a checkpoint that never measured it
    off = planning_settings(reflection={"trigger_interval": 0})
    assert periodic_interval(off, Complexity.COMPLEX) == 0
    fixed = planning_settings(auto_adjust_level=False, reflection={"trigger_interval": 7})
    assert periodic_interval(fixed, Complexity.MODERATE) == 7


def test_preconditions_are_a_failed_dependency_or_a_missing_file() -> None:
    plan = parse_plan(
        docs.plan(
            [
                docs.action("task_1", "write_file"),
                docs.action("task_2", "read_file", arguments={"path": "notes.md"}),
            ],
            dependencies={"task_2": ["task_1"]},
        )
    )
    second = plan.actions[1]
    failed = ActionRecord("task_1", "task_1", "write_file", status=ActionStatus.FAILED)
    assert unmet_precondition(second, plan, [failed], lambda p: True) == (
        "it needs task_1, which failed"
    )
    done = ActionRecord("task_1", "task_1", "write_file", status=ActionStatus.DONE)
    assert unmet_precondition(second, plan, [failed, done], lambda p: True) == ""
    assert unmet_precondition(second, plan, [done], lambda p: False) == "notes.md does not exist"
    assert unmet_precondition(second, plan, [done], lambda p: None) == ""


def _message(seq: int, kind: str, **payload: object) -> TaskMessage:
    return TaskMessage(seq, "task", kind, dict(payload))


def test_the_inbox_folds_commands_and_feedback() -> None:
    inbox = read_inbox(
        [
            _message(7, "feedback", author="bob", body="  also docs "),
            _message(5, "command", name="approve", author="amy"),
            _message(6, "command", name="reject", args="too broad", author="cy"),
            _message(8, "feedback", author="bob", body="   "),
            _message(9, "note", text="ignored"),
        ],
        last_seq=4,
    )

    assert inbox.last_seq == 9
    assert inbox.decision == Decision(False, "cy", "too broad")  # the latest decides
    assert inbox.feedback == [Feedback("bob", "also docs", 7)]
    assert not inbox.stop and not inbox.pause and not inbox.empty


def test_stop_pause_and_resume() -> None:
    assert read_inbox([_message(1, "command", name="STOP", author="a")], 0).stop == "a"
    paused = read_inbox([_message(1, "command", name="pause", author="a")], 0)
    assert paused.pause == "a"
    resumed = read_inbox(
        [_message(1, "command", name="pause", author="a"), _message(2, "command", name="resume")],
        0,
    )
    assert resumed.pause is None and resumed.resume
    assert read_inbox([], 3).empty and read_inbox([], 3).last_seq == 3
