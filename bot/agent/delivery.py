"""Delivering the work: quality gate, push, change request, run directory.

When the task changed its workspace clone: lint then tests (seed 003's quality
gate), failures fed back to the agent to fix (at most ``QUALITY_ROUNDS`` rounds),
the report in ``quality.json``; then commit and push the bot's branch. When the
changes went through the forge API tools to the bot's branch instead, that branch
is used as is. Either way a change request is opened (unless a tool already did),
its body linking the issue, the plan and the quality gate. What was delivered is
kept in the checkpoint so a re-run never opens a second change request. The changed
files are copied to the run directory before the push; a refused push (missing
permission, a server rule, a branch that moved) raises ``DeliveryFailed``, which
ends the task with a request for a person quoting git's error.
"""

from __future__ import annotations

import json
from typing import Any

from bot.agent.actions import ActionRunner
from bot.agent.context import ProgressKind
from bot.agent.plan import PlannedAction
from bot.agent.push_failure import push_failure
from bot.agent.session import Session
from bot.forges.base import ForgeError
from bot.storage.runs import RunDirectory
from bot.tools.factory import BuiltTools
from bot.tools.gitcmd import WorkspaceError
from bot.tools.quality import QualityCommands, QualityReport, detect_commands, run_quality_gate

QUALITY_ROUNDS = 3
FIX_TOOLS = ("replace_in_file", "write_file")
CHANGE_REQUEST_TOOLS = ("create_pull_request", "create_merge_request")


def quality_commands(built: BuiltTools) -> QualityCommands:
    """The repository's configured gate (``.agent.yaml``), else the detected commands."""
    return built.quality or detect_commands(built.workspace.path)


def change_request_body(session: Session, quality: dict[str, Any] | None) -> str:
    issue = session.ctx.issue
    plan = session.plan
    lines = [f"Closes #{issue.number}" if not issue.is_change_request else f"For #{issue.number}"]
    if issue.web_url:
        lines[0] += f" ({issue.web_url})"
    if plan is not None:
        lines += ["", f"**Goal:** {plan.goal.main_objective}", "", "**Plan:**"]
        statuses = session.statuses()
        for subtask in plan.subtasks:
            mark = "x" if statuses.get(subtask.id) == "done" else " "
            lines.append(f"- [{mark}] {subtask.description or subtask.id}")
    if quality is not None:
        verdict = "passed" if quality.get("passed") else "failed"
        lines += ["", f"**Quality gate:** {verdict}", "", str(quality.get("feedback", ""))]
    else:
        lines += ["", "**Quality gate:** not run (changes made through the forge API)"]
    lines += ["", "_Opened by the coding agent; please review before merging._"]
    return "\n".join(lines)


def run_directory(session: Session) -> RunDirectory | None:
    return session.runlog.directory


async def keep_changes(session: Session) -> None:
    """Copy the workspace's uncommitted changes to the run directory's artifacts, so
    what a person should look at outlives the workspace the worker removes."""
    built = session.ctx.built
    if built is None or session.runlog.directory is None:
        return
    if not (built.workspace.path / ".git").is_dir():
        return
    try:
        changed = await built.workspace.changed_files()
    except WorkspaceError as exc:
        session.runlog.error("artifacts", f"the changed files could not be listed: {exc}")
        return
    if changed:
        session.runlog.keep_files(built.workspace.path, changed)


def changed_paths(session: Session) -> list[str]:
    paths: set[str] = set()
    for record in session.state.records.values():
        if not record.changed:
            continue
        listed = record.data.get("paths")
        if isinstance(listed, list):
            paths.update(str(p) for p in listed)
        elif isinstance(record.arguments.get("path"), str):
            paths.add(record.arguments["path"])
    return sorted(paths)


def write_run_report(session: Session, outcome: str, lines: list[str]) -> None:
    """task.json and report.md in the run directory (quality.json is written earlier)."""
    run_dir = run_directory(session)
    if run_dir is None:
        return
    ctx = session.ctx
    task = {
        "id": ctx.task.id,
        "title": ctx.issue.title,
        "issue": ctx.issue.web_url or ctx.issue.key,
        "repository": ctx.issue.repo.full_name,
        "requested_by": ctx.task.request.requested_by,
        "mode": ctx.task.request.mode.value,
        "description": ctx.issue.body,
    }
    run_dir.write_task(task)
    quality_file = run_dir.path / "quality.json"
    quality = (
        json.loads(quality_file.read_text(encoding="utf-8")) if quality_file.exists() else None
    )
    run_dir.write_report(
        task=task,
        changes=changed_paths(session),
        diff_stat="",
        quality=quality,
        conversation_summary="\n".join(f"- {line}" for line in lines),
        outcome=outcome,
    )


