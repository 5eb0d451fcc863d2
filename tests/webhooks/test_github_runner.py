"""A runner's event file -> the bot's event: the webhook parser for webhook events, and a
workflow_dispatch (an issue number and instructions) as a request to run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bot.config import Settings
from bot.events import EventKind, TaskMode
from bot.forges.base import Permission
from bot.triggers import CreateTask, Intent, IntentKind, React, Reply, ReplyKind, classify, decide
from bot.webhooks.errors import PayloadError
from bot.webhooks.github import parse_event
from bot.webhooks.github_runner import parse_runner_event

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "github"
RUN = "action-7001-1"


def load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))
    return data


def dispatch(**inputs: object) -> bytes:
    payload = load("workflow_dispatch")
    payload["inputs"] = inputs
    return json.dumps(payload).encode()


@pytest.mark.parametrize(
    "name",
    [
        "issues.labeled",
        "issues.opened",
        "issue_comment.created",
        "pull_request_review.submitted",
        "pull_request_review_comment.created",
    ],
)
def test_webhook_events_are_parsed_as_the_webhook_path_parses_them(name: str) -> None:
    body = json.dumps(load(name)).encode()
    event_name = name.split(".", 1)[0]
    assert parse_runner_event(event_name, RUN, body) == parse_event(event_name, RUN, body)


def test_a_workflow_dispatch_is_a_run_request_for_its_issue() -> None:
    event = parse_runner_event("workflow_dispatch", RUN, dispatch(issue="12",
                               instructions="  Fix the typo in README.md \n"))  # fmt: skip
    assert event.kind is EventKind.RUN_REQUESTED
    assert event.delivery_id == RUN and event.actor.login == "octocat"
    assert event.issue is not None and event.issue.number == 12
    assert event.issue.repo.full_name == "octo-org/octo-repo"
    assert event.extra == {"instructions": "Fix the typo in README.md"}


@pytest.mark.parametrize("value", [12, "#12", " 12 "])
def test_the_issue_input_may_be_a_number_or_text(value: object) -> None:
    event = parse_runner_event("workflow_dispatch", RUN, dispatch(issue=value))
    assert event.issue is not None and event.issue.number == 12
    assert event.extra == {"instructions": ""}


@pytest.mark.parametrize("value", [None, "", "abc", "0", "-1", "1e3", "\u0663", "9" * 11, True])
def test_an_unusable_issue_input_is_refused_by_name(value: object) -> None:
    body = dispatch() if value is None else dispatch(issue=value)
    with pytest.raises(PayloadError, match=r"workflow_dispatch.*payload\.inputs\.issue"):
        parse_runner_event("workflow_dispatch", RUN, body)


def test_a_run_request_starts_a_task_for_a_writer_and_is_refused_to_others() -> None:
    settings = Settings()
    event = parse_runner_event("workflow_dispatch", RUN, dispatch(issue=3, instructions="go"))
    intent = classify(event, settings)
    assert isinstance(intent, Intent) and intent.kind is IntentKind.START
    assert not intent.from_label
    react, create = decide(intent, permission=Permission.WRITE, active=None, latest=None,
                           settings=settings)  # fmt: skip
    assert isinstance(react, React) and isinstance(create, CreateTask)
    request = create.request
    assert (request.mode, request.instructions, request.requested_by) == (
        TaskMode.RUN,
        "go",
        "octocat",
    )
    assert request.trigger_comment_id is None
    [denied] = decide(intent, permission=Permission.READ, active=None, latest=None,
                      settings=settings)  # fmt: skip
    assert isinstance(denied, Reply) and denied.text is ReplyKind.DENIED
