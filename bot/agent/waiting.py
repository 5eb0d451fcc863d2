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

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from bot.agent.answers import answer_block, waiting_for_answers
from bot.agent.approval_text import MAX_SHOWN_CHARS, arguments_json, plain, tool_call_text
from bot.agent.artifacts import Artifacts
from bot.agent.context import Outcome, PauseReason, ProgressKind
from bot.agent.control import Decision, read_inbox
from bot.agent.exits import Exit
from bot.agent.plan_approval import (
    names_other_plan,
    needs_plan_approval,
    other_plan_text,
    plan_digest,
    plan_id,
    stale_text,
)
from bot.agent.plan_rules import pending_actions
from bot.agent.ports import Recorder
from bot.agent.runlog import RunLog
from bot.agent.state import (
    ActionRecord,
    ActionStatus,
    AgentState,
    Stage,
    ToolCall,
    Waiting,
    WaitKind,
)
from bot.config import RevisionSettings
from bot.storage.base import Store, TaskState


@dataclass(frozen=True, slots=True)
class Rejection:
    """A person rejected what the task waited for; ``record``: a rejected tool call."""

    kind: WaitKind
    why: str
    record: ActionRecord | None = None


class Waits:
    def __init__(
        self,
        state: AgentState,
        recorder: Recorder,
        store: Store,
        task_id: str,
        settings: RevisionSettings,
        artifacts: Artifacts,
        runlog: RunLog,
        *,
        clock: Callable[[], float],
        check_time: Callable[[], None],
    ) -> None:
        self.state = state
        self.recorder = recorder
        self.store = store
        self.task_id = task_id
        self.settings = settings
        self.artifacts = artifacts
        self.runlog = runlog
        self.clock = clock
        self.check_time = check_time
        # Pushes the work so far when people stop the task (``Delivery.save_work``).
        self.save_work: Callable[[], Awaitable[dict[str, Any]]] | None = None

    async def safe_point(self) -> Rejection | None:
        """Act on what people said; raises ``Exit`` to stop, pause or go on waiting."""
        recorder, state = self.recorder, self.state
        messages = await self.store.messages_after(self.task_id, state.message_seq)
        read_before = state.message_seq
        inbox = read_inbox(messages, read_before, decisions_after=self._decisions_after())
        state.message_seq = inbox.last_seq
        for command in inbox.commands:
            recorder.record("command", **command)
        for item in inbox.feedback:
            recorder.record("human_feedback", author=item["author"], body=item["body"])
        if inbox.stop:
            await self.artifacts.keep_changes()
            if self.save_work is not None:
                await self.save_work()  # nothing hidden: the work so far is on the branch
            await recorder.checkpoint()
            raise Exit(Outcome(TaskState.STOPPED, reason=f"stopped by {inbox.stop}"))
        if inbox.pause:
            reason = PauseReason.PERSON
            await recorder.milestone(ProgressKind.PAUSED, reason=reason.value, by=inbox.pause)
            await recorder.checkpoint()
            raise Exit(Outcome(TaskState.PAUSED, reason=f"paused by {inbox.pause}", pause=reason))
        await self._say_stale(inbox.commands)
        read = inbox.last_seq != read_before
        try:
            rejection = await self._resolve(inbox.decision, inbox.feedback)
        except Exit:
            if read:  # what was read is saved, also when the task goes on waiting: the
                await recorder.checkpoint()  # worker re-queues a task that has not seen all
            raise
        if read and rejection is None:
            await recorder.checkpoint()
        if rejection is None:
            self.check_time()
        return rejection

    def _decisions_after(self) -> int:
        """Approvals and rejections sent before the pending request was posted answer
        something else (an earlier plan, a call that was never shown): ignored."""
        waiting = self.state.waiting
        if waiting is None or not waiting.approvable:
            return 0
        return waiting.after_seq

    async def _latest_seq(self) -> int:
        seq = self.state.message_seq
        newer = await self.store.messages_after(self.task_id, seq)
        return max([seq, *(m.seq for m in newer)])

    async def _resolve(
        self, decision: Decision | None, feedback: list[dict[str, Any]]
    ) -> Rejection | None:
        state = self.state
        waiting = state.waiting
        if waiting is not None and not waiting.approval:
            if not feedback and decision is not None and waiting.plan_hash:
                await self._best_guess_decided(waiting, decision)
                return None
            if not feedback:
                raise Exit(waiting_for_answers())
            for item in feedback:
                state.answers.append(await answer_block(str(item["author"]), str(item["body"])))
            state.waiting = None
            state.planning_attempts = 0
            state.replan_reason = ""
            self.recorder.set_plan(None)
            self.recorder.to(Stage.PLAN)
            return None
        state.pending_feedback += [dict(f) for f in feedback]
        if waiting is None:
            return None
        if decision is None:
            raise Exit(await self._still_waiting(waiting))
        return await self._decided(waiting, decision)

    async def _still_waiting(self, waiting: Waiting) -> Outcome:
        recorder = self.recorder
        if waiting.timed_out:  # resumed after the timeout: ask again (raises Exit)
            await self.request_approval(waiting.kind, waiting.what, waiting.text, waiting)
        if waiting.wake_at is not None and self.clock() >= waiting.wake_at:
            waiting.timed_out = True
            reason = PauseReason.APPROVAL_TIMEOUT
            recorder.record("approval", subject=waiting.kind.value, decision="timed out")
            await recorder.milestone(
                ProgressKind.PAUSED, reason=reason.value, subject=waiting.kind.value
            )
            await recorder.checkpoint()
            return Outcome(TaskState.PAUSED, reason=reason.value, pause=reason)
        return Outcome(
            TaskState.AWAITING_APPROVAL,
            reason=f"waiting for approval of {waiting.what or waiting.kind.value}",
            wake_at=waiting.wake_at,
        )

    async def _say_stale(self, commands: list[dict[str, Any]]) -> None:
        """An approval sent before the pending request, or while nothing waited for one,
        was meant for an earlier plan or call: it approves nothing, and the bot says so."""
        waiting = self.state.waiting
        pending = waiting is not None and waiting.approvable
        stale = [c for c in commands if c["name"] == "approve" and (c.get("stale") or not pending)]
        if not stale:
            return
        what = (waiting.what or waiting.kind.value) if waiting is not None and pending else ""
        authors = [str(c["author"]) for c in stale]
        await self.recorder.milestone(ProgressKind.NOTICE, text=stale_text(authors, what))

    async def _best_guess_decided(self, waiting: Waiting, decision: Decision) -> None:
        """Questions shown with a best-guess plan: an approval runs exactly that plan; a
        rejection's reason is taken as an answer, and the task plans again."""
        recorder, state = self.recorder, self.state
        digest = waiting.plan_hash
        if decision.approved and names_other_plan(decision.reason, digest):
            what = "the best-guess plan"
            text = other_plan_text(decision.author, decision.reason, digest, what)
            await recorder.milestone(ProgressKind.NOTICE, text=text)
            raise Exit(waiting_for_answers())
        state.waiting = None
        verdict = "approved" if decision.approved else "rejected"
        recorder.record("approval", subject="best_guess", decision=verdict,
                        author=decision.author, reason=decision.reason)  # fmt: skip
        if decision.approved:
            state.approved_plan = digest
            recorder.to(Stage.EXECUTE)
        else:
            reason = decision.reason or "the best-guess plan was rejected"
            state.answers.append(await answer_block(decision.author, reason))
            state.planning_attempts = 0
            state.replan_reason = ""
            recorder.set_plan(None)
            recorder.to(Stage.PLAN)
        await recorder.checkpoint()

    def _plan_digest(self) -> str:
        plan = self.recorder.plan
        return plan_digest(plan.to_document()) if plan is not None else ""

    async def _decided(self, waiting: Waiting, decision: Decision) -> Rejection | None:
        recorder, state = self.recorder, self.state
        digest = ""
        if waiting.kind in (WaitKind.PLAN, WaitKind.REVISION):
            digest = waiting.plan_hash or self._plan_digest()  # an older checkpoint: no hash
            if decision.approved and names_other_plan(decision.reason, digest):
                text = other_plan_text(decision.author, decision.reason, digest, waiting.what)
                await recorder.milestone(ProgressKind.NOTICE, text=text)
                raise Exit(await self._still_waiting(waiting))
        state.waiting = None
        recorder.record(
            "approval",
            subject=waiting.kind.value,
            decision="approved" if decision.approved else "rejected",
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
            recorder.to(Stage.EXECUTE)
            await recorder.checkpoint()
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
        await recorder.checkpoint()
        return Rejection(WaitKind.TOOL, why, record)

    # --- asking --------------------------------------------------------------------------------

    def plan_details(self, digest: str = "") -> str:
        plan = self.recorder.plan
        if plan is None:
            return ""
        lines = [f"Goal: {plain(plan.goal.main_objective)}"]
        lines += [
            f"- {plain(a.key)}: {plain(a.tool)} - {plain(a.purpose)}"
            for a in pending_actions(plan, self.state.finished_keys())
        ]
        if digest:
            short = plan_id(digest)
            lines += ["", f"Plan `{short}`: an approval counts for this plan only."]
        return "\n".join(lines)

    async def ensure_plan_approved(self, *, plan_only: bool) -> None:
        """In plan-approval mode, ask a person to approve the plan about to run unless
        they approved exactly this plan (raises ``Exit``, awaiting approval)."""
        state = self.state
        revised = state.plan_number > 0
        needed = needs_plan_approval(
            plan_only=plan_only,
            require_for_revisions=self.settings.require_human_approval,
            revised=revised,
        )
        digest = self._plan_digest()
        if not needed or not digest or state.approved_plan == digest:
            return
        number = state.plan_number
        kind = WaitKind.REVISION if revised else WaitKind.PLAN
        what = f"revision {number} of the plan" if revised else "the plan"
        asked = Waiting(kind, number=number, plan_hash=digest)
        await self.request_approval(kind, what, self.plan_details(digest), asked)

    async def request_approval(
        self, kind: WaitKind, what: str, text: str, asked: Waiting | None = None
    ) -> None:
        """Post the request and wait: raises ``Exit`` (awaiting approval)."""
        recorder = self.recorder
        timeout = self.settings.approval_timeout
        wake = self.clock() + timeout
        call = asked.call if asked is not None else None
        number = asked.number if asked is not None else 0
        digest = asked.plan_hash if asked is not None else ""
        paths = dict(asked.paths) if asked is not None else {}
        waiting = Waiting(
            kind, since=self.clock(), wake_at=wake, what=what, text=text, number=number,
            call=call, plan_hash=digest, paths=paths,
        )  # fmt: skip
        self.state.waiting = waiting
        recorder.to(Stage.WAIT)
        recorder.record("approval", subject=kind.value, decision="requested", what=what)
        await recorder.milestone(
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
        await recorder.checkpoint()
        raise Exit(
            Outcome(
                TaskState.AWAITING_APPROVAL, reason=f"waiting for approval of {what}", wake_at=wake
            )
        )

    async def ask_tool_approval(self, call: ToolCall, purpose: str) -> None:
        """Ask to approve a call, showing its full arguments (saved to the run directory
        too when they are too long for the comment)."""
        saved = ""
        if len(arguments_json(call.arguments)) > MAX_SHOWN_CHARS:
            saved = self.runlog.save_arguments(call.key, call.arguments)
        text = tool_call_text(call.tool, purpose, call.arguments, saved_to=saved)
        asked = Waiting(WaitKind.TOOL, call=call)
        await self.request_approval(WaitKind.TOOL, f"the call {call.tool}", text, asked)
