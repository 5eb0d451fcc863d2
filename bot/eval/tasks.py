"""Tasks in SWE-bench's format, read from a JSONL file or a folder of JSON files.

Each instance names ``instance_id``, ``repo``, ``base_commit``, ``problem_statement``,
``test_patch``, ``FAIL_TO_PASS`` and ``PASS_TO_PASS`` (JSON lists of test ids, or their JSON
text as SWE-bench ships them), optionally ``hints_text`` and ``patch`` (the reference fix),
and where the source is: ``repo_path`` (a local git repository) or ``repo_url`` (a git URL
this machine reaches). ``test_command`` and ``setup`` (a list of command lines, split as
``.agent.yaml``'s are) override, for scoring, what the repository's ``.agent.yaml`` or
the detection would run.

A malformed task is refused with its id and the field named; the others are read.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")
_SHA = re.compile(r"^[0-9a-fA-F]{7,64}$")
_TEXTS = ("repo", "problem_statement", "test_patch")


@dataclass(frozen=True)
class EvalTask:
    instance_id: str
    repo: str
    base_commit: str
    problem_statement: str
    test_patch: str
    fail_to_pass: tuple[str, ...]
    pass_to_pass: tuple[str, ...]
    hints_text: str = ""
    patch: str = ""
    repo_path: Path | None = None
    repo_url: str = ""
    test_command: tuple[str, ...] | None = None
    setup: tuple[str, ...] | None = None  # set-up command lines (scoring)
    extra: dict[str, Any] = field(default_factory=dict)  # e.g. mine's "statement": "commit"

    @property
    def title(self) -> str:
        """The issue's title: the statement's first line, cut to a title's length."""
        first = self.problem_statement.strip().splitlines()[0] if self.problem_statement else ""
        first = first.lstrip("# ").strip()
        return (first[:117] + "...") if len(first) > 120 else first or self.instance_id


@dataclass(frozen=True)
class Refused:
    """A task that was not read: ``where`` its line or file, ``instance_id`` when it had one."""

    where: str
    instance_id: str
    field: str
    reason: str

    def __str__(self) -> str:
        name = self.instance_id or "(no instance_id)"
        return f"{self.where}: task {name}: {self.field}: {self.reason}"


class TaskError(ValueError):
    def __init__(self, name: str, reason: str) -> None:
        super().__init__(f"{name}: {reason}")
        self.field = name
        self.reason = reason


def load_tasks(source: Path) -> tuple[list[EvalTask], list[Refused]]:
    """The tasks of ``source`` (a JSONL file or a folder of ``*.json``), and those refused.
    Raises ``OSError`` only when ``source`` itself cannot be read."""
    tasks: list[EvalTask] = []
    refused: list[Refused] = []
    seen: set[str] = set()
    for where, raw in _entries(source):
        name = str(raw.get("instance_id", "")) if isinstance(raw, dict) else ""
        try:
            if not isinstance(raw, dict):
                raise TaskError("instance", f"expected a JSON object, got {_kind(raw)}")
            task = parse_task(raw, base=source.parent if source.is_file() else source)
            if task.instance_id in seen:
                raise TaskError("instance_id", "appears twice")
        except TaskError as exc:
            refused.append(Refused(where, name, exc.field, exc.reason))
            continue
        seen.add(task.instance_id)
        tasks.append(task)
    return tasks, refused


