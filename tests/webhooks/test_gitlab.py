"""GitLab webhook verification and parsing, against the payload examples of GitLab's docs."""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from bot.events import Actor, CommentRef, EventKind, ForgeEvent, ForgeKind, IssueRef, RepoRef
from bot.webhooks.errors import PayloadError
from bot.webhooks.gitlab import (
    delivery_key,
    is_bot_user,
    labels_added,
    parse_event,
    project_path,
    secret_scope,
    verify_delivery,
    verify_token,
)
from bot.webhooks.gitlab_payloads import Changes, Label, LabelChange

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "gitlab"
INDEX: list[dict[str, Any]] = json.loads((FIXTURES / "index.json").read_text(encoding="utf-8"))
EVENT_OF = {entry["file"]: entry["event"] for entry in INDEX}
DELIVERY = "0b3c5e7a-4b8e-4f4e-9d5a-1f2e3d4c5b6a"
INTERESTING = {
    "issue-hook.json",
    "merge-request-hook.json",
    "note-hook-issue.json",
    "note-hook-merge-request.json",
    "pipeline-hook.json",
    "job-hook.json",
}


def load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / name).read_text(encoding="utf-8"))
    return data


def parse(name: str, payload: dict[str, Any] | None = None) -> ForgeEvent:
    body = (FIXTURES / name).read_bytes() if payload is None else orjson.dumps(payload)
    return parse_event(EVENT_OF[name], DELIVERY, body)


def parse_as(event_name: str, payload: Any) -> ForgeEvent:
    return parse_event(event_name, DELIVERY, orjson.dumps(payload))


def label(title: str) -> dict[str, Any]:
    return {"id": len(title), "title": title, "color": "#ffffff", "type": "ProjectLabel"}


def with_label_change(name: str, previous: list[str], current: list[str]) -> dict[str, Any]:
    payload = load(name)
    payload["object_attributes"]["action"] = "update"
    payload["changes"] = {
        "labels": {
            "previous": [label(t) for t in previous],
            "current": [label(t) for t in current],
        }
    }
    return payload


# --- tokens and delivery keys -------------------------------------------------------------------


def test_token_verifies() -> None:
    assert verify_token("s3cret-token", secret="s3cret-token")


@pytest.mark.parametrize("header", [None, "", "s3cret", "s3cret-token-and-more", "S3CRET-TOKEN"])
def test_wrong_or_missing_token_is_refused(header: str | None) -> None:
    assert not verify_token(header, secret="s3cret-token")


def test_empty_secret_accepts_nothing() -> None:
    assert not verify_token("", secret="")


def test_non_ascii_token_compares_as_bytes() -> None:
    assert verify_token("clé-secrète", secret="clé-secrète")
    assert not verify_token("cle-secrete", secret="clé-secrète")


def test_delivery_key_prefers_the_idempotency_key() -> None:
    headers = {
        "Idempotency-Key": "f5e5f430-f57b-4e6e-9fac-d9128cd7232f",
        "X-Gitlab-Event-UUID": "13792a34-cac6-4fda-95a8-c58e00a3954e",
    }
    assert delivery_key(headers, b"{}") == "gitlab:idem:f5e5f430-f57b-4e6e-9fac-d9128cd7232f"


def test_delivery_key_headers_are_case_insensitive() -> None:
    headers = {"idempotency-key": "abc", "x-gitlab-event-uuid": "def"}
    assert delivery_key(headers, b"{}") == "gitlab:idem:abc"


def test_delivery_key_falls_back_to_the_event_uuid() -> None:
    headers = {"X-Gitlab-Event-UUID": "13792a34-cac6-4fda-95a8-c58e00a3954e", "Idempotency-Key": ""}
    assert delivery_key(headers, b"{}") == "gitlab:uuid:13792a34-cac6-4fda-95a8-c58e00a3954e"


def test_delivery_key_falls_back_to_the_body_hash() -> None:
    body = b'{"object_kind":"push"}'
    expected = "gitlab:sha256:" + hashlib.sha256(body).hexdigest()
    assert delivery_key({"X-Gitlab-Event": "Push Hook"}, body) == expected
    assert delivery_key({}, body + b" ") != expected


