"""Delivering the work: quality gate, push, change request, run directory.

When the task changed its workspace clone: lint then tests with fix rounds (the quality
gate, ``GateRounds``, docs/planning.md#delivery), the report in ``quality.json``; then,
when no CI definition in the push waits for approval, commit and push the bot's branch.
When the changes went through the forge API tools to the bot's branch instead, that
branch is used as is. Either way a change request is opened (unless a tool already did),
its body linking the issue, the plan and the gate. What was delivered is kept in the
checkpoint so a re-run never opens a second change request, and the gate's
report is kept there before the push, so a worker killed between the commit and the
push, or between the push and the change request, delivers on its next run. The changed
files are copied to the run directory before the push; a refused push (missing
permission, a server rule, a branch that moved) is a ``DeliveryFailed``, which ends
the task with a request for a person quoting git's error.

CI definitions in the push (``planning.security.require_approval_paths``: they run with
the repository's CI secrets) must hold exactly the content a person approved
(docs/planning.md#tool-policy); what is not approved is shown with its diff and waits
for ``/agent approve`` (``deliver`` returns the request; the loop asks).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from bot.agent.execution import ActionRunner
from bot.agent.session import Session
from bot.forges.base import ChangeRequest, ForgeError
from bot.record.evidence import GATE_TASK
from bot.record.failures import DeliveryFailed, push_failure
from bot.record.history import CompletionStatus, HistoryKind
from bot.record.plan import PlannedAction
from bot.record.runlog import Artifacts, RunLog
from bot.record.state import ActionRecord, Waiting
from bot.record.texts import MAX_SHOWN_CHARS, change_request_body, gate_view, push_text
from bot.run_events import ErrorCategory, LinksShown, WaitKind
from bot.sandbox.gitcmd import WorkspaceError
from bot.sandbox.workspace import content_digest
from bot.tools.factory import BuiltTools
from bot.tools.quality import (
    GateResult,
    QualityCommands,
    QualityReport,
    detect_commands,
    run_quality_gate,
)
from bot.tools.registry import Tool

CHANGE_REQUEST_TOOLS = ("create_pull_request", "create_merge_request")
QUALITY_ROUNDS = 3  # fix rounds after the first failing run: at most four gate runs
FIX_STEPS = 6  # calls in one fix round
FIX_TOOLS = ("replace_in_file", "write_file", "delete_file", "move_path", "read_file")
READY_TOOL = "run_quality_gate"  # the model names it when the round's fixes are in


async def unapproved_paths(built: BuiltTools, approved: dict[str, str]) -> dict[str, str]:
    """Guarded paths in the push whose content nobody approved: path -> content digest.
    The working tree against the commit the remote has: commands and local commits count
    (writing one with a file tool waits for approval already)."""
    pushed = await built.workspace.paths_to_push()
    guarded = built.policy.policy.guarded_paths(pushed)
    root = built.workspace.path
    held = {p: await asyncio.to_thread(content_digest, root, p) for p in guarded}
    return {p: d for p, d in held.items() if approved.get(p) != d}


async def push_approval_text(built: BuiltTools, paths: list[str], runlog: RunLog) -> str:
    """The request: the paths and their diff (saved whole to the run directory when long)."""
    diff = runlog.redact(await built.workspace.push_diff(paths))
    saved = ""
    if len(diff) > MAX_SHOWN_CHARS:
        saved = runlog.save_arguments("push", {"paths": paths, "diff": diff}) or "-"
    return push_text(built.branch, paths, diff, saved_to=saved)


class GateRounds:
    def __init__(self, session: Session, runner: ActionRunner, *, gate_timeout: float) -> None:
        self.session = session
        self.tools = session.ctx.tools
        self.runner = runner
        self.gate_timeout = gate_timeout

    async def run(self, built: BuiltTools) -> QualityReport:
        """Run the gate; after a failure, up to ``QUALITY_ROUNDS`` fix rounds, each
        followed by the gate again."""
        commands = built.quality or detect_commands(built.workspace.path)  # .agent.yaml first
        fixers = [t for name in FIX_TOOLS if (t := self.tools.get(name)) is not None]
        report = await self._gate(built, commands, 1)
        for round_number in range(1, QUALITY_ROUNDS + 1):
            if report.result is not GateResult.FAILED or not fixers:
                break
            await self._fix_round(round_number, report.feedback, fixers)
            report = await self._gate(built, commands, round_number + 1)
        return report

    async def _fix_round(self, number: int, feedback: str, fixers: list[Tool]) -> None:
        """Up to ``FIX_STEPS`` calls of the file tools; the model names ``READY_TOOL``
        when its fixes are in (one call per round when that tool is not offered)."""
        ready = self.tools.get(READY_TOOL)
        choices = [*fixers, ready] if ready is not None else fixers
        purpose = (
            f"Fix the quality gate failures below (fix round {number} of {QUALITY_ROUNDS}): "
            "change as many files as needed, one call at a time"
        )
        if ready is not None:
            purpose += f"; call {READY_TOOL} when the fixes are in"
        for step in range(1, FIX_STEPS + 1):
            fix = PlannedAction(
                key=f"quality.{number}.{step}",
                task_id=GATE_TASK,
                tool=fixers[0].name,
                purpose=purpose,
                expected_outcome="lint and tests pass",
            )
            outcome = await self.runner.run_one(
                fix, feedback=feedback, choices=choices, ready_tool=READY_TOOL if ready else ""
            )
            # a call the policy wants approved ends the round (the gate shows what is left)
            done = not isinstance(outcome, ActionRecord) or outcome.tool == READY_TOOL
            if ready is None or done:
                return

    async def _gate(self, built: BuiltTools, commands: QualityCommands, run: int) -> QualityReport:
        started = time.monotonic()
        report = await run_quality_gate(
            built.workspace.path, built.sandbox, commands, timeout=self.gate_timeout
        )
        took = round(time.monotonic() - started, 3)
        self.session.record(HistoryKind.QUALITY, run=run, passed=report.passed, duration=took,
                            result=report.result.value, feedback=report.feedback)  # fmt: skip
        if report.result is GateResult.FAILED:
            self.session.runlog.error(ErrorCategory.QUALITY_GATE, f"run {run}: {report.feedback}")
        return report


@dataclass(frozen=True, slots=True)
class Delivered:
    links: dict[str, Any]  # branch, change request, gate: for LINKS and the summary


@dataclass(frozen=True, slots=True)
class NeedsApproval:
    """CI definitions nobody approved are in the push: the request to post."""

    request: Waiting


DeliveryResult = Delivered | NeedsApproval | DeliveryFailed


# state.delivery, not links (report_path, quality_passed: older checkpoints; head_sha, paths)
_INTERNAL = frozenset(("finished", "quality", "pushed", "change_request_number", "report_path",
                       "quality_passed", "workspace_changed", "head_sha", "paths"))  # fmt: skip
# what a second delivery (after a revision) keeps of the first
_EARLIER = ("change_request_url", "change_request_number", "pushed")


class Delivery:
    def __init__(self, session: Session, runner: ActionRunner, artifacts: Artifacts) -> None:
        ctx = session.ctx
        self.session = session
        self.state = session.state
        self.issue = ctx.issue
        self.forge = ctx.forge
        self.built = ctx.built
        self.artifacts = artifacts
        self.runlog: RunLog = session.runlog
        self.draft = ctx.settings.workspace.draft_change_requests
        self.gate = GateRounds(session, runner, gate_timeout=ctx.settings.sandbox.timeout)

    def _works_on_change_request(self, branch: str) -> bool:
        """A follow-up on the bot's own change request: its branch is this branch."""
        issue = self.issue
        return issue.is_change_request and issue.head_branch == branch

    def _existing_change_request(self) -> str | None:
        for record in self.state.records.values():
            opened = record.ok and record.tool.endswith(CHANGE_REQUEST_TOOLS)
            if opened and record.data.get("web_url"):
                return str(record.data["web_url"])
        return None

    def _forge_writes(self) -> bool:
        return any(r.changed and "sha" in r.data for r in self.state.records.values())

    async def _workspace_changes(self, built: BuiltTools) -> list[str]:
        if not (built.workspace.path / ".git").is_dir():
            return []
        return await built.workspace.changed_files()

    async def deliver(self) -> DeliveryResult:
        """Gate, push and change request: the links (branch, change request, gate), a
        request to approve CI definitions in the push, or why the push was refused."""
        state = self.state
        if state.delivery.get("finished"):
            return Delivered({k: v for k, v in state.delivery.items() if k not in _INTERNAL})
        built = self.built
        run_dir = self.artifacts.directory
        links: dict[str, Any] = {}
        quality: dict[str, Any] | None = None
        number: int | None = None
        workspace_changed, pushed = False, dict[str, Any]()
        earlier = {k: state.delivery[k] for k in _EARLIER if k in state.delivery}
        if built is not None:
            # A run that stopped mid-delivery left its gate's report here (it may have
            # pushed, or committed without pushing): its work is still to deliver.
            started = "quality" in state.delivery or bool(earlier.get("pushed"))
            quality = state.delivery.get("quality")
            changed = await self._workspace_changes(built)
            workspace_changed = bool(changed) or await built.workspace.unpublished()
            if workspace_changed:
                report = await self.gate.run(built)
                quality = report.to_dict()
                if run_dir is not None:
                    run_dir.write_quality(quality)
                await self.artifacts.keep_changes()  # also what the quality fixes changed
                request = await self._push_request(built)
                if request is not None:
                    return NeedsApproval(request)
                state.delivery = {**earlier, "quality": quality}
                await self.session.checkpoint()  # before the push: see ``started``
                paths = await built.workspace.paths_to_push()
                head = await self._push(built)
                if isinstance(head, DeliveryFailed):
                    return head
                started, pushed = True, {"head_sha": head, "paths": paths} if head else {}
            if started or self._forge_writes():
                links["branch"] = built.branch
                if self._works_on_change_request(built.branch):
                    url = self.issue.web_url or None
                else:
                    url, number = await self._change_request(built, quality, earlier)
                if url:
                    links["change_request_url"] = url
        if quality is not None:
            links["gate"] = gate_view(quality)
        kept: dict[str, Any] = {"quality": quality, **pushed} if quality is not None else pushed
        if number is not None:
            kept["change_request_number"] = number
        if built is not None:  # what the record says changed may have left no change
            kept["workspace_changed"] = workspace_changed
        state.delivery = {**links, **kept, "pushed": "branch" in links, "finished": True}
        await self.session.checkpoint()
        await self.session.emit(LinksShown(**links))
        return Delivered(links)

    async def save_work(self) -> dict[str, Any]:
        """The run stops unfinished (a person is needed, the budget is spent, a stop): commit
        and push the work so far to the bot's branch (work the forge API tools wrote is
        there already) and open a draft change request marked unfinished, so nothing is
        hidden. No gate; CI definitions nobody approved are not pushed. Links for the
        comment ({} when nothing is on the branch)."""
        built = self.built
        if built is None or self.state.delivery.get("finished"):
            return {}
        pushed = await self._push_unfinished(built)
        if pushed and not self.state.delivery.get("pushed"):
            # on the branch from here on: a run killed before the change request is opened
            # opens it when it saves the work again (its workspace has nothing new to push)
            self.state.delivery = {**self.state.delivery, "pushed": True}
            await self.session.checkpoint()
        if not (pushed or self.state.delivery.get("pushed") or self._forge_writes()):
            return {}  # nothing on the branch (or the push failed: the run log says why)
        links: dict[str, Any] = {"branch": built.branch}
        earlier = self.state.delivery.get("change_request_url")
        url = earlier or self._existing_change_request()
        number = self.state.delivery.get("change_request_number")
        if not url and not self._works_on_change_request(built.branch):
            opened = await self._open(built, None, unfinished=True)
            url, number = (opened.web_url, opened.number) if opened else (None, None)
        if url:
            links["change_request_url"] = url
        numbered = {"change_request_number": number} if number is not None else {}
        self.state.delivery = {**links, **numbered, "pushed": True}
        await self.session.checkpoint()
        await self.session.emit(LinksShown(**links))
        return links

    async def _push_unfinished(self, built: BuiltTools) -> bool:
        """Commit and push the workspace's changes; whether anything was pushed."""
        try:
            if not (await self._workspace_changes(built) or await built.workspace.unpublished()):
                return False
            if await unapproved_paths(built, self.state.approved_paths):
                self.runlog.error(ErrorCategory.FORGE, "work not pushed: CI paths nobody approved")
                return False
            await self.artifacts.keep_changes()
            await built.workspace.commit_and_push("Unfinished: " + self._commit_message())
        except (WorkspaceError, ForgeError) as exc:
            self.runlog.error(ErrorCategory.FORGE, f"unfinished work not pushed: {exc}")
            return False
        return True

    def reopen(self) -> None:
        """Deliver again after a revision: the change request already open is kept, and
        what was pushed still counts as pushed (saved with the next checkpoint)."""
        self.state.delivery = {k: v for k, v in self.state.delivery.items() if k in _EARLIER}

    async def _push_request(self, built: BuiltTools) -> Waiting | None:
        """The request to approve CI definitions nobody approved (None: there are none)."""
        unapproved = await unapproved_paths(built, self.state.approved_paths)
        if not unapproved:
            return None
        paths = sorted(unapproved)
        text = await push_approval_text(built, paths, self.runlog)
        what = "the CI definitions in the push (" + ", ".join(paths) + ")"
        return Waiting(WaitKind.PUSH, what=what, text=text, paths=unapproved)

    async def _push(self, built: BuiltTools) -> DeliveryFailed | str | None:
        """Commit and push: the new head (None: nothing new), or why the push was refused."""
        try:
            head = await built.workspace.commit_and_push(self._commit_message())
        except WorkspaceError as exc:
            runlog = self.runlog
            error = runlog.redact(str(exc))
            runlog.error(ErrorCategory.FORGE, f"push of {built.branch} failed: {error}")
            self.session.record(
                HistoryKind.COMPLETION, status=CompletionStatus.PUSH_FAILED, reason=error
            )
            # where, relative to the bot's data directory: never the host's own layout
            task_id = self.artifacts.task.id
            kept = f"`runs/{task_id}/artifacts/` in the bot's data directory"
            kept = kept if runlog.directory is not None else ""
            return push_failure(error, branch=built.branch, kept_in=kept)
        return head

    def _commit_message(self) -> str:
        issue = self.issue
        plan = self.session.plan
        subject = plan.goal.main_objective if plan else issue.title
        return f"{subject[:68]}\n\nFor #{issue.number}: {issue.title}"

    async def _change_request(
        self, built: BuiltTools, quality: dict[str, Any] | None, earlier: dict[str, Any]
    ) -> tuple[str | None, int | None]:
        """The change request's address and number: one a tool opened, the one an
        earlier delivery of this task opened (its body now shows this delivery's gate),
        or a new one."""
        url = self._existing_change_request()
        if url:
            return url, None
        url, number = earlier.get("change_request_url"), earlier.get("change_request_number")
        if url:
            if number is not None:
                await self._refresh(int(number), quality)
            return str(url), number
        opened = await self._open(built, quality)
        return (opened.web_url, opened.number) if opened else (None, None)

    def _body(self, quality: dict[str, Any] | None, *, unfinished: bool = False) -> str:
        # The goal and plan are the model's words: redacted with the one secret list.
        plan, statuses = self.session.plan, self.session.statuses()
        body = change_request_body(self.issue, plan, statuses, quality, unfinished=unfinished)
        return self.runlog.redact(body)

    async def _refresh(self, number: int, quality: dict[str, Any] | None) -> None:
        try:
            await self.forge.update_change_request(
                self.issue.repo, number, body=self._body(quality)
            )
        except ForgeError as exc:
            self.runlog.error(ErrorCategory.FORGE, f"the change request was not updated: {exc}")

    async def _open(
        self, built: BuiltTools, quality: dict[str, Any] | None, *, unfinished: bool = False
    ) -> ChangeRequest | None:
        issue = self.issue
        body = self._body(quality, unfinished=unfinished)
        title = f"{issue.title} (#{issue.number})"
        title = f"[unfinished] {title}" if unfinished else title
        try:
            change = await self.forge.open_change_request(
                issue.repo,
                head=built.branch,
                base=built.base_branch,
                title=self.runlog.redact(title),
                body=body,
                draft=self.draft or unfinished,
            )
        except ForgeError as exc:
            self.session.record(
                HistoryKind.COMPLETION,
                status=CompletionStatus.CHANGE_REQUEST_FAILED,
                reason=str(exc),
            )
            self.runlog.error(ErrorCategory.FORGE, f"the change request was not opened: {exc}")
            return None
        return change
