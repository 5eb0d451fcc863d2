"""GitHub's CI events as ``CHECKS_CHANGED``: check suites and runs, workflow runs, commit
statuses. Pure: no I/O.

Each becomes one ``ChecksReport`` on the event: the commit, its branch, the pull request
numbers the payload names (none for a fork's, nor for a commit status), and the
check(s) reported, with who reported them, so the bot can ignore its own.
"""

from __future__ import annotations

from bot.events import Check, CheckKind, ChecksReport, EventKind, ForgeEvent
from bot.webhooks import github_payloads as p
from bot.webhooks.check_states import github_check, github_reporter, github_status
from bot.webhooks.decode import decode, decoder
from bot.webhooks.github_common import event, repo

_CiEvent = p.CheckSuiteEvent | p.CheckRunEvent | p.WorkflowRunEvent | p.StatusEvent
# GitHub Actions reports each job as a check run whose id is the job's id.
ACTIONS_APP = "github-actions"


def _numbers(pulls: list[p.Number] | None) -> tuple[int, ...]:
    return tuple(sorted({pull.number for pull in pulls or ()}))


def _branches(*names: str | None) -> tuple[str, ...]:
    return tuple(name for name in names if name)


def _changed(name: str, delivery_id: str, root: _CiEvent, report: ChecksReport) -> ForgeEvent:
    where = repo(root.repository, root.installation)
    return event(name, delivery_id, root, EventKind.CHECKS_CHANGED, repo=where, checks=report)


def check_suite(name: str, delivery_id: str, body: bytes) -> ForgeEvent:
    root = decode(_SUITE, body)
    suite = root.check_suite
    slug = suite.app.slug if suite.app is not None else None
    check = Check(
        name=slug or "check suite",
        state=github_check(suite.status, suite.conclusion),
        kind=CheckKind.SUITE,
        conclusion=suite.conclusion or suite.status or "",
        id=str(suite.id),
        reporter=github_reporter(slug),
    )
    report = ChecksReport(
        head_sha=suite.head_sha,
        branches=_branches(suite.head_branch),
        numbers=_numbers(suite.pull_requests),
        checks=(check,),
    )
    return _changed(name, delivery_id, root, report)


def check_run(name: str, delivery_id: str, body: bytes) -> ForgeEvent:
    root = decode(_RUN, body)
    return _changed(name, delivery_id, root, run_report(root.check_run))


def run_report(run: p.CheckRun) -> ChecksReport:
    slug = run.app.slug if run.app is not None else None
    output = run.output
    parts = (output.title, output.summary) if output is not None else ()
    summary = "\n".join(part for part in parts if part)
    check = Check(
        name=run.name,
        state=github_check(run.status, run.conclusion),
        kind=CheckKind.RUN,
        conclusion=run.conclusion or run.status,
        id=str(run.id),
        reporter=github_reporter(slug),
        web_url=run.html_url or run.details_url or "",
        summary=summary,
        log_id=str(run.id) if slug == ACTIONS_APP else "",
    )
    suite = run.check_suite
    return ChecksReport(
        head_sha=run.head_sha,
        branches=_branches(suite.head_branch if suite is not None else None),
        numbers=_numbers(run.pull_requests),
        checks=(check,),
    )


def workflow_run(name: str, delivery_id: str, body: bytes) -> ForgeEvent:
    root = decode(_WORKFLOW, body)
    run = root.workflow_run
    check = Check(
        name=run.name or f"workflow run {run.id}",
        state=github_check(run.status, run.conclusion),
        kind=CheckKind.WORKFLOW,
        conclusion=run.conclusion or run.status or "",
        id=str(run.id),
        reporter=github_reporter(ACTIONS_APP),
        web_url=run.html_url or "",
    )
    report = ChecksReport(
        head_sha=run.head_sha,
        branches=_branches(run.head_branch),
        numbers=_numbers(run.pull_requests),
        checks=(check,),
    )
    return _changed(name, delivery_id, root, report)


def status(name: str, delivery_id: str, body: bytes) -> ForgeEvent:
    """A commit status: whoever sent it (``sender``) reported it."""
    root = decode(_STATUS, body)
    check = Check(
        name=root.context,
        state=github_status(root.state),
        kind=CheckKind.STATUS,
        conclusion=root.state,
        id=str(root.id),
        reporter=root.sender.login,
        web_url=root.target_url or "",
        summary=root.description or "",
    )
    report = ChecksReport(
        head_sha=root.sha,
        branches=tuple(branch.name for branch in root.branches or ()),
        checks=(check,),
    )
    return _changed(name, delivery_id, root, report)


_SUITE = decoder(p.CheckSuiteEvent)
_RUN = decoder(p.CheckRunEvent)
_WORKFLOW = decoder(p.WorkflowRunEvent)
_STATUS = decoder(p.StatusEvent)

HANDLERS = {
    "check_suite": check_suite,
    "check_run": check_run,
    "workflow_run": workflow_run,
    "status": status,
}