def test_redelivery_keeps_its_key() -> None:
    first = {"Idempotency-Key": "k-1", "X-Gitlab-Event-UUID": "u-1"}
    again = {"Idempotency-Key": "k-1", "X-Gitlab-Event-UUID": "u-2"}
    assert delivery_key(first, b"a") == delivery_key(again, b"b")


# --- every documented payload ----------------------------------------------------------------


@pytest.mark.parametrize("entry", INDEX, ids=[entry["file"] for entry in INDEX])
def test_every_documented_payload_parses(entry: dict[str, Any]) -> None:
    event = parse_event(entry["event"], DELIVERY, (FIXTURES / entry["file"]).read_bytes())

    assert event.forge is ForgeKind.GITLAB
    assert event.name == entry["event"]
    assert event.delivery_id == DELIVERY
    if entry["file"] in INTERESTING:
        assert event.kind is not EventKind.IGNORED
    else:
        assert event.kind is EventKind.IGNORED
        assert event.issue is None and event.comment is None
    assert ForgeEvent.from_dict(event.to_dict()) == event


def test_every_fixture_file_is_in_the_index() -> None:
    files = {path.name for path in FIXTURES.glob("*.json")} - {"index.json"}
    assert files == set(EVENT_OF)


# --- issues and merge requests -------------------------------------------------------------


def test_issue_opened() -> None:
    repo = RepoRef(
        forge=ForgeKind.GITLAB,
        full_name="gitlabhq/gitlab-test",
        project_id=1,
        default_branch="master",
        web_url="http://example.com/gitlabhq/gitlab-test",
    )
    assert parse("issue-hook.json") == ForgeEvent(
        forge=ForgeKind.GITLAB,
        kind=EventKind.ISSUE_OPENED,
        name="Issue Hook",
        action="open",
        delivery_id=DELIVERY,
        actor=Actor(login="root", id="1", is_bot=False),
        repo=repo,
        issue=IssueRef(
            repo=repo,
            number=23,
            title="New API: create/update/delete file",
            body="Create new API for manipulations with repository",
            web_url="http://example.com/diaspora/issues/23",
            author="root",
            author_id="51",  # object_attributes.author_id
            state="open",
            labels=("API",),
        ),
        label_added="Platform",
        labels_added=("Platform",),
    )


def test_merge_request_opened() -> None:
    event = parse("merge-request-hook.json")

    assert event.kind is EventKind.ISSUE_OPENED
    assert event.name == "Merge Request Hook"
    assert event.issue is not None
    assert event.issue.is_change_request
    assert event.issue.number == 1  # the iid, not the global id 99
    assert event.issue.head_branch == "ms-viewport"
    assert event.issue.title == "MS-Viewport"
    assert event.issue.body == ""
    assert event.issue.labels == ("API",)
    assert event.issue.key == "gitlab:gitlabhq/gitlab-test#cr/1"


@pytest.mark.parametrize("name", ["issue-hook.json", "merge-request-hook.json"])
def test_label_added_on_update(name: str) -> None:
    payload = with_label_change(name, ["API"], ["API", "coding agent", "Platform"])

    event = parse(name, payload)

    assert event.kind is EventKind.ISSUE_LABELED
    assert event.label_added == "coding agent"
    assert event.labels_added == ("coding agent", "Platform")
    assert event.issue is not None and event.issue.author == ""


def test_label_removed_is_not_labeled() -> None:
    payload = with_label_change("issue-hook.json", ["API", "coding agent"], ["API"])

    event = parse("issue-hook.json", payload)

    assert event.kind is EventKind.ISSUE_OTHER
    assert event.label_added is None and event.labels_added == ()


def test_update_without_label_changes_is_other() -> None:
    payload = load("issue-hook.json")
    payload["object_attributes"]["action"] = "update"
    payload["changes"] = {"title": {"previous": "Old", "current": "New"}}

    assert parse("issue-hook.json", payload).kind is EventKind.ISSUE_OTHER


@pytest.mark.parametrize(
    ("name", "action", "kind"),
    [
        ("issue-hook.json", "close", EventKind.ISSUE_CLOSED),
        ("issue-hook.json", "reopen", EventKind.ISSUE_OTHER),
        ("merge-request-hook.json", "close", EventKind.ISSUE_CLOSED),
        ("merge-request-hook.json", "merge", EventKind.ISSUE_CLOSED),
        ("merge-request-hook.json", "approved", EventKind.ISSUE_OTHER),
    ],
)
def test_other_actions(name: str, action: str, kind: EventKind) -> None:
    payload = load(name)
    payload["object_attributes"]["action"] = action
    payload["object_attributes"]["state"] = "closed"

    event = parse(name, payload)

    assert (event.kind, event.action) == (kind, action)
    assert event.issue is not None and event.issue.state == "closed"


