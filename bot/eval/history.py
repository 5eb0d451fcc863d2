"""A repository's history as candidate tasks: the commits that change both code and tests.

``candidates`` walks the history from HEAD, newest first (the root commit left out, and
the merge commits but those it is asked for: a merged change request's, taken against
their first parent), and splits each commit's diff against its parent into the test
files' part (``test_patch``) and the rest (``patch``). What a test file is: ``is_test_path``. The
issue a commit message names (``Fixes #3``, ``Closes !7``): ``linked_issue``. git runs
on the host with the workspace's safe environment (``checkout.git``); nothing runs here.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from bot.eval.checkout import git

TEST_DIRS = frozenset({"test", "tests", "testing", "__tests__", "spec", "specs"})
_TEST_FILE = re.compile(
    r"^(test_.+\.py|.+_tests?\.py|conftest\.py|.+\.(test|spec)\.[cm]?[jt]sx?|.+_test\.go"
    r"|.+_spec\.rb|.+Tests?\.(java|kt|cs))$"
)
_LINK = re.compile(
    r"\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)\b:?[ \t]+(?P<sign>[#!])(?P<number>[0-9]{1,10})\b",
    re.IGNORECASE,
)
_FIELD, _RECORD = "\x1f", "\x1e"


def is_test_path(path: str) -> bool:
    """Whether ``path`` (relative, with ``/``) is a test file: under a test folder, or
    named as the common test runners name their files. Pure."""
    parts = PurePosixPath(path).parts
    if any(part.lower() in TEST_DIRS for part in parts[:-1]):
        return True
    return bool(parts) and _TEST_FILE.match(parts[-1]) is not None


@dataclass(frozen=True, slots=True)
class Link:
    """The issue (``#N``) or change request (``!N``) a commit message says it closes."""

    number: int
    change_request: bool


def linked_issue(message: str) -> Link | None:
    """The first ``Fixes #N`` / ``Closes !N`` / ``Resolves #N`` of ``message``. Pure."""
    found = _LINK.search(message)
    if found is None:
        return None
    return Link(int(found["number"]), found["sign"] == "!")


@dataclass(frozen=True, slots=True)
class Candidate:
    commit: str
    parent: str
    created_at: str  # the commit's date, ISO 8601 in UTC
    message: str
    test_files: tuple[str, ...]
    code_files: tuple[str, ...]
    test_patch: str = ""
    patch: str = ""


def parse_log(text: str) -> list[tuple[str, list[str], str, str]]:
    """``git log`` records (commit, parents, date, message) of the format ``candidates``
    asks for. Pure."""
    records = []
    for record in text.split(_RECORD):
        fields = record.strip("\n").split(_FIELD)
        if len(fields) == 4:
            commit, parents, date, message = fields
            records.append((commit, parents.split(), utc(date), message.strip()))
    return records


def utc(date: str) -> str:
    """An ISO 8601 date in UTC as SWE-bench writes ``created_at`` (``...T10:00:00Z``). Pure."""
    try:
        moment = datetime.datetime.fromisoformat(date)
    except ValueError:
        return date
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def split_paths(paths: list[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The test files and the others. Pure."""
    tests = tuple(p for p in paths if is_test_path(p))
    return tests, tuple(p for p in paths if not is_test_path(p))


async def candidates(
    repo: Path, *, since: str | None = None, merges: frozenset[str] = frozenset()
) -> AsyncGenerator[Candidate, None]:
    """Each commit from HEAD back (``since``: a date git understands) that changes both
    test files and other files, with its two patches; of the merge commits, only those
    in ``merges``, against their first parent."""
    fmt = _FIELD.join(("%H", "%P", "%cI", "%B")) + _RECORD
    window = [f"--since={since}"] if since else []
    which = [] if merges else ["--no-merges"]
    log = await git("log", *which, f"--format={fmt}", *window, "HEAD", "--", cwd=repo)
    for commit, parents, date, message in parse_log(log.stdout):
        if not parents or (len(parents) > 1 and commit not in merges):
            continue
        listed = await git("diff", "--name-only", "-z", "--no-renames", parents[0], commit,
                           cwd=repo)  # fmt: skip
        tests, code = split_paths([p for p in listed.stdout.split("\0") if p])
        if tests and code:
            found = Candidate(commit, parents[0], date, message, tests, code)
            yield Candidate(
                commit, parents[0], date, message, tests, code,
                test_patch=await _diff(repo, found, tests), patch=await _diff(repo, found, code),
            )  # fmt: skip


async def _diff(repo: Path, candidate: Candidate, paths: tuple[str, ...]) -> str:
    literal = [f":(literal){p}" for p in paths]
    shown = await git("diff", "--binary", "--no-color", "--no-ext-diff", "--no-textconv",
                      "--no-renames", candidate.parent, candidate.commit, "--", *literal,
                      cwd=repo)  # fmt: skip
    return shown.stdout
