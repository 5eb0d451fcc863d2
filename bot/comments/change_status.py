"""What people read of the bot's change request after it was opened.

The status comment of the task that opened it gains a section (``after_text``): the head
commit's checks (passed / failed / pending) while they run, what the bot decided about
them (a CI fix round, reported as pre-existing, waiting for a person, ready for review),
and the rounds it ran with what each cost, added up with the task's own figures. When
the CI fix rounds are used up, the change request gets a comment naming the failing
checks and the ``help needed`` label (``ChangeReporter.give_up``). Each thread a review
round answered gets its own short reply (``thread_reply``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from bot.comments.language import choose_language
from bot.comments.render import excerpt, render
from bot.comments.reporter import IssueReporter
from bot.comments.wording import ROUND_LABELS
from bot.config import Settings
from bot.events import Check, CheckState, IssueRef, RoundKind, TaskState
from bot.followup.record import ChangeRecord, CiNote, RoundRecord
from bot.forges.base import Forge
from bot.llm.prices import dollars
from bot.storage.base import CommentIds, Task

MAX_CHECKS_SHOWN = 20
CHECK_ICONS = {
    CheckState.PASSED: "✅",
    CheckState.FAILED: "❌",
    CheckState.PENDING: "⏳",
    CheckState.RUNNING: "🔄",
    CheckState.WAITING: "✋",
    CheckState.CANCELLED: "⚪",
}
HELP_KIND = "ci-help"  # the marker kind of the comment on the change request


def checks_line(checks: list[Check]) -> str:
    shown = [f"{CHECK_ICONS[c.state]} {excerpt(c.name, limit=60)}" for c in checks]
    if len(shown) > MAX_CHECKS_SHOWN:
        shown = [*shown[:MAX_CHECKS_SHOWN], f"+{len(shown) - MAX_CHECKS_SHOWN}"]
    return " · ".join(shown)


def _round_line(found: RoundRecord, language: str) -> dict[str, Any]:
    about = found.about
    if found.kind is RoundKind.REVIEW and about.isdigit():  # a review round: its threads
        about = render("round_threads", language, n=int(about), unanswered=found.unanswered)
    return {
        "label": render(ROUND_LABELS[found.kind], language, number=found.number),
        "head": found.head_sha[:7],
        "state": render(f"state_{found.state.value}", language),
        "about": excerpt(about, limit=120),
        "tokens": f"{found.tokens:,}" if found.tokens else "",
        "cost": dollars(found.cost) if found.cost else "",
        "pushed": found.pushed_sha[:7],
    }


def after_text(
    record: ChangeRecord,
    change: IssueRef,
    language: str,
    *,
    prefix: str,
    limit: int,
    base: str,
    own: tuple[int, float],
) -> str:
    """The status comment's section about the change request; ``own``: the task's own
    tokens and cost, to which the rounds' are added."""
    names = ", ".join(excerpt(n, limit=60) for n in record.names)
    rounds = record.rounds_of(RoundKind.CI) if record.note is CiNote.GIVE_UP else 0
    note = ""
    if record.note is not CiNote.NONE:
        note = render(
            f"ci_{record.note.value}", language, names=names, number=_latest(record),
            limit=limit, rounds=rounds, base=base, prefix=prefix,
        )  # fmt: skip
    if record.untrusted and record.note is not CiNote.UNTRUSTED:
        others = ", ".join(excerpt(n, limit=60) for n in record.untrusted)
        note = " ".join(
            part for part in (note, render("ci_untrusted", language, names=others)) if part
        )
    tokens, cost = own[0] + record.tokens, own[1] + record.cost
    return render(
        "change_request",
        language,
        url=change.web_url,
        sha=record.checks_sha[:7],
        checks=checks_line(record.checks),
        note=note,
        rounds=[_round_line(r, language) for r in record.rounds],
        tokens=f"{tokens:,}",
        cost=dollars(cost) if cost else "",
    )


def _latest(record: ChangeRecord) -> int:
    kinds = {CiNote.FIX: RoundKind.CI, CiNote.CONFLICT: RoundKind.BASE}
    kind = kinds.get(record.note)
    return record.rounds_of(kind) if kind is not None else 0


def thread_reply(language: str, *, commit: str | None, reply: str) -> str:
    """One thread's answer: what changed, with the commit, or why nothing did."""
    said = reply.strip() or render("thread_no_answer", language)
    if commit:
        return render("thread_changed", language, sha=commit[:12], reply=said)
    return render("thread_unchanged", language, reply=said)


class ChangeReporter:
    """Writes on the issue of the task that opened the change request, and on it;
    ``comment_ids`` keeps the ids of the comments it posted, by marker."""

    def __init__(self, forge: Forge, *, settings: Settings, comment_ids: CommentIds) -> None:
        self.forge = forge
        self.settings = settings
        self.comment_ids = comment_ids

    def _reporter(self, task: Task) -> IssueReporter:
        return IssueReporter(task, self.forge, settings=self.settings, comment_ids=self.comment_ids)

    def language(self, origin: Task) -> str:
        issue = origin.request.issue
        return choose_language(self.settings, f"{issue.title}\n{issue.body}")

    async def show(
        self,
        origin: Task,
        snapshot: dict[str, Any] | None,
        record: ChangeRecord,
        change: IssueRef,
        *,
        base: str = "",
    ) -> None:
        """Edit the status comment of ``origin`` to show the change request now."""
        settings = self.settings
        own = (int((snapshot or {}).get("total_tokens", 0)),
               float((snapshot or {}).get("cost", 0.0)))  # fmt: skip
        text = after_text(
            record, change, self.language(origin), prefix=settings.commands.prefix,
            limit=settings.ci.max_fix_rounds, base=base, own=own,
        )  # fmt: skip
        await self._reporter(origin).refresh(snapshot, after=text)

    async def give_up(
        self, origin: Task, change: IssueRef, *, sha: str, checks: list[str], rounds: int
    ) -> None:
        """The CI fix rounds are used up: say which checks fail, on the change request,
        and label it (and the issue of the task) ``help needed``."""
        language = self.language(origin)
        body = render(
            "ci_help_needed", language, sha=sha[:12], rounds=rounds,
            checks=[excerpt(name, limit=120) for name in checks],
            prefix=self.settings.commands.prefix,
        )  # fmt: skip
        on_change = replace(origin, request=replace(origin.request, issue=change))
        reporter = self._reporter(on_change)
        await reporter.note(HELP_KIND, body)
        await reporter.label(TaskState.NEEDS_HUMAN)
        await self._reporter(origin).label(TaskState.NEEDS_HUMAN)
