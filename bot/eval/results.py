"""A task's result, and the run folder that keeps them (append-only, resumable).

    RUN/
      run.json            what was run: tasks file, model, options (written once)
      results.jsonl       one line per finished task: the record of what is done
      predictions.jsonl   SWE-bench's predictions (instance_id, model_name_or_path, model_patch)
      refused.jsonl       the tasks that could not be read, with the field named
      summary.json, report.md   rewritten from results.jsonl at the end of every run
      tasks/ID/           a task's own files: comments.md, report.md, trajectory.jsonl,
                          bot.sqlite3, origin.git, score/tests.log

A task is finished when its line is in ``results.jsonl``; its prediction is appended after
it (and added on ``--resume`` when a crash came in between), so nothing finished is lost or
recomputed, and nothing is written twice. A last line cut by a crash is skipped.
Several writers (the workers of a queued run, on one machine or several that share the
folder) append under an exclusive lock on ``RUN/.lock`` (``flock``), so lines never mix
and a task recorded by one is seen by the next.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from bot.eval.run_meta import replace_file

RESULTS = "results.jsonl"
PREDICTIONS = "predictions.jsonl"
REFUSED = "refused.jsonl"
LOCK = ".lock"


class Statement(StrEnum):
    """Where a task's problem statement came from: an issue, or (mined without one) the
    merged change request's title and body, or the commit's message."""

    ISSUE = "issue"
    CHANGE_REQUEST = "change_request"
    COMMIT = "commit"


@dataclass(frozen=True)
class TaskResult:
    instance_id: str
    resolved: bool
    reason: str  # "" when resolved, else why (scoring's reason, or the error)
    outcome: str  # Finish: done / help needed / error
    agent_reason: str = ""
    model_patch: str = ""
    branch: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    tokens_by_phase: dict[str, dict[str, int]] = field(default_factory=dict)
    cost: float = 0.0
    model_calls: int = 0
    revisions: int = 0
    waits_answered: int = 0  # questions answered "no answer: decide", approvals given/refused
    setup_seconds: float = 0.0
    agent_seconds: float = 0.0
    test_seconds: float = 0.0
    harness_seconds: float = 0.0  # the harness's own time: origin, diff, bookkeeping
    fail_to_pass: dict[str, str] = field(default_factory=dict)
    pass_to_pass: dict[str, str] = field(default_factory=dict)
    statement: str = Statement.ISSUE.value  # mined without an issue: COMMIT, CHANGE_REQUEST

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def seconds(self) -> float:
        parts = (self.setup_seconds, self.agent_seconds, self.test_seconds, self.harness_seconds)
        return sum(parts)

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False, sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TaskResult:
        known = cls.__dataclass_fields__
        return cls(**{k: v for k, v in data.items() if k in known})


def read_results(folder: Path) -> list[TaskResult]:
    """The finished tasks of a run folder, first result of an id kept; lines a crash cut
    (or that are not results) are skipped."""
    path = folder / RESULTS
    if not path.is_file():
        return []
    found: dict[str, TaskResult] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            data = json.loads(line)
            result = TaskResult.from_dict(data)
        except (ValueError, TypeError):
            continue
        found.setdefault(result.instance_id, result)
    return list(found.values())


def _append(path: Path, line: str) -> None:
    """One line appended and flushed to disk; a line a crash left unfinished is closed
    first, so the new line stands on its own."""
    with path.open("a+b") as handle:
        handle.seek(0, os.SEEK_END)
        if handle.tell():
            handle.seek(-1, os.SEEK_END)
            if handle.read(1) != b"\n":
                handle.write(b"\n")
        handle.write(line.encode("utf-8") + b"\n")
        handle.flush()
        os.fsync(handle.fileno())


def prediction(result: TaskResult, model: str) -> str:
    record = {"instance_id": result.instance_id, "model_name_or_path": model,
              "model_patch": result.model_patch}  # fmt: skip
    return json.dumps(record, ensure_ascii=False)


class RunFolder:
    """The files of one run; its methods run in a thread (they write and fsync)."""

    def __init__(self, path: Path, model: str) -> None:
        self.path = path
        self.model = model

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """The folder's writers one at a time (an exclusive ``flock``, waited for)."""
        with (self.path / LOCK).open("a") as handle:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)

    def record(self, result: TaskResult) -> bool:
        """The task is finished: its result, then its prediction; False (nothing
        written) when it was recorded already."""
        with self.locked():
            if any(r.instance_id == result.instance_id for r in read_results(self.path)):
                return False
            _append(self.path / RESULTS, result.to_json())
            _append(self.path / PREDICTIONS, prediction(result, self.model))
            return True

    def refuse(self, lines: list[str]) -> None:
        """The tasks the tasks file refuses, as it refuses them now (the file written
        whole, so a resume never counts one twice)."""
        with self.locked():
            replace_file(self.path / REFUSED, "".join(f"{line}\n" for line in lines))

    def predicted(self) -> set[str]:
        path = self.path / PREDICTIONS
        ids = set()
        if path.is_file():
            for line in path.read_text(encoding="utf-8").splitlines():
                try:
                    ids.add(str(json.loads(line)["instance_id"]))
                except (ValueError, KeyError, TypeError):
                    continue
        return ids

    def mend(self, results: list[TaskResult]) -> int:
        """Predictions of finished tasks a crash kept from being written; how many."""
        with self.locked():
            have = self.predicted()
            missing = [r for r in results if r.instance_id not in have]
            for result in missing:
                _append(self.path / PREDICTIONS, prediction(result, self.model))
            return len(missing)