def _entries(source: Path) -> Iterator[tuple[str, object]]:
    if source.is_dir():
        files = sorted(source.glob("*.json"))
        for path in files:
            yield from _decoded(path.name, path.read_text(encoding="utf-8"))
        return
    for number, line in enumerate(source.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            yield from _decoded(f"{source.name}:{number}", line)


def _decoded(where: str, text: str) -> Iterator[tuple[str, object]]:
    try:
        yield where, json.loads(text)
    except ValueError as exc:
        yield where, _Broken(str(exc))


class _Broken:
    def __init__(self, why: str) -> None:
        self.why = why


def _kind(raw: object) -> str:
    if isinstance(raw, _Broken):
        return f"text that is not JSON ({raw.why})"
    return type(raw).__name__


def valid_instance_id(value: object) -> bool:
    """Whether ``value`` is an id a task may have (a folder name of the run, never a
    path)."""
    return isinstance(value, str) and bool(_ID.match(value))


def parse_task(raw: dict[str, Any], *, base: Path) -> EvalTask:
    """One instance, checked field by field (``TaskError`` names the first bad one);
    a relative ``repo_path`` is taken from ``base``."""
    instance_id = raw.get("instance_id")
    if not isinstance(instance_id, str) or not _ID.match(instance_id):
        raise TaskError("instance_id", "letters, digits, '.', '_' and '-' (up to 200)")
    for name in _TEXTS:
        if not isinstance(raw.get(name), str) or not raw[name].strip():
            raise TaskError(name, "missing or empty")
    commit = raw.get("base_commit")
    if not isinstance(commit, str) or not _SHA.match(commit):
        raise TaskError("base_commit", "a commit id (7 to 64 hex digits)")
    f2p, p2p = _ids(raw, "FAIL_TO_PASS"), _ids(raw, "PASS_TO_PASS")
    if not f2p:
        raise TaskError("FAIL_TO_PASS", "names no test")
    path, url = raw.get("repo_path"), raw.get("repo_url")
    if (path is not None and not isinstance(path, str)) or (
        url is not None and not isinstance(url, str)
    ):
        raise TaskError("repo_path", "repo_path and repo_url are strings")
    if not path and not url:
        raise TaskError("repo_path", "neither repo_path nor repo_url says where the source is")
    repo_path = (base / path).resolve() if path else None
    if (
        repo_path is not None
        and not (repo_path / ".git").exists()
        and not (repo_path / "HEAD").exists()
    ):
        raise TaskError("repo_path", f"{path} is not a git repository")
    known = {"instance_id", *_TEXTS, "base_commit", "FAIL_TO_PASS", "PASS_TO_PASS"}
    known |= {"hints_text", "patch", "repo_path", "repo_url", "test_command", "setup"}
    return EvalTask(
        instance_id=instance_id,
        repo=raw["repo"],
        base_commit=commit,
        problem_statement=raw["problem_statement"],
        test_patch=raw["test_patch"],
        fail_to_pass=f2p,
        pass_to_pass=p2p,
        hints_text=_text(raw, "hints_text"),
        patch=_text(raw, "patch"),
        repo_path=repo_path,
        repo_url=url or "",
        test_command=_argv(raw.get("test_command"), "test_command"),
        setup=_setup(raw.get("setup")),
        extra={k: v for k, v in raw.items() if k not in known},
    )


def _text(raw: dict[str, Any], name: str) -> str:
    value = raw.get(name)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise TaskError(name, "must be text")
    return value


def _ids(raw: dict[str, Any], name: str) -> tuple[str, ...]:
    value = raw.get(name)
    if isinstance(value, str):  # SWE-bench's files hold these lists as JSON text
        try:
            value = json.loads(value)
        except ValueError:
            raise TaskError(name, "is text that is not a JSON list") from None
    if not isinstance(value, list) or not all(isinstance(i, str) and i for i in value):
        raise TaskError(name, "must be a list of test ids")
    return tuple(dict.fromkeys(value))


def _argv(value: object, name: str) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        value = shlex.split(value)
    if not isinstance(value, list) or not value or not all(isinstance(a, str) for a in value):
        raise TaskError(name, "a command: a list of arguments (or one line, split as a shell)")
    return tuple(value)


def _setup(value: object) -> tuple[str, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(c, str) and c.strip() for c in value):
        raise TaskError("setup", "a list of commands, each one line (never given to a shell)")
    return tuple(value)
