import dataclasses
import json

from bot.events import (
    Actor,
    CommentRef,
    EventKind,
    ForgeEvent,
    ForgeKind,
    IssueRef,
    RepoRef,
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


def test_forge_event_round_trips_through_json_and_matches_asdict() -> None:
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
    expected = json.loads(json.dumps(dataclasses.asdict(event)))
    assert data == expected


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
    assert data == json.loads(json.dumps(dataclasses.asdict(request)))


def test_a_request_stored_before_head_repo_existed_still_loads() -> None:
    data = json.loads(json.dumps(TaskRequest(issue=ISSUE, requested_by="bob").to_dict()))
    assert data["issue"].pop("head_repo") == "g/sub/p"
    assert TaskRequest.from_dict(data).issue == dataclasses.replace(ISSUE, head_repo=None)
