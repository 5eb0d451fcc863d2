"""The quality gate: lint, then tests (only when lint passes), in the sandbox.

``detect_commands`` finds the project's own commands: ``make lint`` / ``make test``
when the Makefile has those targets, else ``npm run lint`` / ``npm test`` from
package.json scripts, else ruff / pytest for a Python project configured for them.
``run_quality_gate`` runs them and returns a ``QualityReport`` whose ``feedback`` is
the short failure summary the agent gets (first problems as ``file:line``, the
failing tests), and whose ``to_dict`` is what ``quality.json`` stores.

Each step ends in a ``StepStatus``; the gate as a whole is tri-state (``GateResult``):
passed, failed, or not configured when the project has no lint and no test command
(which is never reported as a pass).
"""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from bot import tracing
from bot.sandbox.bwrap import DEFAULT_PATH
from bot.sandbox.sandbox import CommandRefused, Sandbox, SandboxUnavailable, WorkspaceFull
from bot.text import clip
from bot.tools.quality_feedback import (
    coverage_percent,
    problems,
    summary_counts,
    tail_lines,
    warning_count,
)

RUFF = ("ruff", "check", "--output-format", "concise", ".")
PYTEST = ("pytest", "-q", "-p", "no:cacheprovider")
_NPM_PLACEHOLDER = "no test specified"
_STORED_OUTPUT_CHARS = 4000


class StepStatus(StrEnum):
    """How one step of the gate (lint or tests) ended."""

    PASSED = "passed"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    ERROR = "error"  # the command could not run (refused, no sandbox, workspace full)
    NOT_CONFIGURED = "not_configured"
    SKIPPED = "skipped"  # tests, after a lint failure


class GateResult(StrEnum):
    """The gate as a whole."""

    PASSED = "passed"
    FAILED = "failed"
    NOT_CONFIGURED = "not_configured"  # no lint and no test command: nothing was checked


_FAILING = frozenset({StepStatus.FAILED, StepStatus.TIMED_OUT, StepStatus.ERROR})


def gate_result(lint: StepStatus, test: StepStatus) -> GateResult:
    """Failed when a step failed (or was skipped because lint failed), not configured
    when neither step has a command, else passed. Pure."""
    statuses = {lint, test}
    if statuses & _FAILING or StepStatus.SKIPPED in statuses:
        return GateResult.FAILED
    if statuses == {StepStatus.NOT_CONFIGURED}:
        return GateResult.NOT_CONFIGURED
    return GateResult.PASSED


def stored_result(quality: Mapping[str, Any] | None) -> GateResult | None:
    """The result of a stored report (``QualityReport.to_dict``; a report stored before
    the result was typed has only ``passed``); None when the gate did not run."""
    if quality is None:
        return None
    result = quality.get("result")
    if isinstance(result, str) and result in GateResult.__members__.values():
        return GateResult(result)
    return GateResult.PASSED if quality.get("passed") else GateResult.FAILED


@dataclass(frozen=True, slots=True)
class QualityCommands:
    lint: tuple[str, ...] | None
    test: tuple[str, ...] | None


def _make_target(root: Path, target: str) -> tuple[str, ...] | None:
    for name in ("GNUmakefile", "makefile", "Makefile"):
        path = root / name
        if path.is_file():
            text = path.read_text(encoding="utf-8", errors="replace")
            pattern = rf"^{re.escape(target)}\s*:(?![:=])"
            if re.search(pattern, text, re.MULTILINE):
                return ("make", target)
            return None
    return None


def _npm_script(root: Path, script: str) -> tuple[str, ...] | None:
    path = root / "package.json"
    if not path.is_file():
        return None
    try:
        scripts = json.loads(path.read_text(encoding="utf-8")).get("scripts") or {}
    except (json.JSONDecodeError, UnicodeDecodeError, AttributeError):
        return None
    command = scripts.get(script) if isinstance(scripts, dict) else None
    if not isinstance(command, str) or not command.strip():
        return None
    if script == "test":
        return None if _NPM_PLACEHOLDER in command else ("npm", "test")
    return ("npm", "run", script)


