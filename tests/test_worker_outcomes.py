"""The worker's pure decisions: retry limits, backoff schedules, outcomes."""

from __future__ import annotations

from bot.events import ForgeKind, IssueRef, RepoRef, TaskRequest
from bot.forges.base import AccessDenied, ForgeError
from bot.run_events import Outcome, PauseReason
from bot.storage.base import Task, TaskState
from bot.worker.outcomes import (
    LLM_UNAVAILABLE,
    MAX_TASK_ATTEMPTS,
    crashed,
    event_retry_delay,
    forge_failure,
    may_have_missed_reply,
    refused,
    stored_pause,
    task_retry_delay,
    waits_for_llm,
)


def test_a_task_hit_by_a_forge_error_waits_30_s_doubling_up_to_15_minutes() -> None:
    assert [task_retry_delay(n) for n in range(1, 8)] == [30, 60, 120, 240, 480, 900, 900]


def test_an_event_waits_doubling_up_to_5_minutes() -> None:
    assert [event_retry_delay(n) for n in (1, 2, 8, 9, 20)] == [2, 4, 256, 300, 300]


def test_a_transient_forge_error_requeues_until_the_attempts_run_out() -> None:
    error = ForgeError("502 Bad Gateway", status=502)
    again = forge_failure(error, attempts=2, now=1000.0)
    assert again.state is TaskState.QUEUED and again.wake_at == 1060.0
    assert "502 Bad Gateway" in again.reason
    last = forge_failure(error, attempts=MAX_TASK_ATTEMPTS, now=1000.0)
    assert last.state is TaskState.FAILED and last.wake_at is None
    assert last.reason.startswith("forge error, gave up")


def test_a_refusal_fails_at_once() -> None:
    outcome = refused(AccessDenied("no access to acme/widgets", status=403))
    assert outcome.state is TaskState.FAILED and "no access to acme/widgets" in outcome.reason


def test_a_crash_fails_without_the_errors_text() -> None:
    outcome = crashed(RuntimeError("token=ghp_secret in a traceback"))
    assert outcome == Outcome(TaskState.FAILED, reason="internal error: RuntimeError")


def test_only_tasks_waiting_for_people_may_have_missed_a_reply() -> None:
    assert may_have_missed_reply(Outcome(TaskState.AWAITING_APPROVAL))
    assert may_have_missed_reply(Outcome(TaskState.PAUSED, reason="paused by alice"))
    llm_down = Outcome(TaskState.PAUSED, reason=LLM_UNAVAILABLE, pause=PauseReason.LLM_UNAVAILABLE)
    assert not may_have_missed_reply(llm_down)
    assert not may_have_missed_reply(Outcome(TaskState.DONE))


def _task(state: TaskState, error: str | None) -> Task:
    issue = IssueRef(RepoRef(ForgeKind.GITHUB, "acme/widgets"), 7)
    request = TaskRequest(issue, requested_by="alice")
    return Task("t1", issue.key, issue.repo.key, request, state, error=error)


def test_why_a_stored_task_is_paused_is_read_from_its_error_text_in_one_place() -> None:
    assert stored_pause(_task(TaskState.PAUSED, LLM_UNAVAILABLE)) is PauseReason.LLM_UNAVAILABLE
    assert waits_for_llm(_task(TaskState.PAUSED, LLM_UNAVAILABLE))
    timed_out = _task(TaskState.PAUSED, "approval_timeout")
    assert stored_pause(timed_out) is PauseReason.APPROVAL_TIMEOUT and not waits_for_llm(timed_out)
    assert stored_pause(_task(TaskState.PAUSED, "paused by alice")) is None
    assert stored_pause(_task(TaskState.QUEUED, LLM_UNAVAILABLE)) is None
