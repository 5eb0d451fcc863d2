"""Starting a task on an issue from its address: the operation the MCP tool ``start_task``
calls until the REST API has its own (``POST /api/tasks``, ``TaskApi.create_task``);
then the tool calls that one and this module goes.

The address names the forge (the configured GitLab's host, else GitHub's web host) and
the issue or change request; the forge is asked for it, and the task is created as the
dispatcher creates one: at most one active task per issue, the API token's name as the
requester.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated
from urllib.parse import urlsplit

from pydantic import BaseModel, Field

from bot.api.operations import Refusal
from bot.api.routes import TaskApi
from bot.config import Settings
from bot.events import ForgeKind, IssueRef, RepoRef, TaskMode, TaskRequest
from bot.forges.base import AccessDenied, ForgeError, NotFound

MAX_URL = 2000
MAX_INSTRUCTIONS = 20_000
_GITHUB = re.compile(r"/(?P<repo>[\w.-]+/[\w.-]+)/(?P<kind>issues|pull)/(?P<n>[0-9]{1,10})/?")
_GITLAB = re.compile(
    r"/(?P<repo>[\w.-]+(?:/[\w.-]+)+)/-/(?P<kind>issues|merge_requests)/(?P<n>[0-9]{1,10})/?"
)


class StartMode(StrEnum):
    """``run``: plan and do the work; ``plan``: only plan, for people to read."""

    RUN = TaskMode.RUN.value
    PLAN = TaskMode.PLAN_ONLY.value


class NewTask(BaseModel):
    issue_url: Annotated[str, Field(min_length=1, max_length=MAX_URL)]
    instructions: Annotated[str, Field(max_length=MAX_INSTRUCTIONS)] = ""
    mode: StartMode = StartMode.RUN


class CreatedTask(BaseModel):
    task_id: str
    issue_url: str
    mode: str
    by: str
    detail: str


def issue_from_url(url: str, settings: Settings) -> IssueRef:
    """The issue or change request ``url`` names; ``Refusal`` (422) says why not."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise Refusal(422, f"not an http(s) address: {url[:200]!r}")
    host, base = parts.netloc.lower(), f"{parts.scheme}://{parts.netloc}"
    gitlab = urlsplit(settings.gitlab.url.rstrip("/"))
    if host == gitlab.netloc.lower():
        root = gitlab.path.rstrip("/")
        found = _GITLAB.fullmatch(parts.path.removeprefix(root))
        forge, change_request = ForgeKind.GITLAB, "merge_requests"
        base += root
    elif host == urlsplit(settings.github.api_url).netloc.lower().removeprefix("api."):
        found = _GITHUB.fullmatch(parts.path)
        forge, change_request = ForgeKind.GITHUB, "pull"
    else:
        raise Refusal(422, f"{host} is neither the configured GitHub nor the configured GitLab")
    if found is None:
        raise Refusal(422, f"not the address of an issue or a {change_request} on {host}")
    repo = RepoRef(forge, found["repo"], web_url=f"{base}/{found['repo']}")
    return IssueRef(repo, int(found["n"]), is_change_request=found["kind"] == change_request)


async def start_task(api: TaskApi, params: NewTask) -> CreatedTask:
    """A task for the issue or change request at ``issue_url`` (refused when the issue
    has an active task), recorded as requested by the API token's name."""
    ref = issue_from_url(params.issue_url, api.settings())
    forge = api.forges(ref.repo.forge)
    if forge is None:
        raise Refusal(404, f"{ref.repo.forge.value} is not configured on this bot")
    try:
        found = await forge.get_issue(ref.repo, ref.number, change_request=ref.is_change_request)
    except (NotFound, AccessDenied) as exc:
        raise Refusal(404, f"{params.issue_url} cannot be read: {exc}") from None
    except ForgeError as exc:
        raise Refusal(502, f"the forge did not answer: {exc}") from None
    by = api._author()
    request = TaskRequest(
        issue=found.issue,
        requested_by=by,
        mode=TaskMode(params.mode.value),
        instructions=params.instructions,
    )
    task, created = await api.store.create_task(request)
    if not created:
        raise Refusal(409, f"issue {task.issue_key} has an active task: {task.id}")
    return CreatedTask(
        task_id=task.id,
        issue_url=found.issue.web_url or params.issue_url,
        mode=params.mode.value,
        by=by,
        detail="queued; a worker starts it when a slot is free",
    )
