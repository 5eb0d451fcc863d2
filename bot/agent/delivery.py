"""Delivering the work: quality gate, push, change request, run directory.

When the task changed its workspace clone: lint then tests with fix rounds (the quality
gate, ``gate_rounds``, docs/planning.md#delivery), the report in ``quality.json``; then,
when no CI definition in the push waits for approval (``push_guard``), commit and push
the bot's branch. When the changes went through the forge API tools to the bot's branch
instead, that branch is used as is. Either way a change request is opened (unless a tool
already did), its body linking the issue, the plan and the quality gate. What was delivered is
kept in the checkpoint so a re-run never opens a second change request, and the gate's
report is kept there before the push, so a worker killed between the commit and the
push, or between the push and the change request, delivers on its next run. The changed
files are copied to the run directory before the push; a refused push (missing
permission, a server rule, a branch that moved) raises ``DeliveryFailed``, which
ends the task with a request for a person quoting git's error.
"""

from __future__ import annotations

from typing import Any

from bot.agent.artifacts import Artifacts
from bot.agent.change_request import change_request_body, gate_view
from bot.agent.context import ProgressKind
from bot.agent.gate_rounds import GateRounds
from bot.agent.ports import Recorder, RequestApproval, RunAction
from bot.agent.push_failure import push_failure
from bot.agent.push_guard import push_approval_text, unapproved_paths
from bot.agent.runlog import RunLog
from bot.agent.state import AgentState, Waiting, WaitKind
from bot.events import IssueRef
from bot.forges.base import ChangeRequest, Forge, ForgeError
from bot.tools.factory import BuiltTools
from bot.tools.gitcmd import WorkspaceError
from bot.tools.registry import ToolRegistry

CHANGE_REQUEST_TOOLS = ("create_pull_request", "create_merge_request")


# state.delivery, not links (report_path, quality_passed: checkpoints of earlier versions)
_INTERNAL = frozenset(
    {
        "finished",
        "quality",
        "pushed",
        "change_request_number",
        "report_path",
        "quality_passed",
        "workspace_changed",
    }
)
# what a second delivery (after a revision) keeps of the first
_EARLIER = ("change_request_url", "change_request_number", "pushed")


