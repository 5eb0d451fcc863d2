"""Review rounds on the bot's change request: every open thread, one follow-up.

Once the review activity has been quiet for ``review.quiet_seconds`` (the aftercare
waits for it), ``start`` reads the change request's threads, asks the forge who of
their authors has write access (every author, not only the openers: ``authors_of``),
keeps the unresolved ones opened by people with write access whose last word is not
the bot's, with only what writers and the bot said in them (``round_threads``), and
queues ONE round that sees them as a checklist (``T1``, ``T2``, ...), once per newest
comment (``review_mark``). When the round is done,
``answer`` gives each of its threads its own short reply (what changed, with the commit, or
why nothing did: the round's completion summary, checked against the files its push
changed) and resolves the ones a commit addressed when ``review.resolve_threads`` is on,
in as few requests as the forge allows.
"""

from __future__ import annotations

import logging
from typing import Any

from bot import offload
from bot.change_state import ReviewThread, ThreadAnswer, ThreadComment
from bot.comments.change_status import thread_reply
from bot.config import IsBot, is_bot_account, secret_values
from bot.events import FollowUpRound, RoundKind
from bot.followup.record import ChangeRecord
from bot.followup.review import (
    ThreadOutcome,
    by_bot,
    review_mark,
    round_threads,
    thread_actions,
)
from bot.forges.base import Forge, Permission, UnansweredThreads
from bot.redact import redact
from bot.run_events import Outcome
from bot.storage.base import Task, Watch
from bot.text import clip
from bot.untrusted import fence
from bot.webhooks.gitlab_common import is_bot_user
from bot.worker.permissions import PermissionCache
from bot.worker.round_desk import RoundDesk
from bot.worker.watchbook import record_of

log = logging.getLogger("bot.worker")

MAX_THREADS = 30  # checklist items of one round
MAX_COMMENT_CHARS = 2000
MAX_REPLY_CHARS = 600
# people who only replied in a round's threads whose access one round asks the forge
# about (the answers are cached for a minute, and a cached one costs nothing): GitHub 1
# request each, GitLab 2, so a round stays within its 15 requests
# (bench/followup_rounds.py); the threads' openers are all asked, as before
MAX_REPLIER_LOOKUPS = 4


def authors_of(threads: list[ReviewThread], is_bot: IsBot) -> tuple[list[str], list[str]]:
    """Who wrote in the unresolved ``threads``, each once, the bot left out (by its
    account, ``is_bot``): the threads' openers (whether a thread is worked on), then who
    only replied."""
    openers: dict[str, str] = {}
    repliers: dict[str, str] = {}
    for thread in threads:
        if thread.resolved or not thread.comments or by_bot(thread.comments[0], is_bot):
            continue  # the bot's own threads are not worked on: who replied is not asked
        for index, comment in enumerate(thread.comments):
            login = comment.author
            if login and not by_bot(comment, is_bot):
                (repliers if index else openers).setdefault(login.lower(), login)
    return list(openers.values()), [r for k, r in repliers.items() if k not in openers]


def _who(comment: ThreadComment) -> str:
    if comment.own:
        return f"{comment.author or 'the bot'} (the bot: an earlier answer)"
    return comment.author or "someone"


def checklist(items: tuple[ReviewThread, ...]) -> str:
    """The threads as checklist items ``T1``, ``T2``, ...: where each is, and what was said
    in it, fenced (the reviewers' words are data for the agent). ``items`` come from
    ``round_threads``: only writers' comments, and the bot's own marked as such."""
    parts = []
    for index, thread in enumerate(items, 1):
        where = thread.path or "the change request"
        if thread.path and thread.line:
            where = f"{thread.path}:{thread.line}"
        if thread.outdated:
            where += ", on an older commit"
        said = "\n\n".join(
            f"{_who(c)}: {clip(c.body, MAX_COMMENT_CHARS, fit=True)}" for c in thread.comments
        )
        parts.append(f"T{index} ({where}):\n{fence(said, f'review thread T{index}')}")
    return "\n\n".join(parts)


async def checklist_off_loop(items: tuple[ReviewThread, ...]) -> str:
    """``checklist``, in an offload worker when what the reviewers wrote is long (people's
    text is cleaned off the event loop)."""
    said = sum(len(c.body) for thread in items for c in thread.comments)
    if said <= offload.LARGE_TEXT:
        return checklist(items)
    return await offload.compute(checklist, items)


def answers_of(outcome: Outcome) -> dict[str, dict[str, Any]]:
    """The round's completion summary's ``threads`` answers, by label."""
    listed = outcome.summary.get("threads") if isinstance(outcome.summary, dict) else None
    found: dict[str, dict[str, Any]] = {}
    for entry in listed if isinstance(listed, list) else []:
        if isinstance(entry, dict) and isinstance(entry.get("thread"), str):
            found[entry["thread"].strip()] = entry
    return found


def outcomes_of(
    found: FollowUpRound,
    answers: dict[str, dict[str, Any]],
    *,
    pushed: str | None,
    paths: set[str],
) -> list[ThreadOutcome]:
    """What the round did about each of its threads. A thread counts as changed when the
    push changed its file (any file, for a thread not on one) and the round does not say
    it left it; the round's word alone changes nothing."""
    files = list(found.paths) + [""] * (len(found.threads) - len(found.paths))
    outcomes = []
    for index, (thread_id, path) in enumerate(zip(found.threads, files, strict=True), 1):
        thread = ReviewThread(thread_id, (), path=path or None)
        said = answers.get(f"T{index}", {})
        touched = bool(pushed) and (thread.path is None or thread.path in paths)
        claimed = bool(said.get("changed", touched))
        commit = pushed if touched and claimed else None
        outcomes.append(ThreadOutcome(thread, commit, str(said.get("reply") or "")))
    return outcomes


