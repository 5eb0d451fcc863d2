"""GitHub webhook verification and parsing, against GitHub's published example payloads."""

from __future__ import annotations

import copy
import hashlib
import hmac
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bot.events import EventKind, ForgeEvent, ForgeKind
from bot.webhooks.errors import PayloadError
from bot.webhooks.github import delivery_key, parse_event, verify_signature

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "github"
DELIVERY = "72d3162e-cc78-11e3-81ab-4c9367dc0958"


def load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))
    return data


def parse(name: str, payload: dict[str, Any] | None = None) -> ForgeEvent:
    event_name = name.split(".", 1)[0]
    return parse_event(event_name, DELIVERY, _body(load(name) if payload is None else payload))


def _body(payload: Any) -> bytes:
    return json.dumps(payload).encode()


def sign(body: bytes, secret: str) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


# --- signatures ------------------------------------------------------------------------------


def test_github_documented_test_vector_verifies() -> None:
    header = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
    assert verify_signature(b"Hello, World!", header, secret="It's a Secret to Everybody")


def test_signature_with_the_wrong_secret_is_refused() -> None:
    header = sign(b"Hello, World!", "another secret")
    assert not verify_signature(b"Hello, World!", header, secret="It's a Secret to Everybody")


def test_signature_of_another_body_is_refused() -> None:
    header = sign(b"Hello, World!", "s3cret")
    assert not verify_signature(b"Hello, World?", header, secret="s3cret")


@pytest.mark.parametrize(
    "header",
    [
        None,
        "",
        "sha256=",
        "sha1=0a4d55a8d778e5022fab701977c5d840bbc486d0",
        "757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17",
        "sha256=not-hex-at-all",
        "sha256=75710\u00e97ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e1",
    ],
)
def test_missing_or_malformed_signature_is_refused(header: str | None) -> None:
    assert not verify_signature(b"Hello, World!", header, secret="It's a Secret to Everybody")


def test_upper_case_hex_signature_is_accepted() -> None:
    header = sign(b"{}", "s3cret")
    assert verify_signature(b"{}", "sha256=" + header[7:].upper(), secret="s3cret")


def test_empty_secret_is_a_configuration_error() -> None:
    with pytest.raises(ValueError, match="secret is empty"):
        verify_signature(b"{}", sign(b"{}", ""), secret="")


# --- every published example ------------------------------------------------------------------

HELLO = "Codertocat/Hello-World"
APP = "2311213"  # the installation id added to the examples that lacked one


@dataclass(frozen=True)
class Want:
    kind: EventKind
    actor: str = "Codertocat"
    repo: str | None = HELLO
    scope: str | None = APP
    number: int | None = None
    cr: bool = False
    comment: str | None = None
    label: str | None = None


RIGHT_AWAY = "You are totally right! I'll get this fixed right away."
TODAY = "You are totally right! I'll get this fixed today."
EMOJI = "Maybe you should use more emoji on this line."
NO_REPO: dict[str, Any] = {"repo": None, "scope": None}

