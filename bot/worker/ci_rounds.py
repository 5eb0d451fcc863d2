"""The one decision per head commit of the bot's change request, and what follows it.

``decide`` reads the change request (head, base, mergeability, draft) and its head
commit's checks as they are now, whatever event (or poll) woke it: the same forge state
gives the same decision, and the store's mark for the head commit (``ci_mark``) lets
only the first one act. A failure is compared with the base branch's head first (a
failure there too is reported, not fixed); then a CI fix round starts with the failed
checks as a person would read them (only those of the repository's own CI:
``followup.ci.from_repo_ci``; the others are reported), or the rounds are used up and
a person is asked, or it is reported; all green takes the draft out of draft when
``workspace.ready_when_green`` is on and the bot's gate passed on that commit. A change
request in conflict with its base gets a base round first (once per head and base).
"""

from __future__ import annotations

import logging

from bot import offload
from bot.change_state import ChangeRequestState, CommitChecks, LogTail
from bot.config import CiSettings, bot_names, secret_values
from bot.events import OPEN_STATES, FollowUpRound, RoundKind, TaskState
from bot.followup.branch import BaseAction, base_action
from bot.followup.ci import (
    CiAction,
    CiDecision,
    CiStep,
    CiVerdict,
    ci_mark,
    decide_ci,
    needs_base_checks,
    plan_ci_step,
)
from bot.followup.ci_context import ci_context
from bot.followup.record import ChangeRecord, CiNote
from bot.forges.base import Forge, NotFound
from bot.storage.base import Watch
from bot.untrusted import fence
from bot.worker.round_desk import RoundDesk
from bot.worker.watchbook import change_record, record_of

log = logging.getLogger("bot.worker")

MAX_LOGS = 3  # failed jobs whose log tail a round gets
_REPORTED = {
    CiVerdict.FAILED: CiNote.AUTOFIX_OFF,
    CiVerdict.NEEDS_PERSON: CiNote.NEEDS_PERSON,
    CiVerdict.PRE_EXISTING: CiNote.PRE_EXISTING,
    CiVerdict.UNTRUSTED: CiNote.UNTRUSTED,
}


def change_mark(key: str, sha: str) -> str:
    """When the checks of head ``sha`` were last seen to change, by which inbox item."""
    return f"ci-change:{key}@{sha}"


def base_mark(key: str, head_sha: str, base_sha: str) -> str:
    """One base round per head commit and base commit."""
    return f"base:{key}@{head_sha}:{base_sha}"


