import dataclasses

import msgspec.structs
import pytest

from bot.config import Settings
from bot.events import (
    Actor,
    Check,
    ChecksReport,
    CheckState,
    CommandName,
    CommentRef,
    EventKind,
    FollowUpRound,
    ForgeEvent,
    ForgeKind,
    HeadRef,
    IssueRef,
    RepoRef,
    RoundKind,
    TaskMode,
    TaskRequest,
)
from bot.forges.base import Permission
from bot.storage.base import Task, TaskState
from bot.triggers import (
    ActionKind,
    Ignore,
    Intent,
    IntentKind,
    Reply,
    ReplyKind,
    ScheduleRound,
    SetAutofix,
    classify,
    decide,
    inbox_payload,
    is_own_or_bot,
    needs_permission,
    owns_change_request,
    refine,
    stored_intent,
)

SETTINGS = Settings()
REPO = RepoRef(ForgeKind.GITHUB, "octo/hello", scope_id="1")
ISSUE = IssueRef(REPO, 7, title="Fix the README", labels=("coding agent",))


def event(
    kind: EventKind,
    *,
    body: str = "",
    actor: str = "alice",
    is_bot: bool = False,
    label: str | None = None,
    issue: IssueRef = ISSUE,
    review_state: str | None = None,
) -> ForgeEvent:
    return ForgeEvent(
        forge=ForgeKind.GITHUB,
        kind=kind,
        name="x",
        action="y",
        delivery_id="d",
        actor=Actor(actor, "1", is_bot),
        repo=issue.repo,
        issue=issue,
        comment=CommentRef(55, body, actor) if body else None,
        label_added=label,
        labels_added=(label,) if label else (),
        extra={} if review_state is None else {"review_state": review_state},
    )


def task(state: TaskState = TaskState.RUNNING, request: TaskRequest | None = None) -> Task:
    request = request or TaskRequest(issue=ISSUE, requested_by="alice")
    return Task(id="t1", issue_key=ISSUE.key, repo_key=REPO.key, request=request, state=state)


def intent_of(e: ForgeEvent) -> Intent:
    verdict = classify(e, SETTINGS)
    assert isinstance(verdict, Intent), verdict
    return verdict


def kinds(actions: list) -> list[ActionKind]:
    return [a.kind for a in actions]


def test_trigger_label_starts_a_task() -> None:
    intent = intent_of(event(EventKind.ISSUE_LABELED, label="coding agent"))
    actions = decide(
        intent, permission=Permission.WRITE, active=None, latest=None, settings=SETTINGS
    )
    assert kinds(actions) == [ActionKind.REACT, ActionKind.CREATE_TASK]
    request = actions[1].request
    assert request is not None and request.mode is TaskMode.RUN
    assert request.requested_by == "alice" and request.issue.number == 7


def test_other_labels_bots_and_closed_issues_are_ignored() -> None:
    assert isinstance(classify(event(EventKind.ISSUE_LABELED, label="bug"), SETTINGS), Ignore)
    bot = event(EventKind.COMMENT_CREATED, body="/agent run", actor="renovate[bot]", is_bot=True)
    assert isinstance(classify(bot, SETTINGS), Ignore)
    own = event(EventKind.COMMENT_CREATED, body="/agent run", actor="coding-agent[bot]")
    assert isinstance(classify(own, SETTINGS), Ignore)
    closed = msgspec.structs.replace(ISSUE, state="closed")
    assert isinstance(
        classify(event(EventKind.ISSUE_LABELED, label="coding agent", issue=closed), SETTINGS),
        Ignore,
    )


def test_our_marker_in_a_comment_is_ignored_even_from_a_person() -> None:
    body = "quoting: <!-- coding-agent:task=t1 kind=status seq=0 -->"
    assert isinstance(classify(event(EventKind.COMMENT_CREATED, body=body), SETTINGS), Ignore)


def test_opened_with_the_label_starts() -> None:
    intent = intent_of(event(EventKind.ISSUE_OPENED))
    assert intent.kind is IntentKind.START
    unlabeled = msgspec.structs.replace(ISSUE, labels=())
    assert isinstance(classify(event(EventKind.ISSUE_OPENED, issue=unlabeled), SETTINGS), Ignore)


