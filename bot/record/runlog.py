"""The run directory as the task writes it while it works (docs/planning.md#run-directory).

``RunLog`` appends to ``conversation.jsonl`` (every model request and answer) and
``errors.log`` (every failed action, invalid answer, outage, delivery failure) as
things happen, saves the full arguments of a tool call waiting for approval, and
keeps copies of the changed files. Everything written is redacted (known secret
values and token patterns). Writing is best effort: a full disk or a missing
directory is logged, never a reason for the task to fail. A session that does not
persist (a dry run) writes nothing.

``Artifacts.keep_changes`` copies the workspace's uncommitted changes to the run
directory's artifacts, so what a person should look at outlives the workspace the
worker removes; ``write_report`` adds the outcome's facts to task.json (which the worker
writes when the task starts and at each state change) and writes report.md (quality.json
is written by the delivery, earlier).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bot import offload
from bot.config.overrides import EffectivePlanning
from bot.events import IssueRef
from bot.llm.prices import dollars
from bot.record.state import ActionRecord, AgentState
from bot.redact import redact
from bot.run_events import ErrorCategory
from bot.sandbox.gitcmd import WorkspaceError
from bot.sandbox.setup import SetupStatus
from bot.storage.base import Task
from bot.storage.runs import RunDirectory, copy_artifacts, render_report
from bot.tools.factory import BuiltTools
from bot.tracing import trace_id_of

log = logging.getLogger("bot.record.runlog")


class RunLog:
    def __init__(
        self,
        data_dir: Path,
        task_id: str,
        *,
        secrets: Iterable[str] = (),
        enabled: bool = True,
        max_bytes: int | None = None,
    ) -> None:
        """``max_bytes``: the most the run directory may hold (``storage.run_dir_mb``),
        for the artifacts (the record itself is always written)."""
        self.data_dir = data_dir
        self.task_id = task_id
        self.secrets = tuple(secrets)
        self.enabled = enabled
        self.max_bytes = max_bytes
        self._directory: RunDirectory | None = None
        self._broken = False

    @property
    def directory(self) -> RunDirectory | None:
        """The run directory (created on first use); None when it cannot exist."""
        if not self.enabled or self._broken:
            return None
        if self._directory is None:
            try:
                self._directory = RunDirectory(self.data_dir, self.task_id)
            except (ValueError, OSError) as exc:
                self._broken = True
                log.warning("task %s: no run directory: %s", self.task_id, exc)
        return self._directory

    def redact(self, text: str) -> str:
        return redact(text, known=self.secrets)

    def clean(self, value: Any) -> Any:
        """``value`` with every string redacted (dicts and lists walked)."""
        if isinstance(value, str):
            return self.redact(value)
        if isinstance(value, dict):
            return {str(k): self.clean(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.clean(v) for v in value]
        return value

    def conversation(self, entry: dict[str, Any]) -> None:
        directory = self.directory
        if directory is None:
            return
        try:
            stamp = datetime.now(UTC).isoformat(timespec="seconds")
            directory.append_conversation({"at": stamp, **self.clean(entry)})
        except OSError as exc:
            log.warning("task %s: conversation.jsonl not written: %s", self.task_id, exc)

    def error(self, category: ErrorCategory, message: str) -> None:
        directory = self.directory
        if directory is None:
            return
        try:
            directory.log_error(self.clean(message), category=category)
        except OSError as exc:
            log.warning("task %s: errors.log not written: %s", self.task_id, exc)

    def save_arguments(self, key: str, arguments: dict[str, Any]) -> str:
        """Where the full arguments were saved ("" when they could not be)."""
        directory = self.directory
        if directory is None:
            return ""
        try:
            return str(directory.write_arguments(key, self.clean(arguments)))
        except OSError as exc:
            log.warning("task %s: arguments not saved: %s", self.task_id, exc)
            return ""

    async def keep_files(self, root: Path, files: Iterable[str]) -> None:
        """Copy the changed files to ``artifacts/`` (they outlive the workspace), within
        ``max_bytes``, in a worker process (a task may change thousands of files)."""
        directory = self.directory
        if directory is None:
            return
        try:
            await offload.run(
                copy_artifacts, self.data_dir, self.task_id, root, list(files), self.max_bytes
            )
        except OSError as exc:
            self.error(ErrorCategory.PERSISTENCE, f"changed files not copied: {exc}")


def changed_paths(records: Iterable[ActionRecord]) -> list[str]:
    paths: set[str] = set()
    for record in records:
        if not record.changed:
            continue
        listed = record.data.get("paths")
        if isinstance(listed, list):
            paths.update(str(p) for p in listed)
        elif isinstance(record.arguments.get("path"), str):
            paths.add(record.arguments["path"])
    return sorted(paths)


def setup_lines(state: AgentState) -> list[str]:
    """What set-up did, for the report: one line, and the failing command's when it failed."""
    setup = state.setup
    if not setup or setup.get("status") == SetupStatus.NOTHING:
        return []
    steps = setup.get("steps") or []
    line = f"set-up {setup.get('status')}: {len(steps)} commands in {setup.get('duration', 0)} s"
    if setup.get("status") == SetupStatus.RESTORED:
        line += f" (restored from the cache: {', '.join(setup.get('paths') or [])})"
    failed = [s for s in steps if s.get("exit_code") != 0 or s.get("timed_out")]
    return [line] + [f"set-up command failed: {s.get('command')}" for s in failed[:1]]


