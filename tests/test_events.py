import json

import msgspec.structs

from bot.events import (
    Actor,
    CommentRef,
    EventKind,
    FollowUpRound,
    ForgeEvent,
    ForgeKind,
    IssueRef,
    RepoRef,
    RoundKind,
    TaskMode,
    TaskRequest,
)

REPO = RepoRef(ForgeKind.GITLAB, "g/sub/p", project_id=9, default_branch="main", web_url="u")
ISSUE = IssueRef(
    REPO,
    3,
    is_change_request=True,
    title="t",
    body="b",
    labels=("x", "y"),
    head_branch="agent/3-t",
    head_repo="g/sub/p",
)


REPO_DATA = {
    "forge": "gitlab",
    "full_name": "g/sub/p",
    "project_id": 9,
    "scope_id": None,
    "default_branch": "main",
    "web_url": "u",
}
ISSUE_DATA = {
    "repo": REPO_DATA,
    "number": 3,
    "is_change_request": True,
    "title": "t",
    "body": "b",
    "web_url": "",
    "author": "",
    "author_id": "",
    "state": "open",
    "labels": ["x", "y"],
    "head_branch": "agent/3-t",
    "head_repo": "g/sub/p",
}


def test_forge_event_round_trips_through_json_in_its_stored_shape() -> None:
    event = ForgeEvent(
        forge=ForgeKind.GITLAB,
        kind=EventKind.COMMENT_CREATED,
        name="Note Hook",
        action="create",
        delivery_id="d",
        actor=Actor("alice", "7", False),
        repo=REPO,
        issue=ISSUE,
        comment=CommentRef(5, "hi", "alice", "w", True),
        label_added=None,
        labels_added=("x",),
        extra={"k": [1, 2]},
    )
    data = json.loads(json.dumps(event.to_dict()))
    assert ForgeEvent.from_dict(data) == event
    # The stored shape (inbox payloads outlive upgrades): every field, enums as values.
    assert data == {
        "forge": "gitlab",
        "kind": "comment_created",
        "name": "Note Hook",
        "action": "create",
        "delivery_id": "d",
        "actor": {"login": "alice", "id": "7", "is_bot": False},
        "repo": REPO_DATA,
        "issue": ISSUE_DATA,
        "comment": {
            "id": 5,
            "body": "hi",
            "author": "alice",
            "web_url": "w",
            "is_review_comment": True,
        },
        "label_added": None,
        "labels_added": ["x"],
        "extra": {"k": [1, 2]},
        "checks": None,
        "head": None,
        "review": None,
    }


def test_task_request_round_trips() -> None:
    request = TaskRequest(
        issue=ISSUE,
        requested_by="bob",
        mode=TaskMode.RETRY,
        instructions="again",
        trigger_comment_id=4,
        previous_task_id="p",
    )
    data = json.loads(json.dumps(request.to_dict()))
    assert TaskRequest.from_dict(data) == request
    assert data == {
        "issue": ISSUE_DATA,
        "requested_by": "bob",
        "mode": "retry",
        "instructions": "again",
        "trigger_comment_id": 4,
        "previous_task_id": "p",
        "round": None,
    }


def test_a_rounds_request_round_trips_and_an_older_request_has_no_round() -> None:
    found = FollowUpRound(
        RoundKind.REVIEW,
        2,
        "a" * 40,
        "main",
        threads=("t1", "t2"),
        paths=("a.py", ""),
        comment_ids=(5, 6),
    )
    request = TaskRequest(ISSUE, "bob", TaskMode.FOLLOW_UP, instructions="T1 ...", round=found)
    data = json.loads(json.dumps(request.to_dict()))
    assert TaskRequest.from_dict(data) == request
    assert data["round"]["kind"] == "review" and data["round"]["threads"] == ["t1", "t2"]
    del data["round"]  # stored before rounds existed
    assert TaskRequest.from_dict(data).round is None


def test_a_request_stored_before_head_repo_existed_still_loads() -> None:
    data = json.loads(json.dumps(TaskRequest(issue=ISSUE, requested_by="bob").to_dict()))
    assert data["issue"].pop("head_repo") == "g/sub/p"
    assert TaskRequest.from_dict(data).issue == msgspec.structs.replace(ISSUE, head_repo=None)


def test_an_event_with_only_the_required_fields_loads_with_defaults() -> None:
    event = ForgeEvent.from_dict(
        {
            "forge": "github",
            "kind": "ping",
            "name": "ping",
            "action": "",
            "delivery_id": "d",
            "actor": {"login": "octocat"},
        }
    )
    assert event.repo is None and event.labels_added == () and event.extra == {}
    assert event.actor == Actor("octocat")
