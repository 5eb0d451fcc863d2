"""People's answers to the task's questions: how they are quoted to the model, and the
outcome of a run that waits for them."""

from __future__ import annotations

from bot.agent.context import Outcome
from bot.agent.context_builder import fence
from bot.storage.base import TaskState

WAITING_FOR_ANSWERS = "waiting for answers to questions"


def answer_block(author: str, body: str) -> str:
    return fence(body, f"answer by {author}")


def waiting_for_answers() -> Outcome:
    return Outcome(TaskState.AWAITING_INPUT, reason=WAITING_FOR_ANSWERS)
