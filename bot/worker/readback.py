"""GitLab events read back from the API before the bot acts on them.

GitLab proves a delivery only by a secret token shared by every hook that has it, not by a
signature of the body: whoever holds the token can write any author, note or label into a
payload. So before a note or an issue event starts a task, runs a command or becomes
feedback, the note is read back (its author and text as GitLab stores them) and the
issue's labels and state are taken as they are now. The issue's web address is the one
GitLab gives (or forms under the project's), never the payload's. A note that does not
exist on that issue, or whose author or text differs, is ignored with a log line. An
internal note on a
public issue is ignored too: a task's comments and pull request are public, so nothing of it
may become a task's instructions, feedback or a quoted reply. GitHub's payloads are signed
with the App's secret: they are used as sent.

One note is not read back (``note=False``, ``triggers.note_unused``): review activity on
the bot's merge request while no task runs on it. Its only effect is that the merge
request's discussions get looked at once the activity is quiet; that look reads every
discussion, its notes and each author's permission from the API, so nothing of the
payload's text, author or note id reaches the model or the round's choices. A forged one
could only bring that look sooner. Its project is still checked (id against path).
"""

from __future__ import annotations

import logging

import msgspec.structs

from bot.events import ForgeEvent, ForgeKind, IssueRef
from bot.forges.base import Forge, LabelHistory, NotFound, RepoInfo
from bot.triggers import Ignore

log = logging.getLogger("bot.worker.readback")


async def read_back(forge: Forge, event: ForgeEvent, *, note: bool = True) -> ForgeEvent | Ignore:
    """``event`` as GitLab's API tells it now, or why it is ignored (forged or gone);
    without ``note``, its note is not read (its project is).

    Other forges' events come back unchanged. Forge errors other than ``NotFound``
    propagate, so the dispatcher retries the event later.
    """
    if event.forge is not ForgeKind.GITLAB or event.issue is None:
        return event
    project = await _project(forge, event)
    if isinstance(project, str):
        return _forged(event, project)
    if event.comment is not None and not note:
        located = msgspec.structs.replace(event.issue, web_url=_issue_url(project, event.issue))
        return msgspec.structs.replace(event, issue=located)
    if event.comment is not None:
        return await _note_as_stored(forge, event, project)
    return await _labels_as_now(forge, event)


async def _project(forge: Forge, event: ForgeEvent) -> RepoInfo | str:
    """The project as GitLab has it, or why the payload's project id and path name
    different projects: the webhook secret was chosen by the path, but the bot acts on
    the id."""
    repo = event.issue.repo if event.issue is not None else None
    assert repo is not None
    try:
        info = await forge.get_repo_info(repo)
    except NotFound:
        return f"project {repo.project_id or repo.full_name} does not exist"
    stored = info.repo
    if repo.project_id is not None and stored.full_name.casefold() != repo.full_name.casefold():
        return f"project {repo.project_id} is {stored.full_name}, not {repo.full_name}"
    return info


def _issue_url(project: RepoInfo, issue: IssueRef) -> str:
    """The issue's or merge request's address under the project's, as GitLab forms it."""
    if not project.web_url:
        return ""
    kind = "merge_requests" if issue.is_change_request else "issues"
    return f"{project.web_url.rstrip('/')}/-/{kind}/{issue.number}"


async def _note_as_stored(
    forge: Forge, event: ForgeEvent, project: RepoInfo
) -> ForgeEvent | Ignore:
    issue, note = event.issue, event.comment
    assert issue is not None and note is not None
    try:
        stored = await forge.get_comment(issue, note.id)
    except NotFound:
        return _forged(event, f"note {note.id} does not exist on {issue.key}")
    if stored.author.casefold() != event.actor.login.casefold():
        return _forged(event, f"note {note.id} on {issue.key} is by {stored.author!r}")
    if stored.body != note.body:
        return _forged(event, f"note {note.id} on {issue.key} says something else now")
    if stored.internal and not await _confidential(forge, event):
        why = f"note {note.id} is internal and {issue.key} is public"
        log.info("ignored GitLab delivery %s: %s", event.delivery_id, why)
        return Ignore(f"{why}: what a task is told reaches public comments")
    located = msgspec.structs.replace(issue, web_url=_issue_url(project, issue))
    return msgspec.structs.replace(event, issue=located)


async def _confidential(forge: Forge, event: ForgeEvent) -> bool:
    issue = event.issue
    assert issue is not None
    details = await forge.get_issue(
        issue.repo, issue.number, change_request=issue.is_change_request
    )
    return details.confidential


async def _labels_as_now(forge: Forge, event: ForgeEvent) -> ForgeEvent:
    issue = event.issue
    assert issue is not None
    now = (
        await forge.get_issue(issue.repo, issue.number, change_request=issue.is_change_request)
    ).issue
    added = tuple(label for label in event.labels_added if label in now.labels)
    if isinstance(forge, LabelHistory):
        added = tuple([label for label in added if await _added_by_actor(forge, event, label)])
    if added != event.labels_added or now.labels != issue.labels:
        log.info("%s: labels as GitLab has them now: %s", issue.key, ", ".join(now.labels))
    return msgspec.structs.replace(
        event,
        issue=msgspec.structs.replace(
            issue, labels=now.labels, state=now.state or issue.state, web_url=now.web_url
        ),
        labels_added=added,
        label_added=added[0] if added else None,
    )


async def _added_by_actor(forge: LabelHistory, event: ForgeEvent, label: str) -> bool:
    """Whether the payload's sender really added ``label`` (it is whose permission counts)."""
    assert event.issue is not None
    who = await forge.label_added_by(event.issue, label)
    if who is not None and who.casefold() == event.actor.login.casefold():
        return True
    log.warning(
        "GitLab delivery %s: %r on %s was added by %s, not by the sender %r; not acted on",
        event.delivery_id, label, event.issue.key, who or "nobody", event.actor.login,
    )  # fmt: skip
    return False


def _forged(event: ForgeEvent, why: str) -> Ignore:
    log.warning(
        "ignored GitLab delivery %s (%s/%s, sender %r): %s",
        event.delivery_id,
        event.name,
        event.action,
        event.actor.login,
        why,
    )
    return Ignore(f"not as GitLab stores it: {why}")
