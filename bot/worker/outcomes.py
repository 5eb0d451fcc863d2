"""Pure decisions of the worker: retry limits, backoff schedules, and the Outcome each
way a task run can stop maps to. No I/O, no clock: callers pass ``now`` in."""

from __future__ import annotations

from bot.forges.base import ForgeError
from bot.run_events import Outcome, PauseReason
from bot.storage.base import Task, TaskState

MAX_TASK_ATTEMPTS = 6
WAITING_FOR_PEOPLE = frozenset(
    {TaskState.AWAITING_INPUT, TaskState.AWAITING_APPROVAL, TaskState.PAUSED}
)
# the stored error of a task paused while the LLM is down (the task row keeps text only)
LLM_UNAVAILABLE = PauseReason.LLM_UNAVAILABLE.value
STALLED = "stalled"  # the word the reason of a run the watchdog stopped begins with


def event_retry_delay(attempts: int) -> float:
    """Seconds before an inbox event that failed ``attempts`` times is tried again."""
    return min(2.0**attempts, 300.0)


def task_retry_delay(attempts: int) -> float:
    """Seconds before a task hit by a transient forge error on its ``attempts``-th run
    is run again: 30 s, doubling, at most 15 minutes."""
    return min(30.0 * 2.0 ** (attempts - 1), 900.0)


def may_retry_task(attempts: int) -> bool:
    """Whether a task that has run ``attempts`` times may run again after a forge error."""
    return attempts < MAX_TASK_ATTEMPTS


def refused(exc: ForgeError) -> Outcome:
    """The forge will not let the task go on (not found, access denied): it fails."""
    return Outcome(TaskState.FAILED, reason=f"the forge refused: {exc}")


def forge_failure(exc: ForgeError, *, attempts: int, now: float) -> Outcome:
    """A transient forge error: run again later, until the attempts run out."""
    if not may_retry_task(attempts):
        return Outcome(TaskState.FAILED, reason=f"forge error, gave up: {exc}")
    return Outcome(
        TaskState.QUEUED, reason=f"forge error: {exc}", wake_at=now + task_retry_delay(attempts)
    )


def given_back(why: str, *, attempts: int, now: float) -> Outcome:
    """A task this worker cannot run (a hook's: its folder out of reach, another model):
    back to the queue for another worker, later, until the attempts run out; then it
    fails with the reason."""
    if not may_retry_task(attempts):
        return Outcome(TaskState.FAILED, reason=f"{why}; gave up after {attempts} workers")
    return Outcome(TaskState.QUEUED, reason=why, wake_at=now + task_retry_delay(attempts))


def stalled(awaiting: list[str], *, attempts: int, now: float) -> Outcome:
    """A run that stopped moving (the watchdog cancelled it): run it again later, like a
    transient forge error, until the attempts run out; then it fails, saying where."""
    where = awaiting[0] if awaiting else "nothing the bot could name"
    if not may_retry_task(attempts):
        return Outcome(
            TaskState.FAILED, reason=f"{STALLED} {attempts} times, gave up; awaiting {where}"
        )
    return Outcome(
        TaskState.QUEUED,
        reason=f"{STALLED}: no progress, awaiting {where}",
        wake_at=now + task_retry_delay(attempts),
    )


def store_failing() -> Outcome:
    """The store failed every retry during the run: the task pauses (its state as the
    store last kept it) and the worker sets the emergency stop; ``bot resume-all`` goes on
    once the store works again."""
    return Outcome(TaskState.PAUSED, reason=PauseReason.STORE.value, pause=PauseReason.STORE)


def crashed(exc: BaseException) -> Outcome:
    """An unexpected error in the run: fail it without leaking the error's text."""
    return Outcome(TaskState.FAILED, reason=f"internal error: {type(exc).__name__}")


def invalid_repo_config(exc: Exception) -> Outcome:
    return Outcome(
        TaskState.NEEDS_HUMAN,
        reason=f"the repository's .agent.yaml is invalid: {exc}",
        summary={"recommendations": ["fix .agent.yaml on the default branch"]},
    )


def may_have_missed_reply(outcome: Outcome) -> bool:
    """Whether a reply may have come in unseen while the task settled into this outcome:
    it waits for people (not for the LLM), and only waiting tasks are re-queued by a reply."""
    return outcome.state in WAITING_FOR_PEOPLE and outcome.pause is not PauseReason.LLM_UNAVAILABLE


def stored_pause(task: Task) -> PauseReason | None:
    """Why a stored task is paused, read from its text ``error`` column (the one place
    that parses it); None when it is not paused or the reason is a person's words."""
    if task.state is not TaskState.PAUSED:
        return None
    if task.error == LLM_UNAVAILABLE:
        return PauseReason.LLM_UNAVAILABLE
    if task.error == PauseReason.APPROVAL_TIMEOUT.value:
        return PauseReason.APPROVAL_TIMEOUT
    return None


def waits_for_llm(task: Task) -> bool:
    """Whether a due task is paused because the LLM was unreachable."""
    return stored_pause(task) is PauseReason.LLM_UNAVAILABLE


def merge_failed(exc: Exception, base_branch: str) -> Outcome:
    """A base round whose merge git refused (not a conflict: those the agent resolves)."""
    return Outcome(
        TaskState.NEEDS_HUMAN, reason=f"the merge of {base_branch} into the branch failed: {exc}"
    )