class CiRounds:
    def __init__(self, desk: RoundDesk) -> None:
        self.desk = desk

    async def limits(self, watch: Watch) -> CiSettings:
        """``ci.*`` with the fix rounds capped by what is left of the revision limit."""
        ci = self.desk.settings.ci
        left = await self.desk.revisions_left(watch)
        return ci.model_copy(update={"max_fix_rounds": min(ci.max_fix_rounds, left)})

    async def decide(
        self,
        owner: str,
        watch: Watch,
        forge: Forge,
        *,
        sha: str | None,
        last_change_at: float | None,
    ) -> CiStep | None:
        """Decide on the head commit (``sha``; None: whatever the head is now, for the
        poll) once its checks settled; the step taken, or None when there was none to
        take (closed, superseded, a round running, a base round instead, decided).
        ``last_change_at``: when its checks were last seen to change (None: as the
        store's mark says, 0 when no event ever told of them)."""
        desk, store = self.desk, self.desk.store
        state = await forge.get_change_request_state(watch.issue.repo, watch.issue.number)
        if state.state not in OPEN_STATES:
            await change_record(store, watch.key, lambda r: None, is_open=False)
            return None
        if sha is not None and sha != state.head_sha:
            return None  # a newer head was pushed: its own checks decide
        if await store.active_task_for(watch.key) is not None:
            return None  # a round runs: what it pushes gets the next decision
        if base_action(state) is BaseAction.RESOLVE_CONFLICTS:
            await self.base_round(owner, watch, state)
            return None
        mark = ci_mark(watch.repo_key, state.number, state.head_sha)
        if await store.get_mark(mark) is not None:
            return None  # this head commit had its decision
        if last_change_at is None:
            seen = await store.get_mark(change_mark(watch.key, state.head_sha))
            last_change_at = seen[1] if seen is not None else 0.0
        commit = await forge.get_commit_checks(watch.issue.repo, state.head_sha)
        decision = await self._decision(forge, watch, state, commit, last_change_at)
        record = record_of(watch)
        step = plan_ci_step(
            decision,
            decided=False,
            rounds_done=record.rounds_of(RoundKind.CI),
            settings=await self.limits(watch),
            autofix=watch.autofix,
            gate_passed=bool(record.gate_sha) and record.gate_sha == state.head_sha,
            ready_when_green=desk.settings.workspace.ready_when_green,
            draft=state.draft,
        )
        if step.action is CiAction.ALREADY_DECIDED:
            return None
        if step.action is CiAction.WAIT:
            await self._running(watch, state, decision)
            return step
        if not await store.claim(mark, owner=owner):
            return None  # another worker took this decision
        await self._act(step, watch, forge, state, commit)
        return step

    async def _decision(
        self,
        forge: Forge,
        watch: Watch,
        state: ChangeRequestState,
        commit: CommitChecks,
        last_change_at: float,
    ) -> CiDecision:
        settings = self.desk.settings
        names = bot_names(settings, watch.issue.repo.forge)  # as a reporter, exactly
        now = self.desk.clock()
        decision = decide_ci(commit.checks, head_sha=state.head_sha, last_change_at=last_change_at,
                             now=now, settings=settings.ci, bot_names=names)  # fmt: skip
        if needs_base_checks(decision, base_read=False) and state.base_sha:
            base = await forge.get_commit_checks(watch.issue.repo, state.base_sha)
            decision = decide_ci(commit.checks, head_sha=state.head_sha,
                                 last_change_at=last_change_at, now=now, settings=settings.ci,
                                 bot_names=names, base_checks=base.checks)  # fmt: skip
        return decision

    async def _running(self, watch: Watch, state: ChangeRequestState, decision: CiDecision) -> None:
        """Unsettled: show the checks as they stand (when that changed)."""
        note = CiNote.RUNNING if decision.pending else CiNote.NONE

        def show(record: ChangeRecord) -> bool:
            record.head_sha = state.head_sha
            changed = record.show_checks(state.head_sha, decision.checks)
            return record.say(note) or changed

        saved = await change_record(self.desk.store, watch.key, show)
        if saved is not None and saved[2]:
            await self.desk.show(saved[0], saved[1], base=state.base_branch)

    async def _act(
        self,
        step: CiStep,
        watch: Watch,
        forge: Forge,
        state: ChangeRequestState,
        commit: CommitChecks,
    ) -> None:
        decision = step.decision
        failed = [c.name for c in decision.failed]
        note, names = CiNote.GREEN, list[str]()
        match step.action:
            case CiAction.FIX:
                note, names = CiNote.FIX, failed
            case CiAction.GIVE_UP:
                note, names = CiNote.GIVE_UP, failed
            case CiAction.REPORT:
                note = _REPORTED[decision.verdict]
                shown = {
                    CiVerdict.FAILED: decision.failed,
                    CiVerdict.NEEDS_PERSON: decision.waiting,
                    CiVerdict.PRE_EXISTING: decision.pre_existing,
                    CiVerdict.UNTRUSTED: decision.untrusted,
                }[decision.verdict]
                names = [c.name for c in shown]
            case CiAction.MARK_READY:
                await forge.mark_ready_for_review(watch.issue.repo, state.number)
                note = CiNote.READY

        def keep(record: ChangeRecord) -> None:
            record.head_sha = state.head_sha
            record.show_checks(state.head_sha, decision.checks)
            record.say(note, names)
            record.untrusted = [c.name for c in decision.untrusted]
            record.ready = record.ready or note is CiNote.READY

        store = self.desk.store
        saved = await change_record(store, watch.key, keep)
        if saved is None:
            return
        watch, record, _ = saved
        if step.action is CiAction.FIX:
            record = await self._fix(watch, forge, state, commit, decision) or record
        log.info("%s@%s: %s (%s)", watch.key, state.head_sha[:12], step.action.value, step.reason)
        origin = await store.get_task(watch.task_id)
        if step.action is CiAction.GIVE_UP and origin is not None:
            # the task that opened the change request ends needing a person, as it says
            await store.set_state(origin.id, TaskState.NEEDS_HUMAN, error=step.reason,
                                  expect_state=origin.state)  # fmt: skip
        await self.desk.show(watch, record, base=state.base_branch)
        if step.action is CiAction.GIVE_UP and origin is not None:
            await self.desk.reporter(forge).give_up(
                origin, watch.issue, sha=state.head_sha, checks=failed,
                rounds=record.rounds_of(RoundKind.CI),
            )  # fmt: skip

    async def _fix(
        self,
        watch: Watch,
        forge: Forge,
        state: ChangeRequestState,
        commit: CommitChecks,
        decision: CiDecision,
    ) -> ChangeRecord | None:
        """Start the CI fix round with what a person would look at."""
        logs: dict[str, LogTail] = {}
        for check in decision.failed:
            if check.log_id and check.log_id not in logs and len(logs) < MAX_LOGS:
                try:
                    logs[check.log_id] = await forge.get_job_log(watch.issue.repo, check.log_id)
                except NotFound:
                    continue
        secrets = tuple(secret_values(self.desk.settings))
        context = await offload.compute(  # text work: the logs' tails cut, cleaned, fenced
            ci_context, decision.failed, annotations=commit.annotations, logs=logs,
            fence=fence, known_secrets=secrets,
        )  # fmt: skip
        names = tuple(c.name for c in decision.failed)
        number = record_of(watch).rounds_of(RoundKind.CI) + 1
        found = FollowUpRound(RoundKind.CI, number, state.head_sha, state.base_branch, names)
        started = await self.desk.start_round(
            watch, found, instructions=context, about=", ".join(names)
        )
        return started[1] if started is not None else None

    async def base_round(self, owner: str, watch: Watch, state: ChangeRequestState) -> None:
        """It conflicts with its base: one base round per head and base commit, within
        ``ci.max_fix_rounds`` of them."""
        record = record_of(watch)
        number = record.rounds_of(RoundKind.BASE) + 1
        if number > self.desk.settings.ci.max_fix_rounds:
            return
        store = self.desk.store
        if not await store.claim(base_mark(watch.key, state.head_sha, state.base_sha), owner=owner):
            return
        found = FollowUpRound(RoundKind.BASE, number, state.head_sha, state.base_branch)
        started = await self.desk.start_round(
            watch, found, instructions="", about=state.base_branch
        )
        if started is None:
            return

        def keep(record: ChangeRecord) -> None:
            record.head_sha = state.head_sha
            record.say(CiNote.CONFLICT)

        saved = await change_record(store, watch.key, keep)
        if saved is not None:
            await self.desk.show(saved[0], saved[1], base=state.base_branch)