class Delivery:
    def __init__(self, session: Session) -> None:
        self.session = session

    def _works_on_change_request(self, branch: str) -> bool:
        """A follow-up on the bot's own change request: its branch is this branch."""
        issue = self.session.ctx.issue
        return issue.is_change_request and issue.head_branch == branch

    def _existing_change_request(self) -> str | None:
        for record in self.session.state.records.values():
            if (
                record.ok
                and record.tool.endswith(CHANGE_REQUEST_TOOLS)
                and record.data.get("web_url")
            ):
                return str(record.data["web_url"])
        return None

    def _forge_writes(self) -> bool:
        return any(r.changed and "sha" in r.data for r in self.session.state.records.values())

    async def _workspace_changes(self, built: BuiltTools) -> list[str]:
        if not (built.workspace.path / ".git").is_dir():
            return []
        return await built.workspace.changed_files()

    async def deliver(self) -> dict[str, Any]:
        """Links (branch, change request, report) for LINKS and the completion summary."""
        state = self.session.state
        if state.delivery.get("finished"):
            return {k: v for k, v in state.delivery.items() if k != "finished"}
        built = self.session.ctx.built
        run_dir = run_directory(self.session)
        links: dict[str, Any] = {}
        quality: dict[str, Any] | None = None
        if built is not None:
            changed = await self._workspace_changes(built)
            if changed:
                report = await self.quality_loop(built)
                quality = report.to_dict()
                if run_dir is not None:
                    run_dir.write_quality(quality)
                await keep_changes(self.session)  # also what the quality fixes changed
                await self._push(built)
            if changed or self._forge_writes():
                links["branch"] = built.branch
                if self._works_on_change_request(built.branch):
                    url = self.session.ctx.issue.web_url or None
                else:
                    url = self._existing_change_request() or await self._open(built, quality)
                if url:
                    links["change_request_url"] = url
        if run_dir is not None:
            links["report_path"] = str(run_dir.path / "report.md")
        if quality is not None:
            links["quality_passed"] = bool(quality["passed"])
        state.delivery = {**links, "finished": True}
        await self.session.checkpoint()
        await self.session.emit(ProgressKind.LINKS, **links)
        return links

    async def _push(self, built: BuiltTools) -> None:
        """Commit and push; a refused push raises ``DeliveryFailed`` (the changed files
        are in the run directory's artifacts already)."""
        try:
            await built.workspace.commit_and_push(self._commit_message())
        except WorkspaceError as exc:
            runlog = self.session.runlog
            error = runlog.redact(str(exc))
            runlog.error("delivery", f"push of {built.branch} failed: {error}")
            self.session.record("completion", status="push_failed", reason=error)
            kept = str(runlog.directory.artifacts) if runlog.directory is not None else ""
            raise push_failure(error, branch=built.branch, kept_in=kept) from exc

    def _commit_message(self) -> str:
        issue = self.session.ctx.issue
        plan = self.session.plan
        subject = plan.goal.main_objective if plan else issue.title
        return f"{subject[:68]}\n\nFor #{issue.number}: {issue.title}"

    async def _open(self, built: BuiltTools, quality: dict[str, Any] | None) -> str | None:
        session = self.session
        issue = session.ctx.issue
        try:
            change = await session.ctx.forge.open_change_request(
                issue.repo,
                head=built.branch,
                base=built.base_branch,
                title=f"{issue.title} (#{issue.number})",
                body=change_request_body(session, quality),
                draft=session.ctx.settings.workspace.draft_change_requests,
            )
        except ForgeError as exc:
            session.record("completion", status="change_request_failed", reason=str(exc))
            session.runlog.error("delivery", f"the change request was not opened: {exc}")
            return None
        return change.web_url

    async def quality_loop(self, built: BuiltTools) -> QualityReport:
        """Run the gate; on failure let the agent fix, at most ``QUALITY_ROUNDS`` runs."""
        session = self.session
        commands = quality_commands(built)
        runner = ActionRunner(session)
        tools = [t for name in FIX_TOOLS if (t := session.ctx.tools.get(name)) is not None]
        report = await self._gate(built, commands, 1)
        for round_number in range(1, QUALITY_ROUNDS):
            if report.passed or not tools:
                break
            fix = PlannedAction(
                key=f"quality.{round_number}",
                task_id="quality_gate",
                tool=tools[0].name,
                purpose="Fix the quality gate failures below",
                expected_outcome="lint and tests pass",
            )
            await runner.run_one(fix, feedback=report.feedback, choices=tools)
            report = await self._gate(built, commands, round_number + 1)
        return report

    async def _gate(self, built: BuiltTools, commands: QualityCommands, run: int) -> QualityReport:
        timeout = self.session.ctx.settings.sandbox.timeout
        report = await run_quality_gate(
            built.workspace.path, built.sandbox, commands, timeout=timeout
        )
        self.session.record("quality", run=run, passed=report.passed, feedback=report.feedback)
        return report
