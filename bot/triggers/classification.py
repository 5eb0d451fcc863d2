"""A ``ForgeEvent`` -> its intent, without I/O: ``classify`` reads the text once for
commands and a mention (in the app, per delivery); ``refine`` decides again what a
look-up's facts decide (the change request's author and head branch, GitLab's labels and
state as stored). Whether the bot opened a change request (``owns_change_request``) and
whether a bot sent the event (``is_own_or_bot``) are decided here too.
"""

from __future__ import annotations

from bot.config import Settings, bot_account, bot_names, is_bot_account
from bot.events import Command, EventKind, ForgeEvent, IssueRef
from bot.triggers.intent import Ignore, Intent, IntentKind, intent_text
from bot.webhooks.commands import mention_text, parse_commands

MARKER_PREFIX = "<!-- coding-agent:"
# Review states (GitHub's ``review.state``) that ask for changes; an approval does not.
FEEDBACK_REVIEW_STATES = frozenset({"changes_requested", "commented"})


def is_own_or_bot(event: ForgeEvent, settings: Settings) -> bool:
    """Sent by a bot, or by the bot's own account (by its id: a person whose login is the
    App's slug without ``[bot]`` is a person)."""
    actor = event.actor
    return actor.is_bot or is_bot_account(
        settings, event.forge, login=actor.login, account_id=actor.id
    )


def owns_change_request(issue: IssueRef, settings: Settings) -> bool | None:
    """Whether ``issue`` is a change request the bot opened: its head is a bot branch of the
    same repository (not a fork's) and its author is the bot's account (by its id, else
    its whole login). None when only the author is unknown."""
    head = issue.head_branch or ""
    if not (issue.is_change_request and head.startswith(settings.workspace.branch_prefix)):
        return False
    if (issue.head_repo or "").lower() != issue.repo.full_name.lower():
        return False
    _, own_id = bot_account(settings, issue.repo.forge)
    if not issue.author and not (issue.author_id and own_id):
        return None
    return is_bot_account(
        settings, issue.repo.forge, login=issue.author, account_id=issue.author_id
    )


COMMENT_KINDS = frozenset(
    {EventKind.COMMENT_CREATED, EventKind.REVIEW_COMMENT, EventKind.REVIEW_SUBMITTED}
)


def classify(event: ForgeEvent, settings: Settings) -> Intent | Ignore:
    """First, I/O-free look at an event: its text is read for commands and a mention
    here, once."""
    news = _forge_news(event, settings)
    if news is not None:
        return news
    unaddressed = _unaddressed(event, settings)
    if unaddressed is not None:
        return unaddressed
    commands: tuple[Command, ...] = ()
    mention = None
    body = event.comment.body if event.comment else ""
    if event.kind in COMMENT_KINDS and MARKER_PREFIX not in body:
        commands = tuple(parse_commands(body, prefix=settings.commands.prefix))
        if not commands:
            mention = mention_text(body, bot_names=bot_names(settings, event.forge))
    return _judge(event, settings, commands, mention)


def refine(intent: Intent, event: ForgeEvent, settings: Settings) -> Intent | Ignore:
    """``intent`` for ``event`` as a look-up found it (the change request's author and
    head branch filled in, GitLab's labels and state as stored): what those facts decide
    is decided again; the commands and the mention stay as ``classify`` read them (a
    read-back whose text differs from the payload's is ignored before this)."""
    news = _forge_news(event, settings)
    if news is not None:
        return news
    unaddressed = _unaddressed(event, settings)
    if unaddressed is not None:
        return unaddressed
    return _judge(event, settings, intent.commands, intent.mention)


def _forge_news(event: ForgeEvent, settings: Settings) -> Intent | Ignore | None:
    """CI results and pushes are the forge's news, whoever caused them (the bot's own push
    too): they feed the one decision per head commit, nothing else (None: neither)."""
    if event.kind is EventKind.CHECKS_CHANGED:
        return _classify_checks(event, settings)
    if event.kind is EventKind.CHANGE_REQUEST_PUSHED:
        return _classify_push(event, settings)
    return None