def test_confidential_issue_hook_is_an_issue_event() -> None:
    event = parse_as("Confidential Issue Hook", load("issue-hook.json"))

    assert event.kind is EventKind.ISSUE_OPENED
    assert event.issue is not None and not event.issue.is_change_request


def test_labels_added_without_changes() -> None:
    assert labels_added(None) == ()
    assert labels_added(Changes()) == ()
    assert labels_added(Changes(labels=LabelChange())) == ()


def test_labels_added_keeps_the_order_of_current() -> None:
    change = LabelChange(previous=[Label("API")], current=[Label("b"), Label("API"), Label("a")])
    assert labels_added(Changes(labels=change)) == ("b", "a")
    assert labels_added(Changes(labels=LabelChange(current=[Label("x")]))) == ("x",)


@pytest.mark.parametrize("attrs_labels", ["absent", None])
def test_labels_of_the_payload_stand_in_for_those_of_object_attributes(
    attrs_labels: str | None,
) -> None:
    payload = load("issue-hook.json")
    payload["labels"] = [label("from the top")]
    if attrs_labels is None:
        payload["object_attributes"]["labels"] = None
    else:
        del payload["object_attributes"]["labels"]
    event = parse("issue-hook.json", payload)
    assert event.issue is not None and event.issue.labels == ("from the top",)
    del payload["labels"]
    event = parse("issue-hook.json", payload)
    assert event.issue is not None and event.issue.labels == ()


# --- notes -----------------------------------------------------------------------------------


def test_note_on_an_issue() -> None:
    event = parse("note-hook-issue.json")

    assert event.kind is EventKind.COMMENT_CREATED
    assert event.action == "create"
    assert event.comment == CommentRef(
        id=1241,
        body="Hello world",
        author="root",
        web_url="http://example.com/gitlab-org/gitlab-test/issues/17#note_1241",
    )
    assert event.issue is not None
    assert (event.issue.number, event.issue.is_change_request) == (17, False)
    assert event.issue.state == "closed"
    assert event.issue.labels == ("Afterpod", "Element")
    assert event.repo is not None and event.repo.project_id == 5
    assert event.extra == {"noteable_type": "Issue"}


def test_note_on_a_merge_request() -> None:
    event = parse("note-hook-merge-request.json")

    assert event.kind is EventKind.COMMENT_CREATED
    assert event.comment is not None and event.comment.body == "This MR needs work."
    assert event.issue is not None
    assert event.issue.is_change_request
    assert (event.issue.number, event.issue.head_branch) == (1, "master")
    assert event.issue.title == "Tempora et eos debitis quae laborum et."


def test_merge_request_names_the_project_of_its_source_branch() -> None:
    event = parse("merge-request-hook.json")  # source_project_id == target_project_id
    assert event.issue is not None and event.issue.head_repo == "gitlabhq/gitlab-test"
    fork = load("merge-request-hook.json")
    fork["object_attributes"]["source_project_id"] = 99
    event = parse("merge-request-hook.json", fork)
    assert event.issue is not None and event.issue.head_repo == "awesome_space/awesome_project"
    del fork["object_attributes"]["source"]
    event = parse("merge-request-hook.json", fork)
    assert event.issue is not None and event.issue.head_repo is None
    note = parse("note-hook-merge-request.json")
    assert note.issue is not None and note.issue.head_repo == "gitlab-org/gitlab-test"
    issue = parse("note-hook-issue.json").issue
    assert issue is not None and issue.head_repo is None


def test_mistyped_source_project_id_is_a_clear_error() -> None:
    payload = load("note-hook-merge-request.json")
    payload["merge_request"]["source_project_id"] = "5"
    with pytest.raises(
        PayloadError,
        match=r"payload\.merge_request\.source_project_id: expected an integer, got str",
    ):
        parse("note-hook-merge-request.json", payload)