EXPECTED: dict[str, Want] = {
    "installation.created": Want(EventKind.INSTALLATION, **NO_REPO),
    "installation.deleted": Want(EventKind.INSTALLATION, actor="octocat", **NO_REPO),
    "installation_repositories.added": Want(EventKind.INSTALLATION, **NO_REPO),
    "installation_repositories.removed": Want(EventKind.INSTALLATION, actor="octocat", **NO_REPO),
    "issue_comment.created": Want(EventKind.COMMENT_CREATED, number=1, comment=RIGHT_AWAY),
    "issue_comment.deleted": Want(EventKind.COMMENT_OTHER, number=1, comment=TODAY),
    "issue_comment.edited": Want(EventKind.COMMENT_OTHER, number=1, comment=TODAY),
    "issues.edited": Want(EventKind.ISSUE_OTHER, number=1),
    "issues.labeled": Want(EventKind.ISSUE_LABELED, number=1, label="bug"),
    "issues.opened": Want(EventKind.ISSUE_OPENED, number=1),
    "ping": Want(EventKind.PING, repo="Octocoders/Hello-World", scope=None),
    "pull_request.labeled": Want(
        EventKind.ISSUE_LABELED, scope="1", number=2, cr=True, label="bug"
    ),
    "pull_request.opened": Want(EventKind.ISSUE_OPENED, number=2, cr=True),
    "pull_request.synchronize": Want(EventKind.CHANGE_REQUEST_PUSHED, scope="1", number=2, cr=True),
    "pull_request.closed": Want(EventKind.ISSUE_CLOSED, scope="1", number=2, cr=True),
    "check_run.completed": Want(EventKind.CHECKS_CHANGED),
    "check_run.created": Want(EventKind.CHECKS_CHANGED),
    "check_suite.completed": Want(EventKind.CHECKS_CHANGED),
    "check_suite.requested": Want(EventKind.CHECKS_CHANGED, scope="957387"),
    "workflow_run.completed": Want(EventKind.CHECKS_CHANGED, repo="octo-org/octo-repo"),
    "workflow_run.requested": Want(EventKind.CHECKS_CHANGED, repo="octo-org/octo-repo"),
    "status": Want(EventKind.CHECKS_CHANGED, scope="1"),
    # a webhook delivery of it is ignored; a runner's event file of it asks for a run
    # (tests/webhooks/test_github_runner.py)
    "workflow_dispatch": Want(
        EventKind.IGNORED, actor="octocat", repo="octo-org/octo-repo", scope=None
    ),
    "pull_request_review.submitted": Want(
        EventKind.REVIEW_SUBMITTED, number=2, cr=True, comment=""
    ),
    "pull_request_review_comment.created": Want(
        EventKind.REVIEW_COMMENT, number=2, cr=True, comment=EMOJI
    ),
}


def test_the_table_covers_every_fixture_file() -> None:
    assert {path.stem for path in FIXTURES.glob("*.json")} == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_published_example_parses(name: str) -> None:
    want = EXPECTED[name]
    event = parse(name)
    assert event.forge is ForgeKind.GITHUB
    assert event.kind is want.kind
    assert event.name == name.split(".")[0]
    assert event.action == load(name).get("action", "")
    assert event.delivery_id == DELIVERY
    assert event.actor.login == want.actor
    assert event.actor.id == str(load(name)["sender"]["id"])
    assert not event.actor.is_bot
    assert (event.repo.full_name if event.repo else None) == want.repo
    assert (event.repo.scope_id if event.repo else None) == want.scope
    assert (event.issue.number if event.issue else None) == want.number
    assert (event.issue.is_change_request if event.issue else False) is want.cr
    assert (event.comment.body if event.comment else None) == want.comment
    assert event.label_added == want.label
    assert event.labels_added == ((want.label,) if want.label else ())


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_parsed_events_survive_a_json_round_trip(name: str) -> None:
    event = parse(name)
    assert ForgeEvent.from_dict(json.loads(json.dumps(event.to_dict()))) == event


def test_issue_fields_come_from_the_payload() -> None:
    event = parse("issues.opened")
    assert event.repo is not None and event.issue is not None
    assert event.repo.default_branch == "master"
    assert event.repo.web_url == "https://github.com/Codertocat/Hello-World"
    assert event.issue.title == "Spelling error in the README file"
    assert event.issue.body.startswith("It looks like you accidently spelled 'commit'")
    assert event.issue.author == "Codertocat"
    assert event.issue.labels == ("bug",)
    assert event.issue.state == "open"
    assert event.issue.web_url == "https://github.com/Codertocat/Hello-World/issues/1"
    assert event.issue.head_branch is None
    assert event.issue.key == "github:Codertocat/Hello-World#issue/1"


def test_pull_request_carries_its_head_branch() -> None:
    event = parse("pull_request.opened")
    assert event.issue is not None
    assert event.issue.head_branch == "changes"
    assert event.issue.title == "Update the README with new information."
    assert event.issue.key == "github:Codertocat/Hello-World#cr/2"


