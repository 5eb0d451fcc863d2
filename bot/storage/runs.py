"""The run directory of one task: what happened, kept as plain files for people.

    <data_dir>/runs/<task_id>/
        task.json           the task: written when it starts, updated at each state change
        conversation.jsonl  every LLM request and answer, one JSON object a line
        quality.json        the last quality gate report
        approval-<key>.json the full arguments of a tool call waiting for approval
        errors.log          timestamped errors, with their category
        artifacts/          copies of the changed files, same relative paths
        report.md           the summary: task, changes, quality gate, conversation
                            (``bot.storage.run_report``)

JSON files are replaced atomically; the JSONL and log files are appended and flushed
line by line, so a crash loses at most the line being written.

A run directory has a bound (``storage.run_dir_mb``): command and set-up logs
(``bot.sandbox.output.LogQuota``) and artifacts stop where it is reached; the record
itself (task, conversation, errors, report) is always written. Run directories of tasks
that ended more than ``storage.runs_retention_days`` ago are deleted (``old_runs``,
``remove_runs``; the worker's maintenance asks the store which tasks ended).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bot.paths import PathRefused, resolve_inside
from bot.run_events import ErrorCategory
from bot.storage.run_report import render_report as render_report  # the one report.md

_TASK_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")
PERSISTENCE = ErrorCategory.PERSISTENCE.value


def _json(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False, indent=2, default=str, sort_keys=True)


class RunDirectory:
    def __init__(self, data_dir: Path, task_id: str) -> None:
        if not _TASK_ID.match(task_id) or ".." in task_id:
            raise ValueError(
                f"{task_id!r} cannot name a run directory: letters, digits, '.', '_' and "
                "'-' only, at most 128 characters"
            )
        self.task_id = task_id
        self.path = Path(data_dir) / "runs" / task_id
        self.artifacts = self.path / "artifacts"
        self.artifacts.mkdir(parents=True, exist_ok=True)

    def _replace(self, name: str, text: str) -> Path:
        target = self.path / name
        fd, tmp = tempfile.mkstemp(dir=self.path, prefix=f".{name}.")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return target

    def _append(self, name: str, line: str) -> None:
        with (self.path / name).open("a", encoding="utf-8") as handle:
            handle.write(line)
            handle.flush()

    def write_task(self, data: dict[str, Any]) -> None:
        self._replace("task.json", _json(data) + "\n")

    def read_task(self) -> dict[str, Any]:
        """task.json as written so far ({} when there is none or it cannot be read)."""
        try:
            data = json.loads((self.path / "task.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def update_task(self, fields: dict[str, Any], *, state: str = "", reason: str = "") -> None:
        """Merge ``fields`` into task.json; a ``state`` other than the last one is added
        to its ``states`` (each with its time and reason), so the file follows the task
        from its start (specification 003, 5)."""
        data = {**self.read_task(), **fields}
        stamp = datetime.now(UTC).isoformat(timespec="seconds")
        states = [s for s in data.get("states") or [] if isinstance(s, dict)]
        if state and (not states or states[-1].get("state") != state or reason):
            change = {"state": state, "at": stamp, **({"reason": reason} if reason else {})}
            states.append(change)
        if state:
            data["state"] = state
        data.update(states=states, updated_at=stamp)
        self.write_task(data)

    def append_conversation(self, entry: dict[str, Any]) -> None:
        line = json.dumps(entry, ensure_ascii=False, default=str, sort_keys=True)
        self._append("conversation.jsonl", line + "\n")

    def write_arguments(self, key: str, arguments: dict[str, Any]) -> Path:
        """The full arguments of a tool call waiting for approval:
        ``approval-<key>.json`` (the request comment shows only their start)."""
        name = "approval-" + _UNSAFE_NAME.sub("_", key)[:64] + ".json"
        return self._replace(name, _json(arguments) + "\n")

    def write_quality(self, report: dict[str, Any]) -> None:
        self._replace("quality.json", _json(report) + "\n")

    def log_error(self, message: str, *, category: str = "") -> None:
        """One timestamped entry (``[category]`` after the time, when given)."""
        stamp = datetime.now(UTC).isoformat(timespec="seconds")
        body = message.rstrip().replace("\n", "\n    ")
        label = f"[{category}] " if category else ""
        self._append("errors.log", f"{stamp} {label}{body}\n")

    def copy_artifacts(
        self, root: Path, files: Iterable[str], *, max_bytes: int | None = None
    ) -> None:
        """Copy the changed files; deleted files are skipped, and paths that leave the
        workspace (or enter .git) are refused and logged in errors.log. With
        ``max_bytes`` the run directory holds at most that much: the files that do not
        fit are not copied (and errors.log says how many)."""
        room = None if max_bytes is None else max_bytes - tree_bytes(self.path)
        left_out = 0
        for rel in files:
            try:
                source = resolve_inside(root, rel)
            except PathRefused as exc:
                self.log_error(f"artifact not copied: {exc}", category=PERSISTENCE)
                continue
            if not source.is_file():
                continue
            if room is not None:
                size = source.stat().st_size
                if size > room:
                    left_out += 1
                    continue
                room -= size
            target = self.artifacts / source.relative_to(Path(root).resolve())
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
        if left_out:
            self.log_error(
                f"{left_out} changed files not copied to artifacts/: the run directory "
                f"would pass storage.run_dir_mb",
                category=PERSISTENCE,
            )

    def artifact_names(self) -> list[str]:
        return sorted(
            p.relative_to(self.artifacts).as_posix()
            for p in self.artifacts.rglob("*")
            if p.is_file()
        )

    def write_report(
        self,
        *,
        task: dict[str, Any],
        changes: list[str],
        diff_stat: str,
        quality: dict[str, Any] | None,
        conversation_summary: str,
        outcome: str,
        settings: list[str] | None = None,
        memo: list[str] | None = None,
    ) -> Path:
        text = render_report(
            task=task, changes=changes, diff_stat=diff_stat, quality=quality,
            conversation_summary=conversation_summary, outcome=outcome,
            artifacts=self.artifact_names(), settings=settings, memo=memo,
        )  # fmt: skip
        return self._replace("report.md", text)


def copy_artifacts(
    data_dir: Path, task_id: str, root: Path, files: list[str], max_bytes: int | None
) -> None:
    """``RunDirectory.copy_artifacts`` as a plain function (for a worker process)."""
    RunDirectory(data_dir, task_id).copy_artifacts(root, files, max_bytes=max_bytes)


def tree_bytes(root: Path) -> int:
    """The bytes the files under ``root`` occupy (allocated blocks), links not followed:
    for the bot's own small trees, never for a workspace."""
    total = 0
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            try:
                total += os.lstat(os.path.join(folder, name)).st_blocks * 512
            except OSError:
                continue
    return total