def test_readers_are_denied_with_one_reply_and_nothing_queued() -> None:
    intent = intent_of(event(EventKind.COMMENT_CREATED, body="/agent run"))
    for permission in (Permission.NONE, Permission.READ, Permission.TRIAGE):
        actions = decide(intent, permission=permission, active=None, latest=None, settings=SETTINGS)
        assert kinds(actions) == [ActionKind.REPLY]
        assert actions[0].text == "denied" and actions[0].quote == "/agent run"


def test_plain_comment_from_a_reader_is_silently_ignored() -> None:
    intent = intent_of(event(EventKind.COMMENT_CREATED, body="me too"))
    assert (
        decide(intent, permission=Permission.READ, active=task(), latest=None, settings=SETTINGS)
        == []
    )


def test_comment_without_active_task_needs_no_lookup_and_with_one_is_feedback() -> None:
    intent = intent_of(event(EventKind.COMMENT_CREATED, body="use tabs please"))
    assert not needs_permission(intent, active=None)
    assert needs_permission(intent, active=task())
    actions = decide(
        intent, permission=Permission.WRITE, active=task(), latest=None, settings=SETTINGS
    )
    assert kinds(actions) == [ActionKind.REACT, ActionKind.MESSAGE]
    assert actions[1].message_kind == "feedback"
    assert actions[1].payload == {"author": "alice", "body": "use tabs please"}
    assert actions[1].requeue is False


def test_feedback_wakes_a_task_waiting_for_an_answer() -> None:
    intent = intent_of(event(EventKind.COMMENT_CREATED, body="It is the install section"))
    actions = decide(
        intent,
        permission=Permission.ADMIN,
        active=task(TaskState.AWAITING_INPUT),
        latest=None,
        settings=SETTINGS,
    )
    assert actions[1].requeue is True


@pytest.mark.parametrize("kind", [EventKind.ISSUE_LABELED, EventKind.ISSUE_OPENED])
def test_trigger_label_while_running_is_silent(kind: EventKind) -> None:
    # GitHub sends "opened" (with the label) and "labeled" for one new issue
    intent = intent_of(event(kind, label="coding agent"))
    assert intent.from_label
    for permission in (Permission.WRITE, Permission.TRIAGE):
        actions = decide(
            intent, permission=permission, active=task(), latest=None, settings=SETTINGS
        )
        assert actions == []


def test_second_trigger_by_comment_while_running_gets_a_polite_reply() -> None:
    intent = intent_of(event(EventKind.COMMENT_CREATED, body="/agent run"))
    assert not intent.from_label
    actions = decide(
        intent, permission=Permission.WRITE, active=task(), latest=None, settings=SETTINGS
    )
    assert kinds(actions) == [ActionKind.REACT, ActionKind.REPLY]
    assert actions[1].text == "already_running"
    mention = intent_of(event(EventKind.COMMENT_CREATED, body="@coding-agent"))
    actions = decide(
        mention, permission=Permission.WRITE, active=task(), latest=None, settings=SETTINGS
    )
    assert kinds(actions) == [ActionKind.REPLY] and actions[0].text == "already_running"
    intent = intent_of(event(EventKind.COMMENT_CREATED, body="/agent run also add docs"))
    actions = decide(
        intent, permission=Permission.WRITE, active=task(), latest=None, settings=SETTINGS
    )
    assert kinds(actions) == [ActionKind.REACT, ActionKind.MESSAGE]
    assert actions[1].payload["body"] == "also add docs"


def test_mention_starts_with_its_text_as_instructions() -> None:
    intent = intent_of(event(EventKind.COMMENT_CREATED, body="@coding-agent fix the typo"))
    actions = decide(
        intent, permission=Permission.MAINTAIN, active=None, latest=None, settings=SETTINGS
    )
    assert actions[1].request is not None
    assert actions[1].request.instructions == "fix the typo"
    assert actions[1].request.trigger_comment_id == 55