def test_pull_request_names_the_repository_of_its_head() -> None:
    event = parse("pull_request.opened")
    assert event.issue is not None and event.issue.head_repo == "Codertocat/Hello-World"
    fork = load("pull_request.opened")
    fork["pull_request"]["head"]["repo"]["full_name"] = "mallory/Hello-World"
    event = parse("pull_request.opened", fork)
    assert event.issue is not None and event.issue.head_repo == "mallory/Hello-World"
    fork["pull_request"]["head"]["repo"] = None  # the fork was deleted
    event = parse("pull_request.opened", fork)
    assert event.issue is not None and event.issue.head_repo is None
    for name in ("pull_request_review.submitted", "pull_request_review_comment.created"):
        event = parse(name)
        assert event.issue is not None and event.issue.head_repo == "Codertocat/Hello-World"
    event = parse("issue_comment.created")  # an issue (or a PR seen as one) has no head
    assert event.issue is not None and event.issue.head_repo is None


def test_pull_request_head_repo_without_a_name_is_a_clear_error() -> None:
    payload = load("pull_request.opened")
    del payload["pull_request"]["head"]["repo"]["full_name"]
    with pytest.raises(PayloadError, match=r"pull_request\.head\.repo\.full_name: missing"):
        parse("pull_request.opened", payload)


def test_merged_pull_request_is_closed_with_state_merged() -> None:
    payload = load("pull_request.opened")
    payload["action"] = "closed"
    payload["pull_request"].update(state="closed", merged=True)
    event = parse("pull_request.closed", payload)
    assert event.kind is EventKind.ISSUE_CLOSED
    assert event.issue is not None and event.issue.state == "merged"


def test_closed_issue() -> None:
    payload = load("issues.opened")
    payload["action"] = "closed"
    payload["issue"]["state"] = "closed"
    event = parse("issues.closed", payload)
    assert event.kind is EventKind.ISSUE_CLOSED
    assert event.issue is not None and event.issue.state == "closed"


def test_unlabeled_names_the_removed_label() -> None:
    payload = load("issues.labeled")
    payload["action"] = "unlabeled"
    event = parse("issues.unlabeled", payload)
    assert event.kind is EventKind.ISSUE_OTHER
    assert event.label_added is None
    assert event.extra == {"label_removed": "bug"}


def test_comment_on_a_pull_request_is_a_comment_on_a_change_request() -> None:
    payload = load("issue_comment.created")
    payload["issue"]["number"] = 2
    payload["issue"]["pull_request"] = {
        "url": "https://api.github.com/repos/Codertocat/Hello-World/pulls/2",
        "html_url": "https://github.com/Codertocat/Hello-World/pull/2",
    }
    event = parse("issue_comment.created", payload)
    assert event.kind is EventKind.COMMENT_CREATED
    assert event.issue is not None and event.issue.is_change_request
    assert event.issue.key == "github:Codertocat/Hello-World#cr/2"
    assert event.comment is not None and not event.comment.is_review_comment


def test_comment_fields() -> None:
    event = parse("issue_comment.created")
    assert event.comment is not None
    assert event.comment.id == 492700400
    assert event.comment.author == "Codertocat"
    assert event.comment.web_url.endswith("/issues/1#issuecomment-492700400")


def test_review_and_review_comment_details() -> None:
    review = parse("pull_request_review.submitted")
    assert review.comment is not None and review.comment.is_review_comment
    assert review.comment.id == 237895671
    assert review.extra == {"review_state": "commented"}
    comment = parse("pull_request_review_comment.created")
    assert comment.comment is not None and comment.comment.is_review_comment
    assert comment.comment.id == 284312630
    assert comment.extra == {"path": "README.md", "line": None}  # an example from before `line`
    payload = load("pull_request_review_comment.created")
    payload["comment"]["line"] = 3
    assert parse("pull_request_review_comment.created", payload).extra["line"] == 3


