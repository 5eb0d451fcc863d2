"""The run directory as the task writes it while it works (docs/planning.md#run-directory).

``RunLog`` appends to ``conversation.jsonl`` (every model request and answer) and
``errors.log`` (every failed action, invalid answer, outage, delivery failure) as
things happen, saves the full arguments of a tool call waiting for approval, and
keeps copies of the changed files. Everything written is redacted (known secret
values and token patterns). Writing is best effort: a full disk or a missing
directory is logged, never a reason for the task to fail. A session that does not
persist (a dry run) writes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bot import offload
from bot.redact import redact
from bot.storage.runs import RunDirectory, copy_artifacts

log = logging.getLogger("bot.agent.runlog")

CONTENT_CHARS = 4000  # per message in conversation.jsonl
ANSWER_CHARS = 16000


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

    def error(self, category: str, message: str) -> None:
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
            self.error("artifacts", f"changed files not copied: {exc}")
