"""What people said, and asking them: commands, answers, approvals and their timeouts.

At a safe point (between actions) ``People.listen`` reads what people said since the
last look and says what it means for the run, as a value (``Heard``): stop, pause, go
on waiting (with the outcome), ask again (a request that timed out), plan again
(answers arrived), approved, rejected (a ``Rejection`` for the WAIT stage), or nothing
that changes the stage (the values are ``bot.record.heard``'s). The loop acts on it:
only the loop moves the stage and ends the run. ``People.ask`` posts an approval
request; ``plan_request`` and ``tool_request`` build the requests
(docs/planning.md#waiting).
"""

from __future__ import annotations

from collections.abc import Callable

from bot import tracing
from bot.agent.session import Session
from bot.config import RevisionSettings
from bot.events import CommandName

# What a safe point heard, re-exported: the loop reads the values as ``heard.``.
from bot.record.heard import Approved as Approved
from bot.record.heard import AskAgain as AskAgain
from bot.record.heard import GoOnWaiting as GoOnWaiting
from bot.record.heard import Heard as Heard
from bot.record.heard import Nothing as Nothing
from bot.record.heard import Pause as Pause
from bot.record.heard import Rejection as Rejection
from bot.record.heard import Replan as Replan
from bot.record.heard import Stop as Stop
from bot.record.heard import waiting_for_answers
from bot.record.history import ApprovalVerdict, HistoryKind
from bot.record.inbox import Command, Decision, read_inbox
from bot.record.plan_rules import names_other_plan, needs_plan_approval, plan_digest
from bot.record.state import ActionRecord, ActionStatus, AgentState, Feedback, ToolCall, Waiting
from bot.record.texts import (
    MAX_SHOWN_CHARS,
    arguments_json,
    other_plan_text,
    plan_text,
    stale_text,
    tool_call_text,
)
from bot.run_events import ApprovalAsked, Notice, Outcome, Paused, PauseReason, WaitKind
from bot.storage.base import TaskState
from bot.storage.retry import persist
from bot.untrusted import MAX_PERSON_CHARS, clean_off_loop, fence_off_loop


async def answer_block(author: str, body: str) -> str:
    """A person's answer (or feedback, or reason), cut, cleaned and fenced for the model."""
    return await fence_off_loop(body, f"answer by {author}", limit=MAX_PERSON_CHARS)