@dataclass(frozen=True, slots=True)
class Artifacts:
    task: Task
    issue: IssueRef
    state: AgentState
    runlog: RunLog
    built: BuiltTools | None
    planning: EffectivePlanning | None = None  # the task's merged planning settings

    @property
    def directory(self) -> RunDirectory | None:
        return self.runlog.directory

    async def keep_changes(self) -> None:
        """Copy the workspace's uncommitted changes to the run directory's artifacts."""
        built = self.built
        if built is None or self.runlog.directory is None:
            return
        if not (built.workspace.path / ".git").is_dir():
            return
        try:
            changed = await built.workspace.changed_files()
        except WorkspaceError as exc:
            self.runlog.error(ErrorCategory.TOOL, f"the changed files could not be listed: {exc}")
            return
        if changed:
            await self.runlog.keep_files(built.workspace.path, changed)

    def write_report(self, outcome: str, lines: list[str]) -> str:
        """task.json and report.md in the run directory (quality.json is written earlier);
        returns the report as the issue shows it (no issue text, no artifact list), which
        needs no run directory."""
        issue = self.issue
        task = {
            "id": self.task.id,
            "title": issue.title,
            "issue": issue.web_url or issue.key,
            "repository": issue.repo.full_name,
            "requested_by": self.task.request.requested_by,
            "mode": self.task.request.mode.value,
            **usage_lines(self.state.usage or {}),
            **trace_line(self.state.traces),
            "description": issue.body,
        }
        run_dir = self.directory
        quality = self.state.delivery.get("quality")
        if run_dir is not None:
            quality_file = run_dir.path / "quality.json"
            if quality_file.exists():
                quality = json.loads(quality_file.read_text(encoding="utf-8"))
        summary = "\n".join(f"- {line}" for line in setup_lines(self.state) + lines)
        changes = changed_paths(self.state.records.values())
        if run_dir is not None:
            planning = self.planning
            run_dir.update_task(  # the worker's fields (state, model, digest) are kept
                task if planning is None else {**task, "planning": planning.as_data()}
            )
            run_dir.write_report(
                task=task,
                changes=changes,
                diff_stat="",
                quality=quality,
                conversation_summary=summary,
                outcome=outcome,
                settings=planning.report_lines() if planning is not None else None,
                memo=[self.runlog.redact(entry) for entry in self.state.memo],
            )
        hidden = ("description", "requested_by", "trace")  # the issue's readers need none
        shown = {k: v for k, v in task.items() if k not in hidden}
        text = render_report(
            task=shown,
            changes=changes,
            diff_stat="",
            quality=quality,
            conversation_summary=summary,
            outcome=outcome,
            artifacts=[],
        )
        return self.runlog.redact(text)


def trace_line(traces: list[str]) -> dict[str, str]:
    """The report's trace: the run's OpenTelemetry trace id, when traces were on."""
    trace_id = trace_id_of(traces[-1]) if traces else ""
    return {"trace": trace_id} if trace_id else {}


def usage_lines(usage: dict[str, Any]) -> dict[str, str]:
    """The report's tokens and cost ("1,234 (200 cached)", "$0.012"; no cost line for a
    model without a price)."""
    tokens = int(usage.get("prompt_tokens", 0)) + int(usage.get("completion_tokens", 0))
    shown = {"tokens": f"{tokens:,}"}
    if usage.get("cached_tokens"):
        shown["tokens"] += f" ({int(usage['cached_tokens']):,} cached)"
    if usage.get("cost"):
        shown["cost"] = dollars(float(usage["cost"]))
    return shown