def test_review_dismissed_is_another_comment_event() -> None:
    payload = load("pull_request_review.submitted")
    payload["action"] = "dismissed"
    assert parse("pull_request_review.dismissed", payload).kind is EventKind.COMMENT_OTHER


def test_installation_events_list_repositories_and_scope() -> None:
    created = parse("installation.created")
    assert created.repo is None
    assert created.extra == {
        "scope_id": "957387",
        "account": "Codertocat",
        "repositories_added": ["Codertocat/Hello-World"],
        "repositories_removed": [],
    }
    deleted = parse("installation.deleted")
    assert deleted.extra["repositories_removed"] == ["octocat/Hello-World"]
    assert deleted.extra["repositories_added"] == []
    added = parse("installation_repositories.added")
    assert added.extra["repositories_added"] == ["Codertocat/Space"]
    removed = parse("installation_repositories.removed")
    assert removed.extra["scope_id"] == "2"
    assert removed.extra["repositories_removed"] == ["octocat/Hello-World"]


def test_ping_keeps_the_hook_id() -> None:
    event = parse("ping")
    assert event.extra["hook_id"] == 109948940
    assert event.extra["zen"]
    assert event.action == ""


def test_app_level_ping_has_no_repository() -> None:
    payload = load("ping")
    del payload["repository"]
    payload["hook"].update(type="App", app_id=12345)
    event = parse("ping", payload)
    assert event.kind is EventKind.PING
    assert event.repo is None


def test_missing_installation_leaves_scope_empty() -> None:
    payload = load("issues.opened")
    del payload["installation"]
    event = parse("issues.opened", payload)
    assert event.repo is not None and event.repo.scope_id is None


# --- bots ------------------------------------------------------------------------------------


def test_sender_of_type_bot_is_a_bot() -> None:
    payload = load("issue_comment.created")
    payload["sender"].update(login="coding-agent[bot]", type="Bot", id=41898282)
    event = parse("issue_comment.created", payload)
    assert event.actor.is_bot
    assert event.actor.login == "coding-agent[bot]"
    assert event.actor.id == "41898282"


def test_login_ending_in_bot_suffix_is_a_bot_whatever_its_type() -> None:
    payload = load("issue_comment.created")
    payload["sender"].update(login="renovate[bot]", type="User")
    assert parse("issue_comment.created", payload).actor.is_bot


def test_login_containing_bot_is_not_a_bot() -> None:
    payload = load("issue_comment.created")
    payload["sender"].update(login="robotics-team", type="User")
    assert not parse("issue_comment.created", payload).actor.is_bot


# --- other events ------------------------------------------------------------------------------


def test_unhandled_event_is_ignored_with_who_and_where() -> None:
    payload = load("issues.opened")
    payload["action"] = "created"
    event = parse_event("star", DELIVERY, _body(payload))
    assert event.kind is EventKind.IGNORED
    assert event.name == "star"
    assert event.action == "created"
    assert event.actor.login == "Codertocat"
    assert event.repo is not None and event.repo.full_name == HELLO


def test_unhandled_event_with_an_odd_payload_is_still_ignored() -> None:
    event = parse_event("security_advisory", DELIVERY, _body({"action": 3, "sender": "x"}))
    assert event.kind is EventKind.IGNORED
    assert event.actor.login == ""
    assert event.repo is None
    assert event.action == ""


# --- malformed payloads ------------------------------------------------------------------------


def _broken(name: str, path: tuple[str | int, ...], value: Any) -> dict[str, Any]:
    payload = copy.deepcopy(load(name))
    node: Any = payload
    for key in path[:-1]:
        node = node[key]
    if value is _DELETE:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return payload


_DELETE = object()