@pytest.mark.parametrize(
    ("name", "state", "requeue"),
    [
        ("approve", TaskState.AWAITING_APPROVAL, True),
        ("reject", TaskState.AWAITING_APPROVAL, True),
        ("stop", TaskState.RUNNING, False),
        ("stop", TaskState.PAUSED, True),
        ("pause", TaskState.RUNNING, False),
        ("pause", TaskState.AWAITING_APPROVAL, False),
        ("resume", TaskState.PAUSED, True),
    ],
)
def test_control_commands_become_messages(name: str, state: TaskState, requeue: bool) -> None:
    intent = intent_of(event(EventKind.COMMENT_CREATED, body=f"/agent {name} because"))
    actions = decide(
        intent, permission=Permission.WRITE, active=task(state), latest=None, settings=SETTINGS
    )
    assert kinds(actions) == [ActionKind.REACT, ActionKind.MESSAGE]
    assert actions[1].payload == {"name": name, "args": "because", "author": "alice"}
    assert actions[1].requeue is requeue


def test_control_command_without_a_task() -> None:
    intent = intent_of(event(EventKind.COMMENT_CREATED, body="/agent approve"))
    actions = decide(
        intent, permission=Permission.WRITE, active=None, latest=None, settings=SETTINGS
    )
    assert kinds(actions) == [ActionKind.REACT, ActionKind.REPLY]
    assert actions[1].text == "no_active_task"


def test_plan_retry_status_help_and_unknown() -> None:
    body = "/agent plan\n/agent status\n/agent help\n/agent frobnicate"
    intent = intent_of(event(EventKind.COMMENT_CREATED, body=body))
    assert [c.name for c in intent.commands] == [
        CommandName.PLAN,
        CommandName.STATUS,
        CommandName.HELP,
        CommandName.UNKNOWN,
    ]
    done = task(TaskState.DONE)
    actions = decide(
        intent, permission=Permission.WRITE, active=None, latest=done, settings=SETTINGS
    )
    assert kinds(actions) == [
        ActionKind.REACT,
        ActionKind.CREATE_TASK,
        ActionKind.STATUS,
        ActionKind.REPLY,
        ActionKind.REPLY,
    ]
    assert actions[1].request is not None and actions[1].request.mode is TaskMode.PLAN_ONLY
    assert actions[2].task_id == "t1"
    retry = intent_of(event(EventKind.COMMENT_CREATED, body="/agent retry"))
    actions = decide(
        retry, permission=Permission.WRITE, active=None, latest=done, settings=SETTINGS
    )
    assert actions[1].request is not None
    assert actions[1].request.mode is TaskMode.RETRY
    assert actions[1].request.previous_task_id == "t1"
    actions = decide(
        retry, permission=Permission.WRITE, active=task(), latest=None, settings=SETTINGS
    )
    assert actions[1].text == "retry_while_active"


BOT_PR = IssueRef(
    REPO,
    12,
    is_change_request=True,
    author="coding-agent[bot]",
    head_branch="agent/7-fix-the-readme",
    head_repo="octo/hello",
)


def follow_up_of(e: ForgeEvent, active: Task | None = None) -> list:
    intent = intent_of(e)
    assert intent.kind is IntentKind.REVIEW, intent
    return decide(
        intent, permission=Permission.WRITE, active=active, latest=None, settings=SETTINGS
    )


def round_of(e: ForgeEvent, active: Task | None = None, **kw: Permission) -> list:
    intent = intent_of(e)
    assert intent.kind is IntentKind.ROUND, intent
    permission = kw.get("permission", Permission.WRITE)
    return decide(intent, permission=permission, active=active, latest=None, settings=SETTINGS)


