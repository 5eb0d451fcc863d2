"""Safe points and waiting: commands, answers, approvals and their timeouts.

At a safe point (between actions) ``Waits.safe_point`` reads what people said since
the last look. ``stop`` and ``pause`` end the run. A task waiting for answers
re-plans once an answer arrives. A task waiting for approval continues on
``approve``, keeps a ``Rejection`` for the WAIT stage on ``reject`` (a plan is
revised, a tool call fails), and pauses once the approval timeout has passed. An
approval answers the request it follows: the sequence number of the last message
when the request was posted is kept, and approve / reject messages up to it are
ignored. Other feedback is kept for the next reflection. Every way out raises ``Exit``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bot.agent.actions import PendingApproval
from bot.agent.approval_text import MAX_SHOWN_CHARS, arguments_json, plain, tool_call_text
from bot.agent.context import Outcome, PauseReason, ProgressKind
from bot.agent.context_builder import fence
from bot.agent.control import Decision, read_inbox
from bot.agent.delivery import keep_changes
from bot.agent.exits import Exit
from bot.agent.plan_rules import pending_actions
from bot.agent.session import Session
from bot.agent.state import ActionRecord, ActionStatus, Stage, ToolCall, Waiting, WaitKind
from bot.storage.base import TaskState

WAITING_FOR_ANSWERS = "waiting for answers to questions"


@dataclass(frozen=True, slots=True)
class Rejection:
    """A person rejected what the task waited for; ``record``: a rejected tool call."""

    kind: WaitKind
    why: str
    record: ActionRecord | None = None


def answer_block(author: str, body: str) -> str:
    return fence(body, f"answer by {author}")


def waiting_for_answers() -> Outcome:
    return Outcome(TaskState.AWAITING_INPUT, reason=WAITING_FOR_ANSWERS)


class Waits:
    def __init__(self, session: Session) -> None:
        self.session = session

    async def safe_point(self) -> Rejection | None:
        """Act on what people said; raises ``Exit`` to stop, pause or go on waiting."""
        session, state = self.session, self.session.state
        messages = await session.ctx.store.messages_after(session.ctx.task.id, state.message_seq)
        read_before = state.message_seq
        inbox = read_inbox(messages, read_before, decisions_after=self._decisions_after())
        state.message_seq = inbox.last_seq
        for command in inbox.commands:
            session.record("command", **command)
        for item in inbox.feedback:
            session.record("human_feedback", author=item["author"], body=item["body"])
        if inbox.stop:
            await keep_changes(session)
            await session.checkpoint()
            raise Exit(Outcome(TaskState.STOPPED, reason=f"stopped by {inbox.stop}"))
        if inbox.pause:
            reason = PauseReason.PERSON
            await session.milestone(ProgressKind.PAUSED, reason=reason.value, by=inbox.pause)
            await session.checkpoint()
            raise Exit(Outcome(TaskState.PAUSED, reason=f"paused by {inbox.pause}", pause=reason))
        read = inbox.last_seq != read_before
        try:
            rejection = await self._resolve(inbox.decision, inbox.feedback)
        except Exit:
            if read:  # what was read is saved, also when the task goes on waiting: the
                await session.checkpoint()  # worker re-queues a task that has not seen all
            raise
        if read and rejection is None:
            await session.checkpoint()
        if rejection is None:
            session.budget.check_time(session.elapsed())
        return rejection

    def _decisions_after(self) -> int:
        """Approvals and rejections sent before the pending request was posted answer
        something else (an earlier plan, a call that was never shown): ignored."""
        waiting = self.session.state.waiting
        if waiting is None or not waiting.approval:
            return 0
        return waiting.after_seq

    async def _latest_seq(self) -> int:
        session = self.session
        newer = await session.ctx.store.messages_after(
            session.ctx.task.id, session.state.message_seq
        )
        return max([session.state.message_seq, *(m.seq for m in newer)])

    async def _resolve(
        self, decision: Decision | None, feedback: list[dict[str, Any]]
    ) -> Rejection | None:
        state = self.session.state
        waiting = state.waiting
        if waiting is not None and not waiting.approval:
            if not feedback:
                raise Exit(waiting_for_answers())
            state.answers += [answer_block(str(f["author"]), str(f["body"])) for f in feedback]
            state.waiting = None
            state.planning_attempts = 0
            state.replan_reason = ""
            self.session.set_plan(None)
            self.session.to(Stage.PLAN)
            return None
        state.pending_feedback += [dict(f) for f in feedback]
        if waiting is None:
            return None
        if decision is None:
            raise Exit(await self._still_waiting(waiting))
        return await self._decided(waiting, decision)

    async def _still_waiting(self, waiting: Waiting) -> Outcome:
        session = self.session
        if waiting.timed_out:  # resumed after the timeout: ask again (raises Exit)
            await self.request_approval(waiting.kind, waiting.what, waiting.text, waiting)
        if waiting.wake_at is not None and session.now() >= waiting.wake_at:
            waiting.timed_out = True
            reason = PauseReason.APPROVAL_TIMEOUT
            session.record("approval", subject=waiting.kind.value, decision="timed out")
            await session.milestone(
                ProgressKind.PAUSED, reason=reason.value, subject=waiting.kind.value
            )
            await session.checkpoint()
            return Outcome(TaskState.PAUSED, reason=reason.value, pause=reason)
        return Outcome(
            TaskState.AWAITING_APPROVAL,
            reason=f"waiting for approval of {waiting.what or waiting.kind.value}",
            wake_at=waiting.wake_at,
        )

    async def _decided(self, waiting: Waiting, decision: Decision) -> Rejection | None:
        session, state = self.session, self.session.state
        state.waiting = None
        session.record(
            "approval",
            subject=waiting.kind.value,
            decision="approved" if decision.approved else "rejected",
            author=decision.author,
            reason=decision.reason,
        )
        call = waiting.call
        if decision.approved:
            if call is not None:
                state.approved_calls[call.key] = {"tool": call.tool, "arguments": call.arguments}
            session.to(Stage.EXECUTE)
            await session.checkpoint()
            return None
        why = (
            f"{waiting.kind.value} rejected by {decision.author}: {decision.reason or 'no reason'}"
        )
        state.tried.append(why)
        if call is None:
            return Rejection(waiting.kind, why)
        record = ActionRecord(
            call.key,
            call.task_id,
            call.tool,
            arguments=dict(call.arguments),
            status=ActionStatus.FAILED,
            output=f"the call was rejected by {decision.author}: {decision.reason}",
        )
        state.records[record.key] = record
        await session.checkpoint()
        return Rejection(WaitKind.TOOL, why, record)

    # --- asking --------------------------------------------------------------------------------

    def plan_details(self) -> str:
        plan = self.session.plan
        if plan is None:
            return ""
        lines = [f"Goal: {plain(plan.goal.main_objective)}"]
        lines += [
            f"- {plain(a.key)}: {plain(a.tool)} - {plain(a.purpose)}"
            for a in pending_actions(plan, set())
        ]
        return "\n".join(lines)

    async def ask_plan_approval(self) -> None:
        await self.request_approval(WaitKind.PLAN, "the plan", self.plan_details())

    async def request_approval(
        self, kind: WaitKind, what: str, text: str, asked: Waiting | None = None
    ) -> None:
        """Post the request and wait: raises ``Exit`` (awaiting approval)."""
        session = self.session
        timeout = session.planning.revision.approval_timeout
        wake = session.now() + timeout
        call = asked.call if asked is not None else None
        number = asked.number if asked is not None else 0
        waiting = Waiting(
            kind, since=session.now(), wake_at=wake, what=what, text=text, number=number, call=call
        )
        session.state.waiting = waiting
        session.to(Stage.WAIT)
        session.record("approval", subject=kind.value, decision="requested", what=what)
        await session.milestone(
            ProgressKind.APPROVAL_REQUEST,
            subject=kind.value,
            what=what,
            details=text,
            timeout=timeout,
            waiting=what,
            tool=call.tool if call is not None else "",
            number=number,
        )
        waiting.after_seq = await self._latest_seq()  # only later answers count
        await session.checkpoint()
        raise Exit(
            Outcome(
                TaskState.AWAITING_APPROVAL, reason=f"waiting for approval of {what}", wake_at=wake
            )
        )

    async def ask_tool_approval(self, pending: PendingApproval) -> None:
        """Ask to approve a call, showing its full arguments (saved to the run directory
        too when they are too long for the comment)."""
        call = ToolCall(pending.action.key, pending.action.task_id, pending.tool, pending.arguments)
        saved = ""
        if len(arguments_json(pending.arguments)) > MAX_SHOWN_CHARS:
            saved = self.session.runlog.save_arguments(pending.action.key, pending.arguments)
        text = tool_call_text(
            pending.tool, pending.action.purpose, pending.arguments, saved_to=saved
        )
        asked = Waiting(WaitKind.TOOL, call=call)
        await self.request_approval(WaitKind.TOOL, f"the call {pending.tool}", text, asked)
