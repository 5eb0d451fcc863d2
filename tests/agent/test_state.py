"""The seed 7.3 state machine and the checkpoint form."""

from __future__ import annotations

import itertools
import json

import pytest

from bot.agent.state import (
    TRANSITIONS,
    ActionRecord,
    ActionStatus,
    AgentState,
    Phase,
    Waiting,
    can_transition,
    consumed_message_seq,
)


def test_the_happy_path_of_seed_7_3_is_allowed() -> None:
    path = [
        Phase.INITIAL,
        Phase.GOAL_UNDERSTANDING,
        Phase.TASK_DECOMPOSITION,
        Phase.ACTION_PLANNING,
        Phase.EXECUTION,
        Phase.REFLECTION,
        Phase.REVISION,
        Phase.EXECUTION,
        Phase.REFLECTION,
        Phase.EXECUTION,
        Phase.COMPLETION,
    ]
    for current, target in itertools.pairwise(path):
        assert can_transition(current, target), (current, target)


@pytest.mark.parametrize(
    ("current", "target"),
    [
        (Phase.INITIAL, Phase.EXECUTION),  # no executing without a plan
        (Phase.EXECUTION, Phase.REVISION),  # a revision follows a reflection
        (Phase.GOAL_UNDERSTANDING, Phase.ACTION_PLANNING),  # decomposition comes first
        (Phase.COMPLETION, Phase.EXECUTION),  # completion is final
    ],
)
def test_transitions_the_seed_does_not_have_are_refused(current: Phase, target: Phase) -> None:
    assert not can_transition(current, target)


def test_every_phase_has_an_entry_and_completion_is_reachable_from_all_but_itself() -> None:
    assert set(TRANSITIONS) == set(Phase)
    for phase in Phase:
        if phase is not Phase.COMPLETION:
            assert can_transition(phase, Phase.COMPLETION)


def test_checkpoint_round_trip_through_json() -> None:
    state = AgentState(phase=Phase.EXECUTION, revisions=2, plan={"action_plan": {}})
    state.records["t1"] = ActionRecord(
        "t1", "t1", "read", {"path": "a"}, ActionStatus.DONE, output="x", changed=True
    )
    state.waiting = Waiting("approval", "tool", since=1.0, wake_at=2.0, details={"key": "t1"})
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