@pytest.mark.parametrize(
    ("name", "page"),
    [
        ("note-hook-issue.json", "http://example.com/gitlab-org/gitlab-test/issues/17"),
        (
            "note-hook-merge-request.json",
            "http://example.com/gitlab-org/gitlab-test/merge_requests/1",
        ),
    ],
)
def test_a_note_gives_its_issue_the_page_it_is_on(name: str, page: str) -> None:
    event = parse(name)  # the issue / merge_request objects of note hooks have no url
    assert event.issue is not None and event.issue.web_url == page
    payload = load(name)
    key = "issue" if "issue" in name else "merge_request"
    payload[key]["url"] = "http://example.com/own-url"
    event = parse(name, payload)
    assert event.issue is not None and event.issue.web_url == "http://example.com/own-url"
    payload = load(name)
    payload["object_attributes"]["url"] = "http://example.com/somewhere"  # no #note_ fragment
    event = parse(name, payload)
    assert event.issue is not None and event.issue.web_url == ""


def test_a_diff_note_on_a_merge_request_is_a_line_comment() -> None:
    payload = load("note-hook-merge-request.json")
    payload["object_attributes"].update(type="DiffNote", position={"new_path": "a.txt"})
    event = parse("note-hook-merge-request.json", payload)
    assert event.kind is EventKind.REVIEW_COMMENT
    assert event.comment is not None and not event.comment.is_review_comment  # eyes on it
    payload["object_attributes"]["type"] = "DiscussionNote"  # a note in a review thread
    assert parse("note-hook-merge-request.json", payload).kind is EventKind.REVIEW_COMMENT
    payload["object_attributes"]["type"] = None  # a plain note on the merge request
    assert parse("note-hook-merge-request.json", payload).kind is EventKind.COMMENT_CREATED
    payload["object_attributes"].update(type="DiffNote", system=True)
    assert parse("note-hook-merge-request.json", payload).kind is EventKind.COMMENT_OTHER
    payload["object_attributes"].update(type=7, system=False)
    with pytest.raises(
        PayloadError, match=r"payload\.object_attributes\.type: expected a string, got int"
    ):
        parse("note-hook-merge-request.json", payload)


@pytest.mark.parametrize(
    ("name", "noteable_type", "project"),
    [
        ("note-hook-commit.json", "Commit", "gitlabhq/gitlab-test"),
        ("note-hook-code-snippet.json", "Snippet", "gitlab-org/gitlab-test"),
    ],
)
def test_notes_on_commits_and_snippets_are_ignored(
    name: str, noteable_type: str, project: str
) -> None:
    event = parse(name)

    assert event.kind is EventKind.IGNORED
    assert event.extra == {"noteable_type": noteable_type}
    assert event.actor.login == "root"
    assert event.repo is not None and event.repo.full_name == project
    assert event.issue is None and event.comment is None


def test_edited_note_is_not_a_new_comment() -> None:
    payload = load("note-hook-issue.json")
    payload["object_attributes"]["action"] = "update"

    assert parse("note-hook-issue.json", payload).kind is EventKind.COMMENT_OTHER


def test_system_note_is_not_a_new_comment() -> None:
    payload = load("note-hook-issue.json")
    payload["object_attributes"]["system"] = True

    assert parse("note-hook-issue.json", payload).kind is EventKind.COMMENT_OTHER


def test_confidential_note_is_a_comment() -> None:
    event = parse_as("Confidential Note Hook", load("note-hook-issue.json"))

    assert event.kind is EventKind.COMMENT_CREATED


# --- bots --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "username",
    [
        "project_278964_bot_e0d1f1d2c3b4a5968778695a4b3c2d1e",
        "group_9970_bot_0a1b2c3d",
        "project_42_bot",
        "project_42_bot2",
        "service_account_group_9970_1a2b3c4d5e6f",
        "support-bot",
        "renovate[bot]",
    ],
)
def test_bot_users(username: str) -> None:
    assert is_bot_user(username)


@pytest.mark.parametrize(
    "username", ["root", "alice", "project_manager", "my_project_42_bot_x", "robot", "bot"]
)
def test_people_are_not_bots(username: str) -> None:
    assert not is_bot_user(username)


def test_bot_flag_marks_a_bot() -> None:
    assert is_bot_user("coding-agent", bot_flag=True)


