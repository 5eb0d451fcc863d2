"""The stage table and the checkpoint form (and the upgrade of version 1 checkpoints)."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest

from bot.record.state import (
    CHECKPOINT_VERSION,
    NEXT_STAGES,
    ActionRecord,
    ActionStatus,
    AgentState,
    Phase,
    Stage,
    ToolCall,
    Waiting,
    WaitKind,
    can_move,
    consumed_message_seq,
    upgrade_v1,
)
from bot.run_events import PauseReason


def test_the_happy_path_is_allowed() -> None:
    path = [
        Stage.PLAN,
        Stage.EXECUTE,
        Stage.REFLECT,
        Stage.REVISE,
        Stage.EXECUTE,
        Stage.REFLECT,
        Stage.EXECUTE,
        Stage.DELIVER,
        Stage.DONE,
    ]
    for current, target in itertools.pairwise(path):
        assert can_move(current, target), (current, target)


@pytest.mark.parametrize(
    ("current", "target"),
    [
        (Stage.PLAN, Stage.REFLECT),  # no reflecting without executing
        (Stage.REVISE, Stage.REFLECT),  # a revision is executed before it is reflected on
        (Stage.PLAN, Stage.DELIVER),  # nothing to deliver before executing
        (Stage.DONE, Stage.EXECUTE),  # done is final
    ],
)
def test_moves_the_table_does_not_have_are_refused(current: Stage, target: Stage) -> None:
    assert not can_move(current, target)


def test_every_stage_has_an_entry_and_done_is_reachable_from_all_but_itself() -> None:
    assert set(NEXT_STAGES) == set(Stage)
    for stage in Stage:
        if stage is not Stage.DONE:
            assert can_move(stage, Stage.DONE)


def test_checkpoint_round_trip_through_json() -> None:
    state = AgentState(stage=Stage.EXECUTE, revisions=2, plan={"action_plan": {}})
    state.records["t1"] = ActionRecord(
        "t1", "t1", "read", {"path": "a"}, ActionStatus.DONE, output="x", changed=True
    )
    call = ToolCall("t1", "t1", "write", {"path": "a"})
    state.waiting = Waiting(WaitKind.TOOL, since=1.0, wake_at=2.0, call=call, after_seq=3)
    state.paused = PauseReason.LLM_UNAVAILABLE
    state.usage = {"prompt_tokens": 5}

    data = json.loads(json.dumps(state.to_dict()))
    again = AgentState.from_dict(data)

    assert again == state
    assert again.records["t1"].status is ActionStatus.DONE and again.records["t1"].ok
    assert again.finished_keys() == {"t1"} and again.changed_anything()
    assert again.counts() == (1, 0)


def test_a_checkpoint_of_another_version_or_shape_is_refused() -> None:
    data = AgentState().to_dict()
    with pytest.raises(ValueError, match="checkpoint version"):
        AgentState.from_dict({**data, "version": 99})
    with pytest.raises(ValueError, match="unknown fields"):
        AgentState.from_dict({**data, "surprise": 1})


def test_a_running_record_is_not_finished() -> None:
    record = ActionRecord("k", "t", "write", writes=True)
    assert not record.finished and not record.ok
    state = AgentState(records={"k": record})
    assert state.finished_keys() == set() and state.done_tasks() == set()


def test_the_consumed_message_cursor_is_read_from_a_stored_checkpoint() -> None:
    assert consumed_message_seq(AgentState(message_seq=7).to_dict()) == 7
    assert consumed_message_seq(json.loads(json.dumps(AgentState().to_dict()))) == 0
    assert consumed_message_seq(None) is None and consumed_message_seq({}) is None
    assert consumed_message_seq({"message_seq": "junk"}) is None


# --- version 1: a phase and flags ------------------------------------------------------------


def v1(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "version": 1,
        "phase": "execution",
        "plan": {"action_plan": {}},
        "records": {},
        "waiting": None,
        "early_done": False,
        "plan_approved": False,
        "unreflected": [],
        "llm_pause_notified": False,
        "outcome": None,
    }
    return {**base, **changes}


DONE_RECORD = ActionRecord("t1", "t1", "read", status=ActionStatus.DONE).to_dict()


@pytest.mark.parametrize(
    ("old", "stage"),
    [
        (v1(outcome={"state": "done"}), Stage.DONE),
        (v1(plan=None, phase="goal_understanding"), Stage.PLAN),
        (v1(phase="action_planning"), Stage.PLAN),  # planned, before the plan-only gate
        (v1(plan_approved=True), Stage.EXECUTE),
        (v1(records={"t1": DONE_RECORD}), Stage.EXECUTE),
        (v1(records={"t1": DONE_RECORD}, early_done=True), Stage.DELIVER),
        (v1(waiting={"kind": "clarification", "subject": "", "details": {}}), Stage.WAIT),
    ],
)
def test_a_version_1_checkpoint_gets_the_stage_its_flags_meant(
    old: dict[str, Any], stage: Stage
) -> None:
    new = upgrade_v1(old)
    assert new["version"] == CHECKPOINT_VERSION and new["stage"] == stage.value
    assert AgentState.from_dict(old).stage is stage
    for flag in ("phase", "early_done", "plan_approved", "unreflected", "llm_pause_notified"):
        assert flag not in new


def test_the_upgrade_keeps_the_batch_the_pause_and_the_wait() -> None:
    details = {
        "key": "t2",
        "task_id": "t2",
        "tool": "write",
        "arguments": {"path": "a"},
        "what": "the call write",
        "text": "shown",
        "after_seq": 4,
        "timed_out": True,
    }
    old = v1(
        unreflected=["t1"],
        llm_pause_notified=True,
        waiting={
            "kind": "approval",
            "subject": "tool",
            "since": 1.0,
            "wake_at": 9.0,
            "details": details,
        },
    )

    state = AgentState.from_dict(json.loads(json.dumps(old)))

    assert state.batch == ["t1"] and state.paused is PauseReason.LLM_UNAVAILABLE
    assert state.waiting == Waiting(
        WaitKind.TOOL,
        since=1.0,
        wake_at=9.0,
        what="the call write",
        text="shown",
        after_seq=4,
        timed_out=True,
        call=ToolCall("t2", "t2", "write", {"path": "a"}),
    )
    assert state.stage is Stage.WAIT and state.phase() is Phase.EXECUTION
    assert old["unreflected"] == ["t1"]  # the upgrade is pure: its input is left alone