def _pyproject(root: Path) -> dict[str, Any] | None:
    path = root / "pyproject.toml"
    if not path.is_file():
        return None
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError):
        return None


def _declares(data: dict[str, Any], package: str) -> bool:
    """Whether ``package`` is among the project's dependencies (any group)."""
    project = data.get("project") or {}
    lists: list[Any] = [project.get("dependencies") or []]
    lists += list((project.get("optional-dependencies") or {}).values())
    lists += list((data.get("dependency-groups") or {}).values())
    poetry = (data.get("tool") or {}).get("poetry") or {}
    lists += [list((poetry.get("dev-dependencies") or {}).keys())]
    lists += [
        list((g.get("dependencies") or {}).keys()) for g in (poetry.get("group") or {}).values()
    ]
    names = (re.split(r"[\s<>=!~\[;]", str(item), maxsplit=1)[0] for lst in lists for item in lst)
    return any(name.lower() == package for name in names)


def _python_commands(root: Path) -> QualityCommands:
    data = _pyproject(root)
    tool = (data or {}).get("tool") or {}
    has_ruff = (root / "ruff.toml").is_file() or (root / ".ruff.toml").is_file()
    has_ruff = has_ruff or "ruff" in tool or (data is not None and _declares(data, "ruff"))
    has_pytest = (root / "pytest.ini").is_file() or "pytest" in tool
    has_pytest = has_pytest or (data is not None and _declares(data, "pytest"))
    return QualityCommands(lint=RUFF if has_ruff else None, test=PYTEST if has_pytest else None)


def detect_commands(root: Path) -> QualityCommands:
    """The project's lint and test commands (None when it has none we recognise)."""
    python = _python_commands(root)
    lint = _make_target(root, "lint") or _npm_script(root, "lint") or python.lint
    test = _make_target(root, "test") or _npm_script(root, "test") or python.test
    return QualityCommands(lint=lint, test=test)


@dataclass(frozen=True, slots=True)
class QualityReport:
    result: GateResult
    lint: dict[str, Any]
    test: dict[str, Any]
    test_skipped: bool
    feedback: str

    @property
    def passed(self) -> bool:
        return self.result is GateResult.PASSED

    def to_dict(self) -> dict[str, Any]:
        """The report as ``quality.json`` keeps it: each step, and the warnings of the
        steps that told them and the tests' coverage, when the tools reported them."""
        data = asdict(self)
        data["result"] = self.result.value
        data["passed"] = self.passed
        told = [s["warnings"] for s in (self.lint, self.test) if s.get("warnings") is not None]
        if told:
            data["warnings"] = sum(told)
        if self.test.get("coverage") is not None:
            data["coverage"] = self.test["coverage"]
        return data