def test_review_activity_on_the_bots_change_request_counts_towards_one_round() -> None:
    line = event(EventKind.REVIEW_COMMENT, body="rename this variable", issue=BOT_PR)
    assert round_of(line) == [ScheduleRound()]  # no task per comment: one round later
    review = event(EventKind.REVIEW_SUBMITTED, issue=BOT_PR, review_state="changes_requested")
    assert round_of(review) == [ScheduleRound()]  # a review of line comments only
    assert round_of(line, permission=Permission.READ) == []  # nobody the bot acts for
    actions = round_of(event(EventKind.REVIEW_COMMENT, body="and this", issue=BOT_PR), task())
    # it joins the running task, and its thread gets the round after
    assert kinds(actions) == [ActionKind.REACT, ActionKind.ROUND, ActionKind.MESSAGE]
    assert actions[2].payload == {"author": "alice", "body": "and this"}
    assert round_of(review, task()) == []  # an empty review tells the running task nothing


def test_a_comment_the_running_round_holds_already_is_no_news_to_it() -> None:
    line = event(EventKind.REVIEW_COMMENT, body="rename this variable", issue=BOT_PR)
    assert line.comment is not None
    held = FollowUpRound(RoundKind.REVIEW, comment_ids=(line.comment.id,))
    running = task(request=TaskRequest(BOT_PR, "alice", TaskMode.FOLLOW_UP, round=held))
    assert round_of(line, running) == []


@pytest.mark.parametrize(
    "pr",
    [
        msgspec.structs.replace(BOT_PR, head_branch="feature/x"),
        msgspec.structs.replace(BOT_PR, head_repo="mallory/hello"),  # a fork's agent/ branch
        msgspec.structs.replace(BOT_PR, head_repo=None),  # a deleted fork
        msgspec.structs.replace(BOT_PR, author="mallory"),  # a person's agent/ branch
        msgspec.structs.replace(BOT_PR, author="coding-agent"),  # a person, not the App
        msgspec.structs.replace(BOT_PR, author="renovate[bot]"),
    ],
)
def test_change_requests_the_bot_does_not_own_get_no_follow_up(pr: IssueRef) -> None:
    assert owns_change_request(pr, SETTINGS) is False
    for kind in (EventKind.REVIEW_COMMENT, EventKind.REVIEW_SUBMITTED):
        verdict = classify(event(kind, body="nit", issue=pr, review_state="commented"), SETTINGS)
        assert isinstance(verdict, Ignore)
    mention = intent_of(event(EventKind.COMMENT_CREATED, body="@coding-agent fix it", issue=pr))
    assert mention.kind is IntentKind.START and mention.text == "fix it"


def test_the_bots_authorship_is_case_insensitive_and_knows_app_names() -> None:
    assert owns_change_request(
        msgspec.structs.replace(BOT_PR, author="Coding-Agent[bot]"), SETTINGS
    )
    assert owns_change_request(msgspec.structs.replace(BOT_PR, head_repo="Octo/Hello"), SETTINGS)
    slug = SETTINGS.model_copy(
        update={"bot": SETTINGS.bot.model_copy(update={"github_login": "coding-agent"})}
    )
    # the whole login, exactly (issue 27): configured as a bare slug, it names a person
    assert owns_change_request(BOT_PR, slug) is False
    gitlab = RepoRef(ForgeKind.GITLAB, "g/p", project_id=5)
    mr = msgspec.structs.replace(BOT_PR, repo=gitlab, head_repo="g/p", author="Coding-Agent-Bot")
    assert owns_change_request(mr, SETTINGS)
    assert (
        owns_change_request(msgspec.structs.replace(mr, author="coding-agent[bot]"), SETTINGS)
        is False
    )


@pytest.mark.parametrize(("state", "follows_up"), [
    ("changes_requested", True), ("commented", True), ("CHANGES_REQUESTED", True),
    ("approved", False), ("dismissed", False), ("", False),
])  # fmt: skip
def test_only_reviews_asking_for_changes_start_a_follow_up(state: str, follows_up: bool) -> None:
    review = event(EventKind.REVIEW_SUBMITTED, body="Looks good", issue=BOT_PR, review_state=state)
    intent = intent_of(review)
    if follows_up:
        assert intent.kind is IntentKind.ROUND
        return
    assert intent.kind is IntentKind.COMMENT  # feedback while a task runs, nothing otherwise
    assert not needs_permission(intent, active=None)
    actions = decide(
        intent, permission=Permission.WRITE, active=task(), latest=None, settings=SETTINGS
    )
    assert kinds(actions) == [ActionKind.REACT, ActionKind.MESSAGE]


