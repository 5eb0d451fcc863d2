"""The planning document as the model gave it, or why it holds no plan. Pure.

``planning_answer`` reads the ``planning`` document of docs/planning.md#model-documents:
a plan, or the document's ``error`` (an unclear goal, with its questions and perhaps a
plan under assumptions; a decomposition that failed, with its partial plan).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class PlanningError(StrEnum):
    """Why a planning answer holds no plan (the document's ``error.type``, or ours)."""

    UNCLEAR_GOAL = "unclear_goal"
    DECOMPOSITION_FAILED = "decomposition_failed"
    INVALID_ANSWER = "invalid_answer"  # no valid planning document


@dataclass(frozen=True, slots=True)
class PlanningAnswer:
    """The planning document, or why there is none (``error``)."""

    document: dict[str, Any] | None
    error: PlanningError | None = None
    message: str = ""
    questions: tuple[str, ...] = ()
    partial_plan: dict[str, Any] | None = None
    comment: str = ""
    best_guess: dict[str, Any] | None = None  # an unclear goal's plan under assumptions

    def partial(self) -> dict[str, Any] | None:
        """The partial plan the answer gave, else the subtasks of its document."""
        if self.partial_plan is not None or self.document is None:
            return self.partial_plan
        decomposition = self.document.get("task_decomposition") or {}
        return {"feasible_subtasks": decomposition.get("subtasks") or [],
                "infeasible_subtasks": []}  # fmt: skip


def planning_answer(data: dict[str, Any] | None, error: str | None) -> PlanningAnswer:
    """The ``planning`` document a model gave (``data``; None: ``error`` says why)."""
    if data is None:
        message = error or "no valid planning document"
        return PlanningAnswer(None, PlanningError.INVALID_ANSWER, message)
    problem = data.get("error")
    if not isinstance(problem, Mapping):
        return PlanningAnswer(data, comment=str(data.get("comment", "")))
    partial = problem.get("partial_plan")
    kind = str(problem.get("type", ""))
    unclear = kind == PlanningError.UNCLEAR_GOAL
    guess = data if unclear and isinstance(data.get("action_plan"), Mapping) else None
    return PlanningAnswer(
        None,
        PlanningError.UNCLEAR_GOAL if unclear else PlanningError.DECOMPOSITION_FAILED,
        str(problem.get("message", "")),
        tuple(str(q) for q in problem.get("clarification_needed") or ()),
        dict(partial) if isinstance(partial, Mapping) else None,
        str(data.get("comment", "")),
        best_guess={k: v for k, v in guess.items() if k != "error"} if guess else None,
    )
