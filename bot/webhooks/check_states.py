"""GitHub's and GitLab's words for where a check stands, as the bot's ``CheckState``. Pure.

The webhook parsers and the forge adapters (their check listings) both use these, so
a check means the same whether a delivery or a poll reported it.
"""

from __future__ import annotations

from bot.events import CheckState

# GitHub check runs, check suites and workflow runs: ``status`` until completed.
_GITHUB_STATUS = {
    "queued": CheckState.PENDING,
    "requested": CheckState.PENDING,
    "pending": CheckState.PENDING,
    "in_progress": CheckState.RUNNING,
    # a workflow run or job waiting for a deployment's protection rules (an approval)
    "waiting": CheckState.WAITING,
}
# ... then ``conclusion``.
_GITHUB_CONCLUSION = {
    "success": CheckState.PASSED,
    "neutral": CheckState.PASSED,
    "skipped": CheckState.PASSED,
    "failure": CheckState.FAILED,
    "timed_out": CheckState.FAILED,
    "startup_failure": CheckState.FAILED,
    "action_required": CheckState.WAITING,
    "cancelled": CheckState.CANCELLED,
    "stale": CheckState.CANCELLED,
}
# GitHub commit statuses: one ``state``.
_GITHUB_COMMIT_STATUS = {
    "pending": CheckState.PENDING,
    "success": CheckState.PASSED,
    "failure": CheckState.FAILED,
    "error": CheckState.FAILED,
}
# GitLab pipelines and jobs.
_GITLAB = {
    "created": CheckState.PENDING,
    "pending": CheckState.PENDING,
    "preparing": CheckState.PENDING,
    "scheduled": CheckState.PENDING,
    "waiting_for_resource": CheckState.PENDING,
    "waiting_for_callback": CheckState.PENDING,
    "running": CheckState.RUNNING,
    "success": CheckState.PASSED,
    "skipped": CheckState.PASSED,
    "failed": CheckState.FAILED,
    "canceled": CheckState.CANCELLED,
    "canceling": CheckState.CANCELLED,
    "manual": CheckState.WAITING,
    "blocked": CheckState.WAITING,
}


def github_check(status: str | None, conclusion: str | None) -> CheckState:
    """A check run's, check suite's or workflow run's state. An unknown word counts as
    pending (re-read later), never as passed."""
    if status == "completed" or (status is None and conclusion):
        return _GITHUB_CONCLUSION.get(conclusion or "", CheckState.PENDING)
    return _GITHUB_STATUS.get(status or "", CheckState.PENDING)


def github_status(state: str | None) -> CheckState:
    """A commit status's state."""
    return _GITHUB_COMMIT_STATUS.get(state or "", CheckState.PENDING)


def gitlab_job(status: str | None, *, allow_failure: bool = False) -> CheckState:
    """A GitLab job's or pipeline's state. A manual job that may be skipped
    (``allow_failure``) waits for nobody: it counts as passed."""
    state = _GITLAB.get(status or "", CheckState.PENDING)
    if state is CheckState.WAITING and allow_failure:
        return CheckState.PASSED
    return state


def github_reporter(app_slug: str | None) -> str:
    """A GitHub App as the login it acts under (``<slug>[bot]``)."""
    return f"{app_slug}[bot]" if app_slug else ""