def old_runs(data_dir: Path, *, before: float) -> list[str]:
    """The run directories nothing was written to since ``before`` (seconds since the
    epoch): neither the folder nor anything at its top (where logs and the record are)."""
    runs = Path(data_dir) / "runs"
    try:
        names = sorted(os.listdir(runs))
    except FileNotFoundError:
        return []
    found = []
    for name in names:
        if _TASK_ID.match(name) and ".." not in name and _newest(runs / name) < before:
            found.append(name)
    return found


def _newest(folder: Path) -> float:
    try:
        info = os.lstat(folder)
    except OSError:
        return float("inf")
    if not stat.S_ISDIR(info.st_mode):
        return float("inf")  # not a run directory: never deleted
    return max(info.st_mtime, _newest_in(folder, depth=1))


def _newest_in(folder: Path, *, depth: int) -> float:
    """The newest date of what ``folder`` holds, ``depth`` folders down (commands/,
    setup/: logs land there); an unreadable folder below it counts as old."""
    newest = 0.0
    with os.scandir(folder) as entries:
        for entry in entries:
            try:
                newest = max(newest, entry.stat(follow_symlinks=False).st_mtime)
            except OSError:
                continue
            if depth and entry.is_dir(follow_symlinks=False):
                with contextlib.suppress(OSError):
                    newest = max(newest, _newest_in(Path(entry.path), depth=depth - 1))
    return newest


def remove_runs(data_dir: Path, task_ids: list[str]) -> list[str]:
    """Delete these run directories; the ids actually removed."""
    removed = []
    for task_id in task_ids:
        if not _TASK_ID.match(task_id) or ".." in task_id:
            continue
        folder = Path(data_dir) / "runs" / task_id
        if folder.is_dir() and not folder.is_symlink():
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(task_id)
    return removed