class Delivery:
    def __init__(
        self,
        state: AgentState,
        recorder: Recorder,
        issue: IssueRef,
        forge: Forge,
        built: BuiltTools | None,
        tools: ToolRegistry,
        artifacts: Artifacts,
        runlog: RunLog,
        run_action: RunAction,
        request_approval: RequestApproval,
        *,
        draft: bool,
        gate_timeout: float,
    ) -> None:
        self.state = state
        self.recorder = recorder
        self.issue = issue
        self.forge = forge
        self.built = built
        self.tools = tools
        self.artifacts = artifacts
        self.runlog = runlog
        self.run_action = run_action
        self.request_approval = request_approval
        self.draft = draft
        self.gate = GateRounds(recorder, tools, run_action, gate_timeout=gate_timeout)

    def _works_on_change_request(self, branch: str) -> bool:
        """A follow-up on the bot's own change request: its branch is this branch."""
        issue = self.issue
        return issue.is_change_request and issue.head_branch == branch

    def _existing_change_request(self) -> str | None:
        for record in self.state.records.values():
            if (
                record.ok
                and record.tool.endswith(CHANGE_REQUEST_TOOLS)
                and record.data.get("web_url")
            ):
                return str(record.data["web_url"])
        return None

    def _forge_writes(self) -> bool:
        return any(r.changed and "sha" in r.data for r in self.state.records.values())

    async def _workspace_changes(self, built: BuiltTools) -> list[str]:
        if not (built.workspace.path / ".git").is_dir():
            return []
        return await built.workspace.changed_files()

    async def deliver(self) -> dict[str, Any]:
        """Links (branch, change request, gate) for LINKS and the completion summary."""
        state = self.state
        if state.delivery.get("finished"):
            return {k: v for k, v in state.delivery.items() if k not in _INTERNAL}
        built = self.built
        run_dir = self.artifacts.directory
        links: dict[str, Any] = {}
        quality: dict[str, Any] | None = None
        number: int | None = None
        workspace_changed = False
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
                await self._guard_push(built)
                state.delivery = {**earlier, "quality": quality}
                await self.recorder.checkpoint()  # before the push: see ``started``
                await self._push(built)
                started = True
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
        kept: dict[str, Any] = {"quality": quality} if quality is not None else {}
        if number is not None:
            kept["change_request_number"] = number
        if built is not None:  # what the record says changed may have left no change
            kept["workspace_changed"] = workspace_changed
        state.delivery = {**links, **kept, "pushed": "branch" in links, "finished": True}
        await self.recorder.checkpoint()
        await self.recorder.emit(ProgressKind.LINKS, **links)
        return links

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
            await self.recorder.checkpoint()
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
        await self.recorder.checkpoint()
        await self.recorder.emit(ProgressKind.LINKS, **links)
        return links

    async def _push_unfinished(self, built: BuiltTools) -> bool:
        """Commit and push the workspace's changes; whether anything was pushed."""
        try:
            if not (await self._workspace_changes(built) or await built.workspace.unpublished()):
                return False
            if await unapproved_paths(built, self.state.approved_paths):
                self.runlog.error("delivery", "unfinished work not pushed: unapproved CI paths")
                return False
            await self.artifacts.keep_changes()
            await built.workspace.commit_and_push("Unfinished: " + self._commit_message())
        except (WorkspaceError, ForgeError) as exc:
            self.runlog.error("delivery", f"unfinished work not pushed: {exc}")
            return False
        return True

    def reopen(self) -> None:
        """Deliver again after a revision: the change request already open is kept, and
        what was pushed still counts as pushed (saved with the next checkpoint)."""
        self.state.delivery = {k: v for k, v in self.state.delivery.items() if k in _EARLIER}

    async def _guard_push(self, built: BuiltTools) -> None:
        """CI definitions nobody approved wait for approval (raises ``Exit``)."""
        unapproved = await unapproved_paths(built, self.state.approved_paths)
        if not unapproved:
            return
        paths = sorted(unapproved)
        text = await push_approval_text(built, paths, self.runlog)
        what = "the CI definitions in the push (" + ", ".join(paths) + ")"
        asked = Waiting(WaitKind.PUSH, paths=unapproved)
        await self.request_approval(WaitKind.PUSH, what, text, asked)

    async def _push(self, built: BuiltTools) -> None:
        """Commit and push; a refused push raises ``DeliveryFailed`` (the changed files
        are in the run directory's artifacts already)."""
        try:
            await built.workspace.commit_and_push(self._commit_message())
        except WorkspaceError as exc:
            runlog = self.runlog
            error = runlog.redact(str(exc))
            runlog.error("delivery", f"push of {built.branch} failed: {error}")
            self.recorder.record("completion", status="push_failed", reason=error)
            # where, relative to the bot's data directory: never the host's own layout
            task_id = self.artifacts.task.id
            kept = f"`runs/{task_id}/artifacts/` in the bot's data directory"
            kept = kept if runlog.directory is not None else ""
            raise push_failure(error, branch=built.branch, kept_in=kept) from exc

    def _commit_message(self) -> str:
        issue = self.issue
        plan = self.recorder.plan
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
        plan, statuses = self.recorder.plan, self.recorder.statuses()
        body = change_request_body(self.issue, plan, statuses, quality, unfinished=unfinished)
        return self.runlog.redact(body)

    async def _refresh(self, number: int, quality: dict[str, Any] | None) -> None:
        try:
            await self.forge.update_change_request(
                self.issue.repo, number, body=self._body(quality)
            )
        except ForgeError as exc:
            self.runlog.error("delivery", f"the change request was not updated: {exc}")

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
            self.recorder.record("completion", status="change_request_failed", reason=str(exc))
            self.runlog.error("delivery", f"the change request was not opened: {exc}")
            return None
        return change