@pytest.mark.parametrize(
    ("name", "path", "value", "message"),
    [
        ("issues.opened", ("issue", "number"), _DELETE, r"payload\.issue\.number: missing"),
        ("issues.opened", ("issue", "number"), "1", r"issue\.number: expected an integer, got str"),
        (
            "issues.opened",
            ("issue", "number"),
            True,
            r"issue\.number: expected an int\w*, got bool",
        ),
        ("issues.opened", ("issue", "title"), 5, r"issue\.title: expected a string, got int"),
        ("issues.opened", ("issue", "labels"), "bug", r"issue\.labels: expected an array, got str"),
        ("issues.opened", ("issue", "labels", 0, "name"), _DELETE, r"issue\.labels\[0\]\.name"),
        ("issues.opened", ("issue", "user"), None, r"issue\.user: missing"),
        ("issues.opened", ("issue",), [], r"payload\.issue: expected an object, got array"),
        ("issues.opened", ("sender",), _DELETE, r"payload\.sender: missing"),
        ("issues.opened", ("sender", "id"), "21031067", r"sender\.id: expected an integer"),
        ("issues.opened", ("repository",), _DELETE, r"payload\.repository: missing"),
        ("issues.opened", ("repository", "full_name"), None, r"repository\.full_name: missing"),
        ("issues.opened", ("installation", "id"), "2311213", r"installation\.id: expected an int"),
        ("issues.opened", ("action",), 1, r"payload\.action: expected a string, got int"),
        ("issues.labeled", ("label",), _DELETE, r"payload\.label: missing"),
        ("issue_comment.created", ("comment", "id"), _DELETE, r"comment\.id: missing"),
        ("issue_comment.created", ("comment", "body"), 7, r"comment\.body: expected a string"),
        ("pull_request.opened", ("pull_request", "head"), "changes", r"pull_request\.head: exp"),
        ("pull_request_review.submitted", ("review",), _DELETE, r"payload\.review: missing"),
        ("installation.created", ("installation", "id"), _DELETE, r"installation\.id: missing"),
        ("installation.created", ("repositories", 0), "x", r"repositories\[0\]: expected an obj"),
        ("installation_repositories.added", ("repositories_added",), {}, r"expected an array"),
    ],
)
def test_malformed_payload_raises_payload_error_naming_the_key(
    name: str, path: tuple[str | int, ...], value: Any, message: str
) -> None:
    with pytest.raises(PayloadError, match=message):
        parse(name, _broken(name, path, value))


def test_payload_error_is_a_value_error_naming_the_event() -> None:
    with pytest.raises(ValueError, match=r"GitHub 'issues' event: payload\.repository: missing"):
        parse_event("issues", DELIVERY, _body({"action": "opened"}))


@pytest.mark.parametrize("event_name", ["issue_comment", "push"])
def test_a_body_that_is_not_json_is_refused(event_name: str) -> None:
    with pytest.raises(PayloadError, match=f"GitHub '{event_name}' event: the body is not JSON"):
        parse_event(event_name, DELIVERY, b'{"action": "created", ')


def test_an_unlabeled_event_without_its_label_names_the_key() -> None:
    payload = load("issues.labeled")
    payload["action"] = "unlabeled"
    del payload["label"]
    with pytest.raises(PayloadError, match=r"payload\.label: missing"):
        parse("issues.labeled", payload)


@pytest.mark.parametrize("event_name", ["issues", "push"])
def test_payload_that_is_not_an_object_is_refused(event_name: str) -> None:
    with pytest.raises(PayloadError, match="payload: expected an object, got array"):
        parse_event(event_name, DELIVERY, b"[]")


# --- delivery keys -----------------------------------------------------------------------------


def test_delivery_key_names_app_and_delivery() -> None:
    assert delivery_key(DELIVERY, "12345", b"{}") == f"github:12345:{DELIVERY}"


def test_delivery_key_without_an_app() -> None:
    assert delivery_key(DELIVERY, None, b"{}") == f"github:-:{DELIVERY}"


def test_delivery_key_without_a_delivery_id_hashes_the_body() -> None:
    empty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert delivery_key("", "12345", b"") == f"github:sha256:{empty}"
    assert delivery_key("  ", None, b"") == f"github:sha256:{empty}"
    assert delivery_key("", "1", b"a") != delivery_key("", "1", b"b")
    assert delivery_key("", "1", b"a") == delivery_key("", "2", b"a")
