"""GitLab's CI events as ``CHECKS_CHANGED``: pipeline hooks and job hooks. Pure: no I/O.

A pipeline hook reports the pipeline's jobs (``builds``), each a check, and names the
merge request when the pipeline is one's; a job hook reports one job and names only
its ref. A pipeline for a merge request runs on ``refs/merge-requests/<iid>/head``:
that ref names the merge request, not a branch.
"""

from __future__ import annotations

import re

from bot.events import Actor, Check, CheckKind, ChecksReport, EventKind, ForgeEvent, ForgeKind
from bot.webhooks import gitlab_payloads as p
from bot.webhooks.check_states import gitlab_job
from bot.webhooks.decode import decode, decoder
from bot.webhooks.gitlab_common import is_bot_user, repo

PIPELINE_EVENT = "Pipeline Hook"
JOB_EVENT = "Job Hook"

_MR_REF = re.compile(r"^refs/merge-requests/(\d+)/(?:head|merge|train)$")
# A pipeline of external commit statuses: reported by whoever posted them.
_EXTERNAL = "external"


def _ref(ref: str | None) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """(branches, merge request iids) a pipeline's ref names."""
    if not ref:
        return (), ()
    found = _MR_REF.match(ref)
    if found:
        return (), (int(found.group(1)),)
    return (ref.removeprefix("refs/heads/"),), ()


def _actor(user: p.HookUser | None) -> Actor:
    login = (user.username if user is not None else None) or ""
    bot_flag = user.bot if user is not None else None
    user_id = user.id if user is not None else None
    return Actor(
        login=login,
        id="" if user_id is None else str(user_id),
        is_bot=bool(login) and is_bot_user(login, bot_flag=bot_flag),
    )


def _job(
    job_id: int,
    name: str,
    status: str,
    *,
    allow_failure: bool,
    reason: str | None,
    reporter: str,
    web_url: str = "",
) -> Check:
    return Check(
        name=name,
        state=gitlab_job(status, allow_failure=allow_failure),
        kind=CheckKind.JOB,
        conclusion=status,
        id=str(job_id),
        reporter=reporter,
        web_url=web_url,
        summary=reason or "",
        log_id=str(job_id),
        optional=allow_failure,
    )


def _event(
    name: str, delivery_id: str, root: p.PipelineEvent | p.JobEvent, report: ChecksReport
) -> ForgeEvent:
    """The action is the status reported (GitLab's CI hooks have no action)."""
    return ForgeEvent(
        forge=ForgeKind.GITLAB,
        kind=EventKind.CHECKS_CHANGED,
        name=name,
        action=report.checks[0].conclusion if report.checks else "",
        delivery_id=delivery_id,
        actor=_actor(root.user),
        repo=repo(root.project),
        checks=report,
    )


def pipeline(name: str, delivery_id: str, body: bytes) -> ForgeEvent:
    root = decode(_PIPELINE, body)
    attrs = root.object_attributes
    branches, numbers = ((), ()) if attrs.tag else _ref(attrs.ref)
    merge_request = root.merge_request
    if merge_request is not None:
        numbers = tuple(sorted({*numbers, merge_request.iid}))
        if merge_request.source_branch and not branches:
            branches = (merge_request.source_branch,)
    external = attrs.source == _EXTERNAL
    reporter = _actor(root.user).login if external else ""
    jobs = tuple(
        _job(
            job.id,
            job.name,
            job.status,
            allow_failure=bool(job.allow_failure),
            reason=job.failure_reason,
            reporter=reporter,
        )
        for job in root.builds or ()
    )
    whole = Check(
        name=f"pipeline {attrs.id}",
        state=gitlab_job(attrs.status),
        kind=CheckKind.PIPELINE,
        conclusion=attrs.status,
        id=str(attrs.id),
        reporter=reporter,
        web_url=attrs.url or "",
    )
    report = ChecksReport(
        head_sha=attrs.sha, branches=branches, numbers=numbers, checks=(whole, *jobs)
    )
    return _event(name, delivery_id, root, report)


def job(name: str, delivery_id: str, body: bytes) -> ForgeEvent:
    root = decode(_JOB, body)
    branches, numbers = ((), ()) if root.tag else _ref(root.ref)
    check = _job(
        root.build_id,
        root.build_name,
        root.build_status,
        allow_failure=bool(root.build_allow_failure),
        # GitLab fills failure_reason in before a job fails; it means something only then.
        reason=root.build_failure_reason if root.build_status == "failed" else None,
        reporter="",
    )
    report = ChecksReport(head_sha=root.sha, branches=branches, numbers=numbers, checks=(check,))
    return _event(name, delivery_id, root, report)


_PIPELINE = decoder(p.PipelineEvent)
_JOB = decoder(p.JobEvent)

PARSERS = {PIPELINE_EVENT: pipeline, JOB_EVENT: job}
