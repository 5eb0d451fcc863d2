"""Safe points and waiting: commands, answers, approvals and their timeouts.

At a safe point (between actions) ``Waits.safe_point`` reads what people said since
the last look. ``stop`` and ``pause`` end the run. A task waiting for answers
(``clarification``) re-plans once an answer arrives. A task waiting for approval
continues on ``approve``, hands a ``Rejection`` back on ``reject`` (a plan is revised,
a tool call fails), and pauses once the approval timeout has passed. An approval
answers the request it follows: the sequence number of the last message when the
request was posted is kept, and approve / reject messages up to it are ignored.
Other feedback is kept for the next reflection.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bot.agent.actions import PendingApproval
from bot.agent.approval_text import MAX_SHOWN_CHARS, arguments_json, plain, tool_call_text
from bot.agent.context import Outcome, ProgressKind
from bot.agent.context_builder import fence
from bot.agent.control import Decision, read_inbox
from bot.agent.delivery import keep_changes
from bot.agent.plan_rules import pending_actions
from bot.agent.session import Session
from bot.agent.state import ActionRecord, ActionStatus, Waiting
from bot.storage.base import TaskState


@dataclass(frozen=True, slots=True)
class Rejection:
    """A person rejected what the task waited for; ``record``: a rejected tool call."""

    subject: str
    why: str
    record: ActionRecord | None = None


def answer_block(author: str, body: str) -> str:
    return fence(body, f"answer by {author}")


class Waits:
    def __init__(self, session: Session) -> None:
        self.session = session

    async def safe_point(self) -> Outcome | Rejection | None:
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
            return Outcome(TaskState.STOPPED, reason=f"stopped by {inbox.stop}")
        if inbox.pause:
            await session.milestone(ProgressKind.PAUSED, reason="user", by=inbox.pause)
            await session.checkpoint()
            return Outcome(TaskState.PAUSED, reason=f"paused by {inbox.pause}")
        result = await self._resolve(inbox.decision, inbox.feedback)
        if inbox.last_seq != read_before and not isinstance(result, Rejection):
            # what was read is saved, also when the task goes on waiting: the worker
            # re-queues a waiting task whose checkpoint has not seen every message
            await session.checkpoint()
        if result is None:
            session.budget.check_time(session.elapsed())
        return result

    def _decisions_after(self) -> int:
        """Approvals and rejections sent before the pending request was posted answer
        something else (an earlier plan, a call that was never shown): ignored."""
        waiting = self.session.state.waiting
        if waiting is None or waiting.kind != "approval":
            return 0
        return int(waiting.details.get("after_seq", 0))

    async def _latest_seq(self) -> int:
        session = self.session
        newer = await session.ctx.store.messages_after(
            session.ctx.task.id, session.state.message_seq
        )
        return max([session.state.message_seq, *(m.seq for m in newer)])

    async def _resolve(
        self, decision: Decision | None, feedback: list[dict[str, Any]]
    ) -> Outcome | Rejection | None:
        state = self.session.state
        waiting = state.waiting
        if waiting is not None and waiting.kind == "clarification":
            if not feedback:
                return Outcome(TaskState.AWAITING_INPUT, reason="waiting for answers to questions")
            state.answers += [answer_block(str(f["author"]), str(f["body"])) for f in feedback]
            state.waiting = None
            state.planning_attempts = 0
            state.replan_reason = ""
            self.session.set_plan(None)
            return None
        state.pending_feedback += [dict(f) for f in feedback]
        if waiting is None or waiting.kind != "approval":
            return None
        if decision is None:
            return await self._still_waiting(waiting)
        return await self._decided(waiting, decision)

    async def _still_waiting(self, waiting: Waiting) -> Outcome:
        session = self.session
        if waiting.details.get("timed_out"):  # resumed after the timeout: ask again
            details = {k: v for k, v in waiting.details.items() if k != "timed_out"}
            what, text = str(details.get("what", "")), str(details.get("text", ""))
            return await self.request_approval(waiting.subject, what, text, details)
        if waiting.wake_at is not None and session.now() >= waiting.wake_at:
            waiting.details["timed_out"] = True
            session.record("approval", subject=waiting.subject, decision="timed out")
            await session.milestone(
                ProgressKind.PAUSED, reason="approval_timeout", subject=waiting.subject
            )
            await session.checkpoint()
            return Outcome(TaskState.PAUSED, reason="approval_timeout")
        what = waiting.details.get("what", waiting.subject)
        return Outcome(
            TaskState.AWAITING_APPROVAL,
            reason=f"waiting for approval of {what}",
            wake_at=waiting.wake_at,
        )

    async def _decided(self, waiting: Waiting, decision: Decision) -> Rejection | None:
        session, state = self.session, self.session.state
        state.waiting = None
        session.record(
            "approval",
            subject=waiting.subject,
            decision="approved" if decision.approved else "rejected",
            author=decision.author,
            reason=decision.reason,
        )
        details = waiting.details
        if decision.approved:
            if waiting.subject == "tool":
                state.approved_calls[str(details["key"])] = {
                    "tool": details["tool"],
                    "arguments": details["arguments"],
                }
            elif waiting.subject == "plan":
                state.plan_approved = True
            await session.checkpoint()
            return None
        why = f"{waiting.subject} rejected by {decision.author}: {decision.reason or 'no reason'}"
        state.tried.append(why)
        if waiting.subject != "tool":
            return Rejection(waiting.subject, why)
        record = ActionRecord(
            str(details["key"]),
            str(details["task_id"]),
            str(details["tool"]),
            arguments=dict(details["arguments"]),
            status=ActionStatus.FAILED,
            output=f"the call was rejected by {decision.author}: {decision.reason}",
        )
        state.records[record.key] = record
        await session.checkpoint()
        return Rejection("tool", why, record)

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

    async def request_approval(
        self, subject: str, what: str, text: str, details: dict[str, Any] | None = None
    ) -> Outcome:
        session = self.session
        timeout = session.planning.revision.approval_timeout
        wake = session.now() + timeout
        info = {**(details or {}), "what": what, "text": text}
        waiting = Waiting("approval", subject, since=session.now(), wake_at=wake, details=info)
        session.state.waiting = waiting
        session.record("approval", subject=subject, decision="requested", what=what)
        await session.milestone(
            ProgressKind.APPROVAL_REQUEST,
            subject=subject,
            what=what,
            details=text,
            timeout=timeout,
            waiting=what,
            tool=str(info.get("tool", "")),
            number=int(info.get("number", 0)),
        )
        waiting.details["after_seq"] = await self._latest_seq()  # only later answers count
        await session.checkpoint()
        return Outcome(
            TaskState.AWAITING_APPROVAL, reason=f"waiting for approval of {what}", wake_at=wake
        )

    async def ask_tool_approval(self, pending: PendingApproval) -> Outcome:
        """Ask to approve a call, showing its full arguments (saved to the run directory
        too when they are too long for the comment)."""
        details = {
            "key": pending.action.key,
            "task_id": pending.action.task_id,
            "tool": pending.tool,
            "arguments": pending.arguments,
        }
        saved = ""
        if len(arguments_json(pending.arguments)) > MAX_SHOWN_CHARS:
            saved = self.session.runlog.save_arguments(pending.action.key, pending.arguments)
        text = tool_call_text(
            pending.tool, pending.action.purpose, pending.arguments, saved_to=saved
        )
        return await self.request_approval("tool", f"the call {pending.tool}", text, details)
