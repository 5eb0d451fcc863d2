"""People's answers to the task's questions: how they are quoted to the model, and the
outcome of a run that waits for them."""

from __future__ import annotations

from bot.agent.context import Outcome
from bot.storage.base import TaskState
from bot.untrusted import MAX_PERSON_CHARS, fence_off_loop

WAITING_FOR_ANSWERS = "waiting for answers to questions"


async def answer_block(author: str, body: str) -> str:
    """A person's answer (or feedback, or reason), cut, cleaned and fenced for the model."""
    return await fence_off_loop(body, f"answer by {author}", limit=MAX_PERSON_CHARS)


def waiting_for_answers() -> Outcome:
    return Outcome(TaskState.AWAITING_INPUT, reason=WAITING_FOR_ANSWERS)