class ReviewRounds:
    def __init__(self, desk: RoundDesk, permissions: PermissionCache) -> None:
        self.desk = desk
        self.permissions = permissions

    async def _writers(
        self, forge: Forge, watch: Watch, openers: list[str], repliers: list[str]
    ) -> set[str]:
        """The authors the bot acts for: write access, and a person (another bot's review
        comments are left alone, like its comments). Every opener is asked of the forge;
        of the people who only replied, at most ``MAX_REPLIER_LOOKUPS`` (a cached answer
        costs nothing) and the others count as without write access this round."""
        repo, found, asked = watch.issue.repo, set(), 0
        for index, login in enumerate(openers + repliers):
            if is_bot_user(login):
                continue
            permission = self.permissions.cached(repo, login)
            if permission is None and index >= len(openers):
                if asked >= MAX_REPLIER_LOOKUPS:
                    log.info("%s: access of %s not asked (over this round's %d look-ups)",
                             watch.key, login, MAX_REPLIER_LOOKUPS)  # fmt: skip
                    continue
                asked += 1
            if permission is None:
                permission = await self.permissions.of(forge, repo, login)
            if permission >= Permission.WRITE:
                found.add(login)
        return found

    async def start(self, owner: str, watch: Watch, forge: Forge) -> bool:
        """Start the round; False when a task runs on the change request (try later)."""
        store = self.desk.store
        if await store.active_task_for(watch.key) is not None:
            return False
        repo, number = watch.issue.repo, watch.issue.number
        threads = [t for t in await forge.list_review_threads(repo, number) if t.resolvable]
        settings = self.desk.settings

        def is_bot(login: str, account: str) -> bool:
            return is_bot_account(settings, repo.forge, login=login, account_id=account)

        writers = await self._writers(forge, watch, *authors_of(threads, is_bot))
        review = round_threads(threads, writers=writers, is_bot=is_bot)
        for thread, why in review.ignored:
            log.info("%s: thread %s left alone: %s", watch.key, thread.id, why)
        if review.dropped:
            log.debug("%s: %d comment(s) by people without write access left out of the round",
                      watch.key, review.dropped)  # fmt: skip
        items = review.items[:MAX_THREADS]
        if not items:
            return True
        newest = max(c.id for thread in items for c in thread.comments)
        if not await store.claim(review_mark(watch.repo_key, number, newest), owner=owner):
            return True
        record = record_of(watch)
        found = FollowUpRound(
            RoundKind.REVIEW,
            record.rounds_of(RoundKind.REVIEW) + 1,
            head_sha=record.head_sha,
            threads=tuple(t.id for t in items),
            paths=tuple(t.path or "" for t in items),
            comment_ids=tuple(c.id for t in items for c in t.comments),
        )
        # the round's own status comment on the change request tells it has begun
        await self.desk.start_round(
            watch,
            found,
            instructions=await checklist_off_loop(items),
            about=str(len(items)),  # threads
        )
        return True

    async def answer(
        self, task: Task, outcome: Outcome, watch: Watch, delivery: dict[str, Any]
    ) -> int:
        """One reply per thread of the round, the addressed ones resolved; once. Returns
        how many threads the forge refused the answer in (each logged with why)."""
        found, forge = task.request.round, self.desk.forge(watch)
        if found is None or found.kind is not RoundKind.REVIEW or forge is None:
            return 0
        store = self.desk.store
        if not await store.claim(f"answers:{task.id}", owner=f"{task.id}:{self.desk.clock()}"):
            return 0  # answered before (a second look at the same outcome)
        repo, number = watch.issue.repo, watch.issue.number
        pushed = delivery.get("head_sha") if isinstance(delivery.get("head_sha"), str) else None
        paths = {str(p) for p in delivery.get("paths") or []}
        outcomes = outcomes_of(found, answers_of(outcome), pushed=pushed, paths=paths)
        origin = await store.get_task(watch.task_id) or task
        language = self.desk.reporter(forge).language(origin)
        secrets = tuple(secret_values(self.desk.settings))
        by_thread = {o.thread.id: o for o in outcomes}
        answers = []
        for action in thread_actions(outcomes, settings=self.desk.settings.review):
            said = by_thread[action.thread_id]
            reason = clip(said.reason, MAX_REPLY_CHARS, fit=True)
            body = redact(thread_reply(language, commit=said.commit, reply=reason), known=secrets)
            answers.append(ThreadAnswer(action.thread_id, body, resolve=action.resolve))
        answered = {a.thread_id for a in answers}
        if answers:
            try:
                await forge.answer_threads(repo, number, answers)
            except UnansweredThreads as exc:  # the others were answered: only these are not
                answered = set(exc.answered)
                for thread_id, why in exc.failed.items():
                    log.warning("%s: thread %s not answered: %s", watch.key, thread_id, why)
        resolved = sum(1 for a in answers if a.resolve and a.thread_id in answered)
        log.info("%s: answered %d of %d thread(s), resolved %d", watch.key, len(answered),
                 len(answers), resolved)  # fmt: skip
        return len(answers) - len(answered)


def review_round_of(record: ChangeRecord, task_id: str) -> bool:
    found = record.round_of_task(task_id)
    return found is not None and found.kind is RoundKind.REVIEW