class People:
    def __init__(
        self, session: Session, settings: RevisionSettings, *, clock: Callable[[], float]
    ) -> None:
        self.session = session
        self.state: AgentState = session.state
        self.settings = settings
        self.clock = clock

    async def listen(self) -> Heard:
        """What people said since the last look, and what it means for the run."""
        session, state = self.session, self.state
        task_id = session.ctx.task.id
        store, read_before = session.ctx.store, state.message_seq
        messages = await persist(
            lambda: store.messages_after(task_id, read_before), what="the task's messages"
        )
        inbox = read_inbox(messages, read_before, decisions_after=self._decisions_after())
        state.message_seq = inbox.last_seq
        for command in inbox.commands:
            session.record(HistoryKind.COMMAND, **command.to_dict())
        for item in inbox.feedback:
            session.record(HistoryKind.HUMAN_FEEDBACK, author=item.author, body=item.body)
        if inbox.stop:
            return Stop(inbox.stop)
        if inbox.pause:
            return Pause(inbox.pause)
        await self._say_stale(inbox.commands)
        heard = await self._resolve(inbox.decision, inbox.feedback)
        if isinstance(heard, Nothing):
            return Nothing(read=inbox.last_seq != read_before)
        if isinstance(heard, GoOnWaiting) and inbox.last_seq != read_before:
            await session.checkpoint()  # the worker re-queues a task that has not seen all
        return heard

    def _decisions_after(self) -> int:
        """Approvals and rejections sent before the pending request was posted answer
        something else (an earlier plan, a call that was never shown): ignored."""
        waiting = self.state.waiting
        if waiting is None or not waiting.approvable:
            return 0
        return waiting.after_seq

    async def _latest_seq(self) -> int:
        seq = self.state.message_seq
        ctx = self.session.ctx
        newer = await ctx.store.messages_after(ctx.task.id, seq)
        return max([seq, *(m.seq for m in newer)])

    async def _resolve(self, decision: Decision | None, feedback: list[Feedback]) -> Heard:
        state = self.state
        waiting = state.waiting
        if waiting is not None and not waiting.approval:
            if not feedback and decision is not None and waiting.plan_hash:
                return await self._best_guess_decided(waiting, decision)
            if not feedback:
                return GoOnWaiting(waiting_for_answers())
            for item in feedback:
                state.answers.append(await answer_block(item.author, item.body))
            self._forget_plan()
            return Replan()
        state.pending_feedback += feedback
        if waiting is None:
            return Nothing()
        if decision is None:
            return await self._still_waiting(waiting)
        return await self._decided(waiting, decision)

    def _forget_plan(self) -> None:
        state = self.state
        state.waiting = None
        state.planning_attempts = 0
        state.replan_reason = state.coarser = ""
        self.session.set_plan(None)

    async def _still_waiting(self, waiting: Waiting) -> Heard:
        if waiting.timed_out:  # resumed after the timeout: ask again
            return AskAgain(waiting)
        if waiting.wake_at is not None and self.clock() >= waiting.wake_at:
            waiting.timed_out = True
            reason = PauseReason.APPROVAL_TIMEOUT
            self.session.record(
                HistoryKind.APPROVAL, subject=waiting.kind.value, decision=ApprovalVerdict.TIMED_OUT
            )
            await self.session.milestone(Paused(reason=reason.value, subject=waiting.kind.value))
            await self.session.checkpoint()
            return GoOnWaiting(Outcome(TaskState.PAUSED, reason=reason.value, pause=reason))
        return GoOnWaiting(
            Outcome(
                TaskState.AWAITING_APPROVAL,
                reason=f"waiting for approval of {waiting.what or waiting.kind.value}",
                wake_at=waiting.wake_at,
            )
        )

    async def _say_stale(self, commands: list[Command]) -> None:
        """An approval sent before the pending request, or while nothing waited for one,
        was meant for an earlier plan or call: it approves nothing, and the bot says so."""
        waiting = self.state.waiting
        pending = waiting is not None and waiting.approvable
        stale = [c for c in commands if c.name is CommandName.APPROVE and (c.stale or not pending)]
        if not stale:
            return
        what = (waiting.what or waiting.kind.value) if waiting is not None and pending else ""
        authors = [c.author for c in stale]
        await self.session.milestone(Notice(text=stale_text(authors, what)))

    async def _best_guess_decided(self, waiting: Waiting, decision: Decision) -> Heard:
        """Questions shown with a best-guess plan: an approval runs exactly that plan; a
        rejection's reason is taken as an answer, and the task plans again."""
        session, state = self.session, self.state
        digest = waiting.plan_hash
        if decision.approved and names_other_plan(decision.reason, digest):
            text = other_plan_text(decision.author, decision.reason, digest, "the best-guess plan")
            await session.milestone(Notice(text=text))
            return GoOnWaiting(waiting_for_answers())
        state.waiting = None
        verdict = ApprovalVerdict.of(decision.approved)
        session.record(HistoryKind.APPROVAL, subject="best_guess", decision=verdict,
                       author=decision.author, reason=decision.reason)  # fmt: skip
        if decision.approved:
            state.approved_plan = digest
            return Approved()
        reason = decision.reason or "the best-guess plan was rejected"
        state.answers.append(await answer_block(decision.author, reason))
        self._forget_plan()
        return Replan()

    def _plan_digest(self) -> str:
        plan = self.session.plan
        return plan_digest(plan.to_document()) if plan is not None else ""

    async def _decided(self, waiting: Waiting, decision: Decision) -> Heard:
        session, state = self.session, self.state
        digest = ""
        if waiting.kind in (WaitKind.PLAN, WaitKind.REVISION):
            digest = waiting.plan_hash or self._plan_digest()  # an older checkpoint: no hash
            if decision.approved and names_other_plan(decision.reason, digest):
                text = other_plan_text(decision.author, decision.reason, digest, waiting.what)
                await session.milestone(Notice(text=text))
                return await self._still_waiting(waiting)
        state.waiting = None
        session.record(
            HistoryKind.APPROVAL,
            subject=waiting.kind.value,
            decision=ApprovalVerdict.of(decision.approved),
            author=decision.author,
            reason=decision.reason,
        )
        call = waiting.call
        if decision.approved:
            if digest:
                state.approved_plan = digest  # binds exactly the plan the request showed
            state.approved_paths.update(waiting.paths)  # a push: exactly the content shown
            if call is not None:
                state.approved_calls[call.key] = {"tool": call.tool, "arguments": call.arguments}
            return Approved()
        # A person's reason reaches the revision prompt: cut and cleaned like all they write.
        reason = await clean_off_loop(decision.reason, limit=MAX_PERSON_CHARS)
        why = f"{waiting.kind.value} rejected by {decision.author}: {reason or 'no reason'}"
        state.tried.append(why)
        if call is None:
            return Rejection(waiting.kind, why)
        record = ActionRecord(
            call.key,
            call.task_id,
            call.tool,
            arguments=dict(call.arguments),
            status=ActionStatus.FAILED,
            output=f"the call was rejected by {decision.author}: {reason}",
        )
        state.records[record.key] = record
        return Rejection(WaitKind.TOOL, why, record)

    # --- asking --------------------------------------------------------------------------------

    def plan_request(self, *, plan_only: bool) -> Waiting | None:
        """In plan-approval mode, the request to approve the plan about to run, unless a
        person approved exactly this plan (None: it may run)."""
        state = self.state
        revised = state.plan_number > 0
        needed = needs_plan_approval(
            plan_only=plan_only,
            require_for_revisions=self.settings.require_human_approval,
            revised=revised,
        )
        digest = self._plan_digest()
        if not needed or not digest or state.approved_plan == digest:
            return None
        number = state.plan_number
        kind = WaitKind.REVISION if revised else WaitKind.PLAN
        what = f"revision {number} of the plan" if revised else "the plan"
        text = plan_text(self.session.plan, state.finished_keys(), digest)
        return Waiting(kind, what=what, text=text, number=number, plan_hash=digest)

    def tool_request(self, call: ToolCall, purpose: str) -> Waiting:
        """The request to approve a call, showing its full arguments (saved to the run
        directory too when they are too long for the comment)."""
        saved = ""
        if len(arguments_json(call.arguments)) > MAX_SHOWN_CHARS:
            saved = self.session.runlog.save_arguments(call.key, call.arguments)
        text = tool_call_text(call.tool, purpose, call.arguments, saved_to=saved)
        return Waiting(WaitKind.TOOL, what=f"the call {call.tool}", text=text, call=call)

    async def ask(self, request: Waiting) -> Outcome:
        """Post the approval request and wait (the loop has moved the task to WAIT)."""
        session = self.session
        timeout = self.settings.approval_timeout
        now = self.clock()
        waiting = Waiting(
            request.kind, since=now, wake_at=now + timeout, what=request.what,
            text=request.text, number=request.number, call=request.call,
            plan_hash=request.plan_hash, paths=dict(request.paths),
        )  # fmt: skip
        self.state.waiting = waiting
        what, call = waiting.what, waiting.call
        session.record(HistoryKind.APPROVAL, subject=waiting.kind.value,
                       decision=ApprovalVerdict.REQUESTED, what=what)  # fmt: skip
        await session.milestone(
            ApprovalAsked(
                subject=waiting.kind,
                what=what,
                details=waiting.text,
                timeout=timeout,
                waiting=what,
                tool=call.tool if call is not None else "",
                number=waiting.number,
            )
        )
        waiting.after_seq = await self._latest_seq()  # only later answers count
        await session.checkpoint()
        tracing.waiting(waiting.kind.value, what)  # a span that ends with the run
        reason = f"waiting for approval of {what}"
        return Outcome(TaskState.AWAITING_APPROVAL, reason=reason, wake_at=waiting.wake_at)
