"""Safe points and waiting: commands, answers, approvals and their timeouts.

At a safe point (between actions) ``Waits.safe_point`` reads what people said since
the last look. ``stop`` and ``pause`` end the run. A task waiting for answers
(``clarification``) re-plans once an answer arrives. A task waiting for approval
continues on ``approve``, hands a ``Rejection`` back on ``reject`` (a plan is revised,
a tool call fails), and pauses once the approval timeout has passed. Other feedback
is kept for the next reflection.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bot.agent.actions import PendingApproval
from bot.agent.context import Outcome, ProgressKind
from bot.agent.context_builder import fence
from bot.agent.control import Decision, read_inbox
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
        inbox = read_inbox(messages, state.message_seq)
        state.message_seq = inbox.last_seq
        for command in inbox.commands:
            session.record("command", **command)
        for item in inbox.feedback:
            session.record("human_feedback", author=item["author"], body=item["body"])
        if inbox.stop:
            await session.checkpoint()
            return Outcome(TaskState.STOPPED, reason=f"stopped by {inbox.stop}")
        if inbox.pause:
            await session.milestone(ProgressKind.PAUSED, reason="user", by=inbox.pause)
            await session.checkpoint()
            return Outcome(TaskState.PAUSED, reason=f"paused by {inbox.pause}")
        result = await self._resolve(inbox.decision, inbox.feedback)
        if result is None and not inbox.empty:
            await session.checkpoint()
        if result is None:
            session.budget.check_time(session.elapsed())
        return result

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
        lines = [f"Goal: {plan.goal.main_objective}"]
        lines += [f"- {a.key}: {a.tool} - {a.purpose}" for a in pending_actions(plan, set())]
        return "\n".join(lines)

    async def request_approval(
        self, subject: str, what: str, text: str, details: dict[str, Any] | None = None
    ) -> Outcome:
        session = self.session
        timeout = session.planning.revision.approval_timeout
        wake = session.now() + timeout
        info = {**(details or {}), "what": what, "text": text}
        session.state.waiting = Waiting(
            "approval", subject, since=session.now(), wake_at=wake, details=info
        )
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
        await session.checkpoint()
        return Outcome(
            TaskState.AWAITING_APPROVAL, reason=f"waiting for approval of {what}", wake_at=wake
        )

    async def ask_tool_approval(self, pending: PendingApproval) -> Outcome:
        args = ", ".join(f"{k}={str(v)[:80]!r}" for k, v in pending.arguments.items())
        details = {
            "key": pending.action.key,
            "task_id": pending.action.task_id,
            "tool": pending.tool,
            "arguments": pending.arguments,
        }
        text = f"{pending.tool}({args})\n{pending.action.purpose}"
        return await self.request_approval("tool", f"the call {pending.tool}", text, details)
