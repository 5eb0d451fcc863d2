"""A task started over the API (``POST /tasks``), and a run directory's files listed.

``start_task`` creates a task as the dispatcher does for an issue's command: the issue
looked up on its forge and named as the forge names it (``canonical_issue``: the key
its webhooks give, whatever case the address was typed in), at most one active task per
issue (the store's rule), the requester recorded as ``<token name> (API)``. It asks
the model first: a task that cannot make its first call is refused (503) with the
set-up steps ``/health/ai`` gives, instead of queued to pause at once. ``run_files``
lists a run directory without following a link out of it.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from pathlib import Path

from bot.api.models import NewTask, NewTicket, RunFile, TaskCreated, TicketCreated
from bot.api.operations import Refusal
from bot.config import Settings
from bot.events import RepoRef, TaskMode, TaskRequest
from bot.forges.base import AccessDenied, ForgeError, ForgeLookup, NotFound
from bot.forges.issue_urls import NotAnIssueUrl, canonical_issue, parse_issue_url
from bot.llm.base import HealthReport
from bot.storage.base import Tasks

MAX_LISTED_FILES = 10_000


async def start_task(
    store: Tasks,
    forges: ForgeLookup,
    settings: Settings,
    llm_health: Callable[[], Awaitable[HealthReport]],
    params: NewTask,
    *,
    by: str,
) -> TaskCreated:
    """Queue a task on the issue ``params.issue_url`` names, requested by ``by``.
    Refusals: 404 not an issue on a forge this bot serves, or it cannot be read; 503
    the model is not ready (with its set-up steps); 502 the forge did not answer; 409
    the issue is closed or has an active task."""
    try:
        ref = parse_issue_url(params.issue_url, settings)
    except NotAnIssueUrl as exc:
        raise Refusal(404, f"not an issue this bot serves: {exc}") from None
    forge = forges(ref.repo.forge)
    if forge is None:
        raise Refusal(404, f"{ref.repo.forge.value} is not configured on this bot")
    report = await llm_health()
    if not report.ready:
        steps = list(report.setup_steps) or ["Check the llm settings with `bot doctor`"]
        why = report.error or "it does not answer"
        extra = {"setup_steps": steps, "health": report.to_dict()}
        raise Refusal(503, f"the model is not ready: {why}", extra=extra)
    try:
        details = await forge.get_issue(ref.repo, ref.number, change_request=ref.is_change_request)
    except (NotFound, AccessDenied) as exc:
        raise Refusal(404, f"{params.issue_url} cannot be read: {exc}") from None
    except ForgeError as exc:
        raise Refusal(502, f"the forge did not answer: {exc}") from None
    try:  # the repository as the forge names it: the key its webhooks give
        issue = canonical_issue(ref, details.issue, settings)
    except NotAnIssueUrl as exc:
        raise Refusal(502, f"the forge's answer for {params.issue_url} is refused: {exc}") from None
    if not issue.is_open:
        raise Refusal(409, f"{issue.web_url or params.issue_url} is closed")
    mode = TaskMode(params.mode.value)
    request = TaskRequest(issue=issue, requested_by=by, mode=mode, instructions=params.instructions)
    task, created = await store.create_task(request)
    if not created:
        raise Refusal(
            409, f"issue {issue.key} has an active task: {task.id}", extra={"task_id": task.id}
        )
    return TaskCreated(
        task_id=task.id,
        issue_url=issue.web_url,
        requested_by=by,
        mode=mode.value,
        state=task.state,
    )


async def open_ticket(
    store: Tasks, forges: ForgeLookup, settings: Settings, params: NewTicket, *, by: str
) -> TicketCreated:
    """Open an issue in ``params.repository``, labelled with the trigger label, and queue
    its task. Refusals: 404 the forge is off or the repository cannot be written; 502 the
    forge did not answer."""
    forge = forges(params.forge)
    if forge is None:
        raise Refusal(404, f"{params.forge.value} is not configured on this bot")
    label = settings.labels.trigger
    try:
        repo = (await forge.get_repo_info(RepoRef(params.forge, params.repository))).repo
        issue = await forge.create_issue(repo, title=params.title, body=params.body, labels=[label])
    except (NotFound, AccessDenied) as exc:
        raise Refusal(404, f"{params.repository} cannot be written: {exc}") from None
    except ForgeError as exc:
        raise Refusal(502, f"the forge did not answer: {exc}") from None
    request = TaskRequest(issue=issue, requested_by=by, mode=TaskMode.RUN, instructions="")
    task, _ = await store.create_task(request)
    return TicketCreated(
        forge=params.forge, repository=repo.full_name, number=issue.number,
        web_url=issue.web_url, label=label, task_id=task.id,
    )  # fmt: skip


def run_files(run_dir: Path, limit: int = MAX_LISTED_FILES) -> list[RunFile]:
    """The regular files under ``run_dir`` (relative, sorted), links neither listed nor
    followed; at most ``limit``."""
    if not run_dir.is_dir() or run_dir.is_symlink():
        return []
    found: list[RunFile] = []
    for root, dirs, files in os.walk(run_dir, followlinks=False):
        dirs.sort()
        for name in sorted(files):
            path = Path(root) / name
            if path.is_symlink() or not path.is_file():
                continue
            found.append(
                RunFile(path=path.relative_to(run_dir).as_posix(), size=path.stat().st_size)
            )
            if len(found) >= limit:
                return found
    return sorted(found, key=lambda f: f.path)
