"""The event file of a GitHub Actions runner -> ``ForgeEvent``. Pure: no I/O.

A workflow's event file (``GITHUB_EVENT_PATH``) holds the same payload a webhook
delivery would, so it goes through the webhook parser (``github.parse_event``); the
runner is trusted, there is no signature to check. One event exists only on a runner:
``workflow_dispatch``, a person starting the workflow by hand with an issue number and
instructions as its inputs. It becomes a ``RUN_REQUESTED`` event whose issue holds only
its number (the payload has nothing more): the caller fills it in from the API.
"""

from __future__ import annotations

from msgspec import field

from bot.events import EventKind, ForgeEvent, IssueRef
from bot.webhooks import github
from bot.webhooks import github_payloads as p
from bot.webhooks.decode import Part, decode, decoder
from bot.webhooks.errors import PayloadError
from bot.webhooks.github_common import event as _event
from bot.webhooks.github_common import repo as _repo

DISPATCH = "workflow_dispatch"
ISSUE_INPUT = "issue"
INSTRUCTIONS_INPUT = "instructions"


class DispatchEvent(Part, kw_only=True):
    repository: p.Repository
    sender: p.User
    inputs: dict[str, str | int | float | bool | None] = field(default_factory=dict)
    installation: p.Installation | None = None
    action: str | None = None


_DISPATCH = decoder(DispatchEvent)


def parse_runner_event(event_name: str, run_key: str, body: bytes) -> ForgeEvent:
    """The ``ForgeEvent`` of one runner event file; ``run_key`` names the run (it stands
    where a webhook's delivery id would). ``PayloadError`` names what is wrong."""
    if event_name != DISPATCH:
        return github.parse_event(event_name, run_key, body)
    try:
        return _dispatch(run_key, body)
    except PayloadError as exc:
        raise PayloadError(f"GitHub {event_name!r} event: {exc}") from None


def _dispatch(run_key: str, body: bytes) -> ForgeEvent:
    root = decode(_DISPATCH, body)
    number = _issue_number(root.inputs.get(ISSUE_INPUT))
    instructions = root.inputs.get(INSTRUCTIONS_INPUT)
    repo = _repo(root.repository, root.installation)
    issue = IssueRef(repo=repo, number=number)
    extra = {"instructions": str(instructions).strip() if instructions is not None else ""}
    return _event(DISPATCH, run_key, root, EventKind.RUN_REQUESTED, repo=repo, issue=issue,
                  extra=extra)  # fmt: skip


def _issue_number(value: object) -> int:
    """The ``issue`` input: a positive whole number, as a number or as text (``#12`` too)."""
    text = str(value).strip().removeprefix("#") if value is not None else ""
    if not (0 < len(text) <= 10 and text.isascii() and text.isdigit()) or int(text) == 0:
        raise PayloadError(
            f"payload.inputs.{ISSUE_INPUT}: the number of an issue or pull request, got {value!r}"
        )
    return int(text)