def _unaddressed(event: ForgeEvent, settings: Settings) -> Ignore | None:
    if event.issue is None or event.repo is None:
        return Ignore(f"{event.name}/{event.action}: not about an issue")
    if is_own_or_bot(event, settings):
        return Ignore(f"sent by a bot ({event.actor.login})")
    return None


def _judge(
    event: ForgeEvent, settings: Settings, commands: tuple[Command, ...], mention: str | None
) -> Intent | Ignore:
    """The intent of an event about an issue, from its text's commands and mention."""
    assert event.issue is not None
    if not event.issue.is_open:
        return Ignore("the issue is closed")
    trigger = settings.labels.trigger
    if event.kind is EventKind.ISSUE_LABELED:
        if trigger in event.labels_added or event.label_added == trigger:
            return Intent(IntentKind.START, event)
        return Ignore("a label other than the trigger label")
    if event.kind is EventKind.ISSUE_OPENED:
        if trigger in event.issue.labels:
            return Intent(IntentKind.START, event)
        return Ignore("opened without the trigger label")
    if event.kind is EventKind.RUN_REQUESTED:
        return Intent(IntentKind.START, event, text=intent_text(IntentKind.START, event, None))
    if event.kind in COMMENT_KINDS:
        return _judge_comment(event, settings, commands, mention)
    return Ignore(f"{event.kind.value} events do not start or steer tasks")


def _on_bot_branch(branches: tuple[str, ...], settings: Settings) -> bool:
    prefix = settings.workspace.branch_prefix
    return any(branch.startswith(prefix) for branch in branches)


def _classify_checks(event: ForgeEvent, settings: Settings) -> Intent | Ignore:
    report = event.checks
    if event.repo is None or report is None or not report.head_sha:
        return Ignore("a CI report without a repository or commit")
    if not _on_bot_branch(report.branches, settings):
        return Ignore("checks of a commit on a branch that is not the bot's")
    return Intent(IntentKind.CI, event, on_bot_branch=True)


def _classify_push(event: ForgeEvent, settings: Settings) -> Intent | Ignore:
    issue = event.issue
    if issue is None or event.repo is None or event.head is None:
        return Ignore("a push without its change request or head")
    if owns_change_request(issue, settings) is False:
        return Ignore("a push to a change request the bot did not open")
    return Intent(IntentKind.PUSHED, event, on_bot_branch=True)


def _judge_comment(
    event: ForgeEvent, settings: Settings, commands: tuple[Command, ...], mention: str | None
) -> Intent | Ignore:
    assert event.issue is not None
    body = event.comment.body if event.comment else ""
    if MARKER_PREFIX in body:
        return Ignore("one of the bot's own comments")
    if commands:
        return Intent(IntentKind.COMMANDS, event, commands=commands)
    own = owns_change_request(event.issue, settings)
    if event.kind in (EventKind.REVIEW_COMMENT, EventKind.REVIEW_SUBMITTED):
        if own is False:
            return Ignore("a review on a change request the bot did not open")
        if _asks_for_changes(event):
            # a review, its line comments, a thread's notes: one round once they stop coming
            return Intent(
                IntentKind.ROUND, event, text=intent_text(IntentKind.ROUND, event, mention),
                on_bot_branch=True, author_unknown=own is None, mention=mention,
            )  # fmt: skip
        if not body.strip():
            return Ignore("an empty review")
    if own is not False and (mention is not None or _asks_for_changes(event)):
        kind = IntentKind.REVIEW
        text = intent_text(kind, event, mention)
        return Intent(
            kind, event, text=text, on_bot_branch=True, author_unknown=own is None, mention=mention
        )
    if mention is not None:
        return Intent(
            IntentKind.START,
            event,
            text=intent_text(IntentKind.START, event, mention),
            mention=mention,
        )
    if not body.strip():
        return Ignore("an empty comment")
    return Intent(IntentKind.COMMENT, event, text=intent_text(IntentKind.COMMENT, event, mention))


def _asks_for_changes(event: ForgeEvent) -> bool:
    """A line comment, or a review that comments or requests changes (not an approval)."""
    if event.kind is EventKind.REVIEW_COMMENT:
        return True
    state = str(event.extra.get("review_state") or "").lower()
    return event.kind is EventKind.REVIEW_SUBMITTED and state in FEEDBACK_REVIEW_STATES