def gate_steps(quality: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Each step of a stored report as people read it: name, command (words), status,
    counts (what the tool's summary told; {} when it told nothing). Pure."""
    steps = []
    for name in ("lint", "test"):
        step = quality.get(name) or {}
        steps.append({
            "name": name,
            "command": shlex.join(step.get("command") or []),
            "status": str(step.get("status", StepStatus.NOT_CONFIGURED.value)),
            "counts": dict(step.get("counts") or {}),
        })  # fmt: skip
    return steps


def _gate_env(root: Path, env: Mapping[str, str] | None) -> dict[str, str]:
    """The project's own tool directories first on PATH."""
    merged = dict(env or {})
    local = [root / ".venv" / "bin", root / "node_modules" / ".bin"]
    prefix = [str(p) for p in local if p.is_dir()]
    merged["PATH"] = ":".join([*prefix, merged.get("PATH", DEFAULT_PATH)])
    return merged


async def _step(
    kind: str, argv: tuple[str, ...], root: Path, sandbox: Sandbox, timeout: float,
    env: dict[str, str],
) -> dict[str, Any]:  # fmt: skip
    step: dict[str, Any] = {"command": list(argv)}
    try:
        with tracing.command_span(f"gate {kind}", shlex.join(argv)) as span:
            result = await sandbox.run(argv, cwd=root, timeout=timeout, env=env)
            ok = result.exit_code == 0 and not result.timed_out
            tracing.command_ended(span, result.exit_code, timed_out=result.timed_out, ok=ok)
    except (CommandRefused, SandboxUnavailable, WorkspaceFull, ValueError) as exc:
        return {**step, "status": StepStatus.ERROR.value, "exit_code": None, "output": str(exc)}
    output = "\n".join(part for part in (result.stdout, result.stderr) if part)
    status = (
        StepStatus.TIMED_OUT
        if result.timed_out
        else StepStatus.PASSED
        if result.exit_code == 0
        else StepStatus.FAILED
    )
    counts = summary_counts(kind, output)
    told: dict[str, Any] = {"warnings": warning_count(counts)}
    if kind == "test":
        told["coverage"] = coverage_percent(output)
    return {
        **step,
        "status": status.value,
        "exit_code": result.exit_code,
        "duration": round(result.duration, 3),
        "counts": counts,
        **{key: value for key, value in told.items() if value is not None},
        "problems": problems(kind, output) if status is not StepStatus.PASSED else [],
        "output": clip(output, _STORED_OUTPUT_CHARS, keep="tail", note=""),
    }


async def run_quality_gate(
    root: Path,
    sandbox: Sandbox,
    commands: QualityCommands,
    *,
    timeout: float,
    env: Mapping[str, str] | None = None,
) -> QualityReport:
    """Lint, then tests unless lint failed; each command limited to ``timeout`` seconds."""
    gate_env = _gate_env(root, env)
    lint: dict[str, Any] = {"status": StepStatus.NOT_CONFIGURED.value}
    if commands.lint:
        lint = await _step("lint", commands.lint, root, sandbox, timeout, gate_env)
    lint_status = StepStatus(lint["status"])
    test_skipped = lint_status in _FAILING
    test: dict[str, Any] = {"status": StepStatus.NOT_CONFIGURED.value}
    if test_skipped:
        test = {"status": StepStatus.SKIPPED.value, "reason": "lint failed"}
    elif commands.test:
        test = await _step("test", commands.test, root, sandbox, timeout, gate_env)
    result = gate_result(lint_status, StepStatus(test["status"]))
    return QualityReport(result, lint, test, test_skipped, feedback(lint, test, timeout))


def _describe(step: dict[str, Any], timeout: float) -> str:
    command = shlex.join(step["command"])
    if step["status"] == "timed_out":
        return f"`{command}` did not finish within {timeout:g} s"
    if step["status"] == "error":
        return f"`{command}` could not run: {step['output']}"
    return f"`{command}` failed (exit code {step['exit_code']})"


def feedback(lint: dict[str, Any], test: dict[str, Any], timeout: float) -> str:
    """What the agent reads after a gate run: short, specific, actionable."""
    lines: list[str] = []
    lint_status, test_status = StepStatus(lint["status"]), StepStatus(test["status"])
    if lint_status in _FAILING:
        lines.append(f"Lint failed: {_describe(lint, timeout)}. Tests were skipped.")
        lines += _details(lint, "Problems")
    elif test_status in _FAILING:
        lines.append(f"Tests failed: {_describe(test, timeout)}.")
        lines += _details(test, "Failures")
    elif gate_result(lint_status, test_status) is GateResult.NOT_CONFIGURED:
        return "No checks configured: the project has no lint or test command I recognise."
    else:
        missing = [
            k for k, s in (("lint", lint_status), ("test", test_status))
            if s is StepStatus.NOT_CONFIGURED
        ]  # fmt: skip
        note = f" (no {missing[0]} command found)" if missing else ""
        return f"Quality gate passed{note}."
    lines.append("Fix these, then run the quality gate again.")
    return "\n".join(lines)


def _details(step: dict[str, Any], title: str) -> list[str]:
    found = step.get("problems") or []
    if found:
        return [f"{title}:", *(f"  {p}" for p in found)]
    tail = tail_lines(step.get("output", ""))
    return ["Last lines of output:", *(f"  {line}" for line in tail)] if tail else []