def test_an_empty_approval_is_ignored() -> None:
    review = event(EventKind.REVIEW_SUBMITTED, issue=BOT_PR, review_state="approved")
    assert classify(review, SETTINGS) == Ignore("an empty review")


def test_a_plain_comment_on_the_bots_change_request_is_feedback_only_while_a_task_runs() -> None:
    intent = intent_of(event(EventKind.COMMENT_CREATED, body="thanks!", issue=BOT_PR))
    assert intent.kind is IntentKind.COMMENT
    assert not needs_permission(intent, active=None)
    assert (
        decide(intent, permission=Permission.WRITE, active=None, latest=None, settings=SETTINGS)
        == []
    )
    actions = decide(
        intent, permission=Permission.WRITE, active=task(), latest=None, settings=SETTINGS
    )
    assert kinds(actions) == [ActionKind.REACT, ActionKind.MESSAGE]


def test_a_mention_or_command_on_the_bots_change_request_is_explicit() -> None:
    mention = event(EventKind.COMMENT_CREATED, body="@coding-agent use tabs", issue=BOT_PR)
    [_, create] = follow_up_of(mention)
    assert create.request is not None and create.request.instructions == "use tabs"
    approved = event(
        EventKind.REVIEW_SUBMITTED,
        body="@coding-agent nit: tabs",
        issue=BOT_PR,
        review_state="approved",
    )
    assert intent_of(approved).kind is IntentKind.REVIEW
    command = intent_of(event(EventKind.COMMENT_CREATED, body="/agent status", issue=BOT_PR))
    assert command.kind is IntentKind.COMMANDS
    quoted = intent_of(event(EventKind.COMMENT_CREATED, body="> @coding-agent x\nok", issue=BOT_PR))
    assert quoted.kind is IntentKind.COMMENT


def test_an_unknown_author_must_be_looked_up_before_deciding() -> None:
    mr = msgspec.structs.replace(BOT_PR, author="")  # GitLab payloads name the author by id only
    assert owns_change_request(mr, SETTINGS) is None
    intent = intent_of(event(EventKind.REVIEW_COMMENT, body="rename it", issue=mr))
    assert intent.kind is IntentKind.ROUND and intent.author_unknown
    with pytest.raises(ValueError, match="author"):
        decide(intent, permission=Permission.WRITE, active=None, latest=None, settings=SETTINGS)
    plain = intent_of(event(EventKind.COMMENT_CREATED, body="thanks", issue=mr))
    assert plain.kind is IntentKind.COMMENT and not plain.author_unknown  # no look-up needed
    fork = msgspec.structs.replace(mr, head_repo="mallory/hello")
    assert isinstance(
        classify(event(EventKind.REVIEW_COMMENT, body="x", issue=fork), SETTINGS), Ignore
    )


def checks_event(*branches: str, actor: str = "coding-agent[bot]") -> ForgeEvent:
    report = ChecksReport(
        head_sha="a" * 40, branches=branches, checks=(Check("test", CheckState.FAILED),)
    )
    return ForgeEvent(
        forge=ForgeKind.GITHUB, kind=EventKind.CHECKS_CHANGED, name="check_run",
        action="completed", delivery_id="d", actor=Actor(actor, "1", True), repo=REPO,
        checks=report,
    )  # fmt: skip


def test_ci_results_on_the_bots_branches_count_whoever_pushed() -> None:
    # the bot's own push makes the checks run: they are still the decision's input
    intent = intent_of(checks_event("agent/7-fix-the-readme"))
    assert intent.kind is IntentKind.CI
    assert isinstance(classify(checks_event("main", "feature/x"), SETTINGS), Ignore)
    assert isinstance(classify(checks_event(), SETTINGS), Ignore)  # no branch named


