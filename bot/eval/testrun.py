"""Run test ids in the sandbox (no network) and read each one's status.

The default command is pytest (``python3 -m pytest``: the workspace's ``.venv`` comes first
on PATH, see ``sandbox.project_env``); a task may name its own (one argv, the test ids
appended). Never a shell: the ids are arguments of their own. For pytest the run writes a
JUnit XML report into the workspace (a name no patch can guess, read and removed after
the run) and prints the ``-rA`` summary; a requested id's status comes from the report,
else from the summary lines, else it is ``MISSING`` (not run: its file is gone, it was
not collected, it was skipped, or the run timed out). ``discover`` runs the whole suite
and returns every id the summary names (mining).

Statuses: ``PASSED`` (an expected failure counts as passed, as SWE-bench counts it; so
does an unexpected pass that is not strict, as pytest counts it), ``FAILED`` (an
assertion, a strict xpass), ``ERROR`` (set-up, teardown or collection), ``MISSING``.
The whole output goes to ``log_path`` when one is given, within ``sandbox.max_file_mb``.
"""

from __future__ import annotations

import asyncio
import enum
import re
import secrets
import time
import xml.etree.ElementTree as ElementTree
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from bot.sandbox.sandbox import CommandRefused, Sandbox, SandboxUnavailable, WorkspaceFull

DEFAULT_COMMAND = ("python3", "-m", "pytest")
PYTEST_OPTIONS = ("-p", "no:cacheprovider", "-rA", "--tb=short", "-o", "junit_logging=no")
MAX_REPORT_BYTES = 32 << 20
MAX_ARGV_CHARS = 512 << 10  # the ids on one command line (the kernel allows 2 MiB in all)
_SUMMARY_HEADER = re.compile(r"^=+ short test summary info =+$", re.MULTILINE)
_SUMMARY_LINE = re.compile(r"^(PASSED|FAILED|ERROR|XFAIL|XPASS) (\S.*)$")


class TestStatus(enum.Enum):
    """How one test id ended."""

    __test__ = False  # not a test class for pytest

    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"
    MISSING = "missing"


_WORDS = {
    "PASSED": TestStatus.PASSED,
    "XFAIL": TestStatus.PASSED,
    "FAILED": TestStatus.FAILED,
    "XPASS": TestStatus.PASSED,  # not strict (a strict one is FAILED)
    "ERROR": TestStatus.ERROR,
}
_RANK = {TestStatus.MISSING: 0, TestStatus.PASSED: 1, TestStatus.FAILED: 2, TestStatus.ERROR: 3}


@dataclass(frozen=True, slots=True)
class TestRun:
    """One run: each id's status, and how the command ended (``error``: why it could not
    run at all, "" when it ran)."""

    __test__ = False

    statuses: dict[str, TestStatus]
    exit_code: int | None
    timed_out: bool
    seconds: float
    output: str = ""  # the head and tail the sandbox kept
    error: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def ran(self) -> bool:
        return not self.error and not self.timed_out and self.exit_code is not None


def is_pytest(command: Sequence[str]) -> bool:
    """Whether ``command`` runs pytest (then the report and summary options are added)."""
    return any(PurePosixPath(part).name in ("pytest", "py.test") for part in command)


def command_line(command: Sequence[str], ids: Sequence[str], report: str | None) -> list[str]:
    """The command line: the command, pytest's options (with ``report``), then the ids."""
    argv = list(command)
    if report is not None and is_pytest(command):
        argv += [*PYTEST_OPTIONS, f"--junitxml={report}"]
    return argv + list(ids)


def junit_key(test_id: str) -> tuple[str, str]:
    """The (classname, name) pytest's JUnit report gives ``test_id`` (pytest's own
    ``mangle_test_address``): the file's path dotted without ``.py``, then the classes."""
    path, bracket, params = test_id.partition("[")
    names = path.split("::")
    names[0] = re.sub(r"\.py$", "", names[0].replace("/", "."))
    names[-1] += bracket + params
    return ".".join(names[:-1]), names[-1]


def junit_statuses(xml_text: str, ids: Sequence[str]) -> dict[str, TestStatus]:
    """The status of each of ``ids`` the report holds (a skipped test is left out). Pure.
    The report lies in a folder the tests could write: one with a document type (pytest
    never writes one; entities could expand) tells nothing."""
    if "<!DOCTYPE" in xml_text or "<!ENTITY" in xml_text:
        return {}
    try:
        root = ElementTree.fromstring(xml_text)  # noqa: S314 (no DTD: checked above)
    except ElementTree.ParseError:
        return {}
    found: dict[tuple[str, str], TestStatus] = {}
    for case in root.iter("testcase"):
        key = (case.get("classname", ""), case.get("name", ""))
        status = _case_status(case)
        if status is not TestStatus.MISSING:
            found[key] = _worse(found.get(key), status)
    keys = {test_id: junit_key(test_id) for test_id in ids}
    return {test_id: found[key] for test_id, key in keys.items() if key in found}


def _case_status(case: ElementTree.Element) -> TestStatus:
    if case.find("error") is not None:
        return TestStatus.ERROR
    if case.find("failure") is not None:
        return TestStatus.FAILED
    skipped = case.find("skipped")
    if skipped is not None:
        xfail = skipped.get("type") == "pytest.xfail"
        return TestStatus.PASSED if xfail else TestStatus.MISSING
    return TestStatus.PASSED