def test_comment_by_a_token_bot_has_a_bot_actor() -> None:
    payload = load("note-hook-issue.json")
    payload["user"]["username"] = "project_5_bot_4f6a1c2b"

    actor = parse("note-hook-issue.json", payload).actor

    assert actor == Actor(login="project_5_bot_4f6a1c2b", id="1", is_bot=True)


def test_user_bot_field_marks_a_bot() -> None:
    payload = load("issue-hook.json")
    payload["user"] = {**payload["user"], "username": "helper", "bot": True}

    assert parse("issue-hook.json", payload).actor.is_bot


# --- malformed payloads ------------------------------------------------------------------------


def without(payload: dict[str, Any], *path: str) -> dict[str, Any]:
    broken = copy.deepcopy(payload)
    target = broken
    for key in path[:-1]:
        target = target[key]
    del target[path[-1]]
    return broken


def replaced(payload: dict[str, Any], value: Any, *path: str) -> dict[str, Any]:
    broken = copy.deepcopy(payload)
    target = broken
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return broken


@pytest.mark.parametrize(
    ("name", "path", "message"),
    [
        ("issue-hook.json", ("object_attributes",), r"payload\.object_attributes: missing"),
        (
            "issue-hook.json",
            ("object_attributes", "iid"),
            r"payload\.object_attributes\.iid: missing",
        ),
        ("issue-hook.json", ("user",), r"payload\.user: missing"),
        ("issue-hook.json", ("user", "username"), r"payload\.user\.username: missing"),
        ("issue-hook.json", ("project",), r"payload\.project: missing"),
        (
            "issue-hook.json",
            ("project", "path_with_namespace"),
            r"payload\.project\.path_with_namespace: missing",
        ),
        ("merge-request-hook.json", ("project", "id"), r"payload\.project\.id: missing"),
        ("merge-request-hook.json", ("user",), r"payload\.user: missing"),
        ("note-hook-issue.json", ("issue",), r"payload\.issue: missing"),
        ("note-hook-issue.json", ("issue", "iid"), r"payload\.issue\.iid: missing"),
        ("note-hook-merge-request.json", ("merge_request",), r"payload\.merge_request: missing"),
        ("note-hook-issue.json", ("user",), r"payload\.user: missing"),
        ("note-hook-issue.json", ("project",), r"payload\.project: missing"),
        ("note-hook-issue.json", ("object_attributes",), r"payload\.object_attributes: missing"),
        ("note-hook-issue.json", ("object_attributes", "id"), r"payload\.object_attributes\.id: m"),
        (
            "note-hook-issue.json",
            ("object_attributes", "note"),
            r"object_attributes\.note: missing",
        ),
        (
            "note-hook-issue.json",
            ("object_attributes", "noteable_type"),
            r"payload\.object_attributes\.noteable_type: missing",
        ),
    ],
)
def test_missing_fields_raise_payload_error(name: str, path: tuple[str, ...], message: str) -> None:
    with pytest.raises(PayloadError, match=message):
        parse(name, without(load(name), *path))


_IID = r"payload\.object_attributes\.iid"