def test_a_push_to_the_bots_change_request_is_news_for_its_head() -> None:
    pushed = msgspec.structs.replace(
        event(EventKind.CHANGE_REQUEST_PUSHED, actor="coding-agent[bot]", is_bot=True,
              issue=BOT_PR),
        head=HeadRef(sha="c" * 40, base_branch="main"),
    )  # fmt: skip
    assert intent_of(pushed).kind is IntentKind.PUSHED
    other = msgspec.structs.replace(pushed, issue=msgspec.structs.replace(BOT_PR, author="bob"))
    assert isinstance(classify(other, SETTINGS), Ignore)


@pytest.mark.parametrize(("args", "expected"), [
    ("off", SetAutofix(False, quote="/agent autofix off")),
    ("on", SetAutofix(True, quote="/agent autofix on")),
    ("maybe", Reply(ReplyKind.AUTOFIX_USAGE, quote="/agent autofix maybe")),
])  # fmt: skip
def test_autofix_switches_the_ci_rounds_of_a_change_request(args: str, expected: object) -> None:
    intent = intent_of(event(EventKind.COMMENT_CREATED, body=f"/agent autofix {args}",
                             issue=BOT_PR))  # fmt: skip
    actions = decide(
        intent, permission=Permission.WRITE, active=None, latest=None, settings=SETTINGS
    )
    assert actions == [actions[0], expected] and actions[0].kind is ActionKind.REACT
    on_issue = intent_of(event(EventKind.COMMENT_CREATED, body="/agent autofix off"))
    actions = decide(
        on_issue, permission=Permission.WRITE, active=None, latest=None, settings=SETTINGS
    )
    assert actions[1] == Reply(ReplyKind.AUTOFIX_NOT_WATCHED, quote="/agent autofix off")


# --- classified once: the intent kept with the inbox row, refined after a look-up ---------------

CLASSIFIED = [
    event(EventKind.ISSUE_LABELED, label="coding agent"),
    event(EventKind.COMMENT_CREATED, body="/agent run fast\n/agent status"),
    event(EventKind.COMMENT_CREATED, body="@coding-agent use tabs", issue=BOT_PR),
    event(
        EventKind.REVIEW_COMMENT, body="rename it", issue=msgspec.structs.replace(BOT_PR, author="")
    ),
    event(EventKind.COMMENT_CREATED, body="thanks"),
    event(EventKind.COMMENT_CREATED, body="@coding-agent add a test"),
    event(
        EventKind.REVIEW_SUBMITTED, body="@coding-agent nit", issue=BOT_PR, review_state="approved"
    ),
    event(
        EventKind.REVIEW_SUBMITTED,
        body=" Please add tests. ",
        issue=BOT_PR,
        review_state="commented",
    ),
]


@pytest.mark.parametrize("sent", CLASSIFIED, ids=lambda e: e.comment.body if e.comment else "label")
def test_the_intent_kept_with_the_inbox_row_reads_back_whole(sent: ForgeEvent) -> None:
    intent = intent_of(sent)
    payload = inbox_payload(intent)
    assert ForgeEvent.from_dict(payload) == sent  # the event reads as before, beside it
    assert stored_intent(payload, sent) == intent
    assert stored_intent(sent.to_dict(), sent) is None  # a row from before: no intent kept
    with pytest.raises(ValueError):
        stored_intent({**payload, "intent": {**payload["intent"], "kind": "launch"}}, sent)


LOOKED_UP = [
    ("bot's", "coding-agent[bot]", "agent/7-fix-the-readme", "octo/hello"),
    ("a person's", "mallory", "agent/7-fix-the-readme", "octo/hello"),
    ("a fork's", "coding-agent[bot]", "agent/7-fix-the-readme", "mallory/hello"),
    ("a feature branch's", "alice", "feature/x", "octo/hello"),
]
UNKNOWN = msgspec.structs.replace(BOT_PR, author="", head_branch=None, head_repo=None)