def _worse(old: TestStatus | None, new: TestStatus) -> TestStatus:
    return new if old is None or _RANK[new] > _RANK[old] else old


def summary_statuses(output: str) -> dict[str, TestStatus]:
    """Every id of the last ``short test summary info`` section (pytest ``-rA``). Pure."""
    headers = list(_SUMMARY_HEADER.finditer(output))
    if not headers:
        return {}
    found: dict[str, TestStatus] = {}
    for line in output[headers[-1].end() :].splitlines():
        match = _SUMMARY_LINE.match(line.rstrip())
        if match is None:
            continue
        word, rest = match.groups()
        test_id = rest if word == "PASSED" else rest.split(" - ", 1)[0]
        found[test_id] = _worse(found.get(test_id), _WORDS[word])
    return found


def read_statuses(ids: Sequence[str], report: str | None, output: str) -> dict[str, TestStatus]:
    """Each id's status: from the report, else the summary, else ``MISSING``. Pure."""
    from_report = junit_statuses(report, ids) if report else {}
    summary = summary_statuses(output)
    return {i: from_report.get(i) or summary.get(i) or TestStatus.MISSING for i in ids}


def runnable(root: Path, ids: Sequence[str]) -> tuple[list[str], list[str]]:
    """The ids that can be handed to the command, and those that cannot (an option-like
    id, a path outside the workspace, or a file the workspace does not have)."""
    kept, left = [], []
    for test_id in dict.fromkeys(ids):
        path = test_id.split("::", 1)[0]
        inside = bool(path) and not path.startswith("/") and ".." not in PurePosixPath(path).parts
        if test_id.startswith("-") or not inside or not (root / path).exists():
            left.append(test_id)
        else:
            kept.append(test_id)
    return kept, left


def targets(ids: Sequence[str]) -> list[str]:
    """What goes on the command line: the ids, or their files when the ids would not fit
    (each id's status is still read from the report). Pure."""
    if sum(len(i) + 1 for i in ids) <= MAX_ARGV_CHARS:
        return list(ids)
    return sorted({i.split("::", 1)[0] for i in ids})


@dataclass(frozen=True, slots=True)
class TestCommand:
    """How to run tests: the command (None: pytest), the deadline, the environment."""

    __test__ = False

    command: tuple[str, ...] | None = None
    timeout: float = 300.0
    env: Mapping[str, str] = field(default_factory=dict)

    @property
    def argv(self) -> tuple[str, ...]:
        return self.command or DEFAULT_COMMAND


async def run_tests(
    root: Path,
    ids: Sequence[str],
    *,
    sandbox: Sandbox,
    how: TestCommand,
    log_path: Path | None = None,
) -> TestRun:
    """Run ``ids`` in ``root``; every id has a status in the result."""
    kept, left = runnable(root, ids)
    notes = tuple(f"not run: {i} (no such file in the workspace)" for i in left)
    if not kept:
        missing = dict.fromkeys(ids, TestStatus.MISSING)
        return TestRun(missing, None, False, 0.0, error="no test id names a file here",
                       notes=notes)  # fmt: skip
    run = await _run(root, kept, sandbox, how, log_path)
    statuses = {**run.statuses, **dict.fromkeys(left, TestStatus.MISSING)}
    return TestRun({i: statuses[i] for i in ids}, run.exit_code, run.timed_out, run.seconds,
                   run.output, run.error, notes)  # fmt: skip


async def discover(
    root: Path, *, sandbox: Sandbox, how: TestCommand, log_path: Path | None = None
) -> TestRun:
    """Run the whole suite; every id the summary names, with its status."""
    return await _run(root, None, sandbox, how, log_path)


async def _run(
    root: Path,
    ids: list[str] | None,
    sandbox: Sandbox,
    how: TestCommand,
    log_path: Path | None,
) -> TestRun:
    name = f".eval-report-{secrets.token_hex(8)}.xml"
    report_path = root / name
    argv = command_line(how.argv, targets(ids or []), name)
    started = time.monotonic()
    try:
        result = await sandbox.run(argv, cwd=root, timeout=how.timeout, env=dict(how.env),
                                   log_path=log_path)  # fmt: skip
    except (CommandRefused, SandboxUnavailable, WorkspaceFull, ValueError, OSError) as exc:
        await asyncio.to_thread(report_path.unlink, missing_ok=True)
        return TestRun(dict.fromkeys(ids or [], TestStatus.MISSING), None, False,
                       time.monotonic() - started, error=str(exc))  # fmt: skip
    report = await asyncio.to_thread(_take_report, report_path)
    output = await asyncio.to_thread(_whole_output, log_path, result.stdout, result.stderr)
    seconds = time.monotonic() - started
    statuses = read_statuses(ids, report, output) if ids is not None else summary_statuses(output)
    tail = result.stdout + ("\n" + result.stderr if result.stderr else "")
    return TestRun(statuses, result.exit_code, result.timed_out, seconds, tail)


def _take_report(path: Path) -> str | None:
    """The report's text (None when there is none, it is not a plain file, or too big);
    the file is removed."""
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_REPORT_BYTES:
            return None
        return path.read_text(encoding="utf-8", errors="replace")
    finally:
        path.unlink(missing_ok=True)


def _whole_output(log_path: Path | None, stdout: str, stderr: str) -> str:
    """The whole output when it went to a log (the sandbox keeps only head and tail)."""
    if log_path is not None and log_path.is_file():
        return log_path.read_text(encoding="utf-8", errors="replace")
    return stdout + "\n" + stderr