@pytest.mark.parametrize(
    ("name", "value", "path", "message"),
    [
        (
            "issue-hook.json",
            "23",
            ("object_attributes", "iid"),
            _IID + ": expected an integer, got str",
        ),
        (
            "issue-hook.json",
            True,
            ("object_attributes", "iid"),
            _IID + ": expected an integer, got bool",
        ),
        (
            "issue-hook.json",
            [],
            ("object_attributes",),
            r"payload\.object_attributes: expected an object, got array",
        ),
        ("issue-hook.json", None, ("object_attributes",), r"payload\.object_attributes: missing"),
        (
            "issue-hook.json",
            7,
            ("object_attributes", "title"),
            r"object_attributes\.title: expected a string, got int",
        ),
        (
            "issue-hook.json",
            "API",
            ("object_attributes", "labels"),
            r"object_attributes\.labels: expected an array, got str",
        ),
        (
            "issue-hook.json",
            ["API"],
            ("object_attributes", "labels"),
            r"object_attributes\.labels\[0\]: expected an object, got str",
        ),
        ("issue-hook.json", [{"id": 1}], ("labels",), r"payload\.labels\[0\]\.title: missing"),
        (
            "issue-hook.json",
            {"previous": [], "current": "x"},
            ("changes", "labels"),
            r"payload\.changes\.labels\.current: expected an array, got str",
        ),
        ("issue-hook.json", [], ("changes",), r"payload\.changes: expected an object, got array"),
        ("issue-hook.json", "root", ("user",), r"payload\.user: expected an object, got str"),
        ("issue-hook.json", None, ("user",), r"payload\.user: missing"),
        (
            "issue-hook.json",
            "yes",
            ("user", "bot"),
            r"payload\.user\.bot: expected a boolean, got str",
        ),
        (
            "issue-hook.json",
            "1",
            ("project", "id"),
            r"payload\.project\.id: expected an integer, got str",
        ),
        ("issue-hook.json", None, ("project", "id"), r"payload\.project\.id: missing"),
        (
            "merge-request-hook.json",
            "fork",
            ("object_attributes", "source"),
            r"object_attributes\.source: expected an object, got str",
        ),
        (
            "note-hook-issue.json",
            "1241",
            ("object_attributes", "id"),
            r"payload\.object_attributes\.id: expected an integer, got str",
        ),
        (
            "note-hook-issue.json",
            None,
            ("object_attributes", "id"),
            r"payload\.object_attributes\.id: missing",
        ),
        ("note-hook-issue.json", None, ("user", "username"), r"payload\.user\.username: missing"),
        ("note-hook-issue.json", None, ("user",), r"payload\.user: missing"),
        ("note-hook-issue.json", None, ("issue",), r"payload\.issue: missing"),
        (
            "note-hook-issue.json",
            3,
            ("object_attributes", "noteable_type"),
            r"noteable_type: expected a string, got int",
        ),
        (
            "note-hook-issue.json",
            "no",
            ("object_attributes", "system"),
            r"object_attributes\.system: expected a boolean, got str",
        ),
    ],
)
def test_wrong_types_raise_payload_error(
    name: str, value: Any, path: tuple[str, ...], message: str
) -> None:
    payload = replaced(load(name), value, *path)
    if path[:1] == ("changes",):
        payload["object_attributes"]["action"] = "update"
    with pytest.raises(PayloadError, match=message):
        parse(name, payload)


def test_payload_error_names_the_event() -> None:
    with pytest.raises(
        PayloadError, match=r"^GitLab 'Note Hook' event: payload\.project: missing$"
    ):
        parse("note-hook-issue.json", without(load("note-hook-issue.json"), "project"))


@pytest.mark.parametrize("event_name", ["Issue Hook", "Note Hook", "Push Hook"])
@pytest.mark.parametrize(("body", "got"), [(b"[]", "array"), (b'"x"', "str"), (b"null", "null")])
def test_payload_must_be_an_object(event_name: str, body: bytes, got: str) -> None:
    message = "payload: missing" if got == "null" else f"payload: expected an object, got {got}"
    with pytest.raises(PayloadError, match=message):
        parse_event(event_name, DELIVERY, body)


@pytest.mark.parametrize(
    "event_name", ["Issue Hook", "Merge Request Hook", "Note Hook", "Push Hook"]
)
@pytest.mark.parametrize("body", [b"", b"{", b"not json", b'{"user": }', b"\xff\xfe"])
def test_body_that_is_not_json_is_refused(event_name: str, body: bytes) -> None:
    with pytest.raises(PayloadError, match=f"GitLab '{event_name}' event: the body is not JSON"):
        parse_event(event_name, DELIVERY, body)


def test_body_with_json_after_the_object_is_refused() -> None:
    body = (FIXTURES / "issue-hook.json").read_bytes() + b" {}"
    with pytest.raises(PayloadError, match="the body is not JSON"):
        parse_event("Issue Hook", DELIVERY, body)


@pytest.mark.parametrize(
    "payload",
    [
        {"user": "not an object", "project": 1},
        {"user": None, "project": None, "object_attributes": None},
        {"user": {"id": 1}, "project": {"id": "1", "path_with_namespace": "a/b"}},
        {"object_attributes": ["open"], "user_username": 7},
        {"object_attributes": {"action": 5}},
        {},
    ],
)
def test_unknown_events_with_odd_payloads_are_ignored(payload: dict[str, Any]) -> None:
    event = parse_as("Something New Hook", payload)

    assert event.kind is EventKind.IGNORED
    assert event.actor == Actor(login="") and event.repo is None and event.action == ""


