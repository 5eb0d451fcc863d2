"""The task's stages: where the loop is, which stage may follow which (``NEXT_STAGES``;
only ``bot/agent/loop.py`` moves the stage), and the planning phase people see for each.
Pure: no I/O.
"""

from __future__ import annotations

from enum import StrEnum

from bot.run_events import WaitKind


class Phase(StrEnum):
    """The planning phases people see in the status comment (PHASE events)."""

    INITIAL = "initial"
    GOAL_UNDERSTANDING = "goal_understanding"
    TASK_DECOMPOSITION = "task_decomposition"
    ACTION_PLANNING = "action_planning"
    EXECUTION = "execution"
    REFLECTION = "reflection"
    REVISION = "revision"
    COMPLETION = "completion"


class Stage(StrEnum):
    """Where the task is: the loop runs the handler of the current stage."""

    PLAN = "plan"  # make the plan (or, with one, pass the plan-only gate)
    WAIT = "wait"  # waiting for people: answers, or an approval (``AgentState.waiting``)
    EXECUTE = "execute"  # run the next batch of actions
    REFLECT = "reflect"  # look at the batch that ran (``AgentState.batch``)
    REVISE = "revise"  # a revision in progress (interrupted: the current plan goes on)
    DELIVER = "deliver"  # quality gate, push, change request, completion summary
    DONE = "done"  # the outcome is stored (``AgentState.outcome``)


_NEXT: dict[Stage, frozenset[Stage]] = {
    Stage.PLAN: frozenset({Stage.PLAN, Stage.WAIT, Stage.EXECUTE, Stage.DONE}),
    Stage.WAIT: frozenset(
        {Stage.PLAN, Stage.WAIT, Stage.EXECUTE, Stage.REVISE, Stage.DELIVER, Stage.DONE}
    ),
    # people's feedback is reflected on where it is read, and may revise the plan
    Stage.EXECUTE: frozenset(
        {Stage.EXECUTE, Stage.REFLECT, Stage.REVISE, Stage.WAIT, Stage.DELIVER, Stage.DONE}
    ),
    # a result nobody could judge goes to its author (``planning.reflection.unjudged: ask``)
    Stage.REFLECT: frozenset({Stage.EXECUTE, Stage.REVISE, Stage.WAIT, Stage.DELIVER, Stage.DONE}),
    Stage.REVISE: frozenset({Stage.EXECUTE, Stage.WAIT, Stage.DONE}),
    Stage.DELIVER: frozenset({Stage.REVISE, Stage.WAIT, Stage.DONE}),
    Stage.DONE: frozenset(),
}
# Every stage but the last may end the task (a person is needed, the budget is spent).
NEXT_STAGES = {
    stage: nexts | {Stage.DONE} if stage is not Stage.DONE else nexts
    for stage, nexts in _NEXT.items()
}


def can_move(current: Stage, target: Stage) -> bool:
    return target in NEXT_STAGES[current]


STAGE_PHASE = {
    Stage.PLAN: Phase.INITIAL,
    Stage.WAIT: Phase.EXECUTION,
    Stage.EXECUTE: Phase.EXECUTION,
    Stage.REFLECT: Phase.EXECUTION,
    Stage.REVISE: Phase.REVISION,
    Stage.DELIVER: Phase.EXECUTION,
    Stage.DONE: Phase.COMPLETION,
}
WAITING_PHASE = {
    WaitKind.ANSWERS: Phase.GOAL_UNDERSTANDING,
    WaitKind.PLAN: Phase.ACTION_PLANNING,
    WaitKind.REVISION: Phase.REVISION,
    WaitKind.TOOL: Phase.EXECUTION,
    WaitKind.PUSH: Phase.EXECUTION,
    WaitKind.JUDGEMENT: Phase.REFLECTION,
}