@pytest.mark.parametrize(("whose", "author", "head", "head_repo"), LOOKED_UP)
@pytest.mark.parametrize(
    ("kind", "body"),
    [
        (EventKind.REVIEW_COMMENT, "rename it"),
        (EventKind.REVIEW_SUBMITTED, "@coding-agent nit"),
        (EventKind.COMMENT_CREATED, "@coding-agent use tabs"),
        (EventKind.COMMENT_CREATED, "/agent stop"),
        (EventKind.COMMENT_CREATED, "thanks"),
    ],
)
def test_refining_after_a_look_up_decides_as_classifying_the_whole_event_would(
    whose: str, author: str, head: str, head_repo: str, kind: EventKind, body: str
) -> None:
    """What the dispatcher's look-up of a change request (author, head branch) changes is
    decided again from the intent's commands and mention: the same verdict as a
    classification of the event with those facts in it, without reading the text again."""
    sent = event(kind, body=body, issue=UNKNOWN, review_state="commented")
    first = classify(sent, SETTINGS)
    if isinstance(first, Ignore):
        return
    found = msgspec.structs.replace(UNKNOWN, author=author, head_branch=head, head_repo=head_repo)
    looked_up = msgspec.structs.replace(sent, issue=found)
    assert refine(first, looked_up, SETTINGS) == classify(looked_up, SETTINGS), whose


def test_refining_after_gitlabs_read_back_sees_the_labels_and_state_as_stored() -> None:
    labeled = intent_of(event(EventKind.ISSUE_LABELED, label="coding agent"))
    removed = msgspec.structs.replace(labeled.event, labels_added=(), label_added=None)
    assert refine(labeled, removed, SETTINGS) == Ignore("a label other than the trigger label")
    closed = msgspec.structs.replace(
        labeled.event, issue=msgspec.structs.replace(ISSUE, state="closed")
    )
    assert refine(labeled, closed, SETTINGS) == Ignore("the issue is closed")
    located = msgspec.structs.replace(
        labeled.event, issue=msgspec.structs.replace(ISSUE, web_url="https://x/octo/hello/7")
    )
    assert refine(labeled, located, SETTINGS) == dataclasses.replace(labeled, event=located)


def test_the_bot_is_known_by_its_account_id_once_known() -> None:
    """Issue 27: with the bot's account id known, the id decides: its login renamed, it
    is still the bot; another account with its login (a person who took the name, the
    App's slug without ``[bot]``) is not."""
    known = SETTINGS.model_copy(
        update={"bot": SETTINGS.bot.model_copy(update={"github_id": "4242"})}
    )
    renamed = msgspec.structs.replace(BOT_PR, author="renamed[bot]", author_id="4242")
    assert owns_change_request(renamed, known)
    taken = msgspec.structs.replace(BOT_PR, author="coding-agent[bot]", author_id="77")
    assert owns_change_request(taken, known) is False
    by_id_only = msgspec.structs.replace(BOT_PR, author="", author_id="4242")
    assert owns_change_request(by_id_only, known) is True
    assert owns_change_request(by_id_only, SETTINGS) is None  # the bot's id not known yet


def test_a_person_whose_login_is_the_app_s_slug_is_not_the_bot() -> None:
    """Issue 27: ``coding-agent`` (the App's slug without ``[bot]``) is a person: their
    commands are read like anyone's, not ignored as the bot's own."""
    person = Actor(login="coding-agent", id="77")
    found = classify(
        msgspec.structs.replace(event(EventKind.COMMENT_CREATED, body="/agent run"), actor=person),
        SETTINGS,
    )
    assert isinstance(found, Intent) and found.kind is IntentKind.COMMANDS
    app = Actor(login="coding-agent[bot]", id="4242")
    assert is_own_or_bot(msgspec.structs.replace(event(EventKind.COMMENT_CREATED), actor=app),
                         SETTINGS)  # fmt: skip
    known = SETTINGS.model_copy(update={"bot": SETTINGS.bot.model_copy(update={"gitlab_id": "9"})})
    gitlab_person = Actor(login="coding-agent-bot", id="10")  # the name, another account
    gl = msgspec.structs.replace(event(EventKind.COMMENT_CREATED), forge=ForgeKind.GITLAB,
                                 actor=gitlab_person)  # fmt: skip
    assert not is_own_or_bot(gl, known)
    assert is_own_or_bot(msgspec.structs.replace(gl, actor=Actor("renamed", id="9")), known)
