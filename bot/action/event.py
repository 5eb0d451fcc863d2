"""The runner's event file -> the bot's ``ForgeEvent`` (the webhook parser, no signature:
the runner is trusted), and a hand-started run's issue read from the API."""

from __future__ import annotations

import msgspec.structs

from bot.action.environment import ActionError, RunnerEnv
from bot.events import EventKind, ForgeEvent
from bot.forges.base import Forge
from bot.webhooks.errors import PayloadError
from bot.webhooks.github_runner import parse_runner_event

MAX_EVENT_BYTES = 25 << 20  # as a webhook body (server.max_body_bytes)


def read_event(runner: RunnerEnv) -> ForgeEvent:
    """The event this run is for; ``ActionError`` when the file cannot be read or is not
    the payload its event name promises."""
    try:
        with runner.event_path.open("rb") as file:
            body = file.read(MAX_EVENT_BYTES + 1)
    except OSError as exc:
        raise ActionError(
            f"cannot read the event file {runner.event_path}: {exc.strerror}"
        ) from None
    if len(body) > MAX_EVENT_BYTES:
        raise ActionError(f"the event file {runner.event_path} is over {MAX_EVENT_BYTES} bytes")
    try:
        return parse_runner_event(runner.event_name, runner.run_key, body)
    except PayloadError as exc:
        raise ActionError(
            f"the event file does not hold a {runner.event_name} event: {exc}"
        ) from None


async def complete(event: ForgeEvent, forge: Forge) -> ForgeEvent:
    """The event with its issue as the forge has it, where the payload names only its
    number (a ``workflow_dispatch``); other events are returned as they are."""
    if event.kind is not EventKind.RUN_REQUESTED or event.issue is None:
        return event
    issue = event.issue
    details = await forge.get_issue(issue.repo, issue.number, change_request=False, comments=False)
    found = msgspec.structs.replace(details.issue, repo=issue.repo)
    return msgspec.structs.replace(event, issue=found)