def test_unknown_events_keep_who_where_and_the_action() -> None:
    payload = {
        "object_attributes": {"action": "create", "iid": "not read"},
        "user": {"id": 3, "username": "project_9_bot_ab12", "bot": True},
        "project": {"id": 9, "path_with_namespace": "g/p", "web_url": "http://example.com/g/p"},
    }
    event = parse_as("Something New Hook", payload)

    assert event.kind is EventKind.IGNORED and event.action == "create"
    assert event.actor == Actor(login="project_9_bot_ab12", id="3", is_bot=True)
    assert event.repo == RepoRef(
        forge=ForgeKind.GITLAB, full_name="g/p", project_id=9, web_url="http://example.com/g/p"
    )


def test_push_hook_names_its_user_by_user_username() -> None:
    event = parse("push-hook.json")

    assert event.kind is EventKind.IGNORED
    assert event.actor == Actor(login="jsmith", id="4")  # user_username, user_id
    assert event.repo is not None and event.repo.full_name == "mike/diaspora"
    payload = load("push-hook.json")
    payload["user_username"] = "group_4_bot_99"
    assert parse("push-hook.json", payload).actor == Actor(
        login="group_4_bot_99", id="4", is_bot=True
    )


def test_a_note_on_a_commit_without_who_or_where_is_still_ignored() -> None:
    payload = load("note-hook-commit.json")
    del payload["user"]
    payload["project"] = None

    event = parse("note-hook-commit.json", payload)

    assert event.kind is EventKind.IGNORED and event.action == "create"
    assert event.actor == Actor(login="") and event.repo is None
    assert event.extra == {"noteable_type": "Commit"}


# --- a secret per project or group ------------------------------------------------------

SCOPED = {"gitlab-org": "group-token", "gitlab-org/gitlab-test/": "project-token"}


def body_of(path: str | None) -> bytes:
    payload = load("note-hook-issue.json")
    if path is None:
        del payload["project"]
    else:
        payload["project"]["path_with_namespace"] = path
    return json.dumps(payload).encode()


@pytest.mark.parametrize(
    ("path", "token", "ok"),
    [
        ("gitlab-org/gitlab-test", "project-token", True),  # the most specific entry
        ("gitlab-org/gitlab-test", "group-token", False),
        ("gitlab-org/gitlab-test", "shared-token", False),  # covered: no shared secret
        ("GitLab-Org/GitLab-Test", "shared-token", False),  # GitLab paths ignore case
        ("GitLab-Org/GitLab-Test", "project-token", True),
        ("gitlab-org/other", "group-token", True),  # the group's entry
        ("gitlab-org/sub/deeper", "group-token", True),
        ("gitlab-org/other", "project-token", False),
        ("gitlab-orgx/other", "shared-token", True),  # not under gitlab-org/
        ("gitlab-orgx/other", "group-token", False),
        (None, "shared-token", True),  # no project named: the shared secret
        (None, "group-token", False),
    ],
)
def test_the_most_specific_secret_decides(path: str | None, token: str, ok: bool) -> None:
    assert verify_delivery(token, body_of(path), shared="shared-token", scoped=SCOPED) is ok


def test_without_a_shared_secret_only_covered_projects_get_in() -> None:
    assert verify_delivery("group-token", body_of("gitlab-org/x"), shared=None, scoped=SCOPED)
    assert not verify_delivery("", body_of("acme/x"), shared=None, scoped=SCOPED)
    assert not verify_delivery(None, body_of("gitlab-org/x"), shared=None, scoped=SCOPED)
    assert not verify_delivery("x", b"not json", shared=None, scoped=SCOPED)
    assert verify_delivery("s", b"not json", shared="s", scoped=SCOPED)  # parsing refuses it


def test_secret_scope_and_project_path() -> None:
    assert secret_scope("a/b/c", {"a": "1", "a/b": "2", "a/bc": "3"}) == "a/b"
    assert secret_scope("a/bc", {"a": "1", "a/b": "2"}) == "a"
    assert secret_scope(None, {"a": "1"}) is None
    assert project_path(body_of("x/y")) == "x/y"
    assert project_path(b'{"project": 3}') is None
