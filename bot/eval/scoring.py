"""Score one prediction as SWE-bench does: resolved only when every FAIL_TO_PASS and every
PASS_TO_PASS test passes with the model's patch and the task's test patch applied.

``score_patch`` makes a fresh checkout of ``base_commit`` in ``work_dir`` and sets it up
(``prepared``: the bot's own set-up, cached), then refuses a model patch that touches a
file the test patch changes (the tests would no longer be the task's), applies the model
patch and the test patch with ``git apply`` (a patch that does not apply is unresolved,
with git's reason), and runs the tests in the sandbox without network (``testrun``). The
tests' whole output is kept in ``work_dir/tests.log``; the checkout is removed.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bot.config import Settings
from bot.eval.checkout import CheckoutError, apply_patch, patch_paths
from bot.eval.prepared import Prepared, prepared, setup_failure
from bot.eval.testrun import TestRun, TestStatus, run_tests
from bot.sandbox.gitcmd import WorkspaceError

__all__ = ["Score", "TestStatus", "judge", "score_patch"]

NAMED = 3  # the failing test ids a reason names


@dataclass(frozen=True)
class Score:
    resolved: bool
    reason: str  # "" when resolved, else why in one line
    fail_to_pass: dict[str, TestStatus]
    pass_to_pass: dict[str, TestStatus]
    seconds: float
    setup_seconds: float = 0.0  # of ``seconds``: the set-up (or its restore from the cache)
    test_seconds: float = 0.0  # of ``seconds``: the test command


class _Step(enum.Enum):
    """Where a score was decided before the tests ran."""

    SETUP = "set-up"
    MODEL_PATCH = "model patch"
    TEST_PATCH = "test patch"


async def score_patch(
    *,
    repo: Path,
    base_commit: str,
    model_patch: str,
    test_patch: str,
    fail_to_pass: Sequence[str],
    pass_to_pass: Sequence[str],
    test_command: Sequence[str] | None,
    setup: Sequence[str] | None,
    settings: Settings,
    work_dir: Path,
) -> Score:
    """The score of ``model_patch`` on one task (never raises for what the task or the
    patch holds: the reason says what went wrong)."""
    started = time.monotonic()
    f2p, p2p = list(dict.fromkeys(fail_to_pass)), list(dict.fromkeys(pass_to_pass))
    done = _Done("the task names no FAIL_TO_PASS test")
    if f2p:
        try:
            async with prepared(repo=repo, commit=base_commit, work_dir=work_dir, setup=setup,
                                test_command=test_command, settings=settings) as ready:  # fmt: skip
                done = await _tested(ready, model_patch, test_patch, [*f2p, *p2p], work_dir)
        except (CheckoutError, WorkspaceError) as exc:
            done = _Done(f"no checkout could be prepared: {exc}")
    run = done.run
    resolved, reason = judge(f2p, p2p, run) if run else (False, done.reason)
    statuses = run.statuses if run else dict.fromkeys([*f2p, *p2p], TestStatus.MISSING)
    return Score(
        resolved, reason, {i: statuses[i] for i in f2p}, {i: statuses[i] for i in p2p},
        time.monotonic() - started, done.setup_seconds, run.seconds if run else 0.0,
    )  # fmt: skip


@dataclass(frozen=True, slots=True)
class _Done:
    """How far a scoring went: why it stopped before the tests, or their run."""

    reason: str
    run: TestRun | None = None
    setup_seconds: float = 0.0


async def _tested(
    ready: Prepared, model_patch: str, test_patch: str, ids: list[str], work_dir: Path
) -> _Done:
    refused = await _patched(ready, model_patch, test_patch)
    if refused:
        return _Done(refused, setup_seconds=ready.setup_seconds)
    run = await run_tests(ready.root, ids, sandbox=ready.sandbox, how=ready.how,
                          log_path=work_dir / "tests.log")  # fmt: skip
    return _Done("", run, ready.setup_seconds)


async def _patched(ready: Prepared, model_patch: str, test_patch: str) -> str:
    """Set-up checked and both patches applied: "" when the tests can run, else why."""
    failed = setup_failure(ready.setup)
    if failed:
        return _why(_Step.SETUP, failed)
    try:
        touched = set(await patch_paths(ready.root, model_patch))
    except CheckoutError as exc:
        return _why(_Step.MODEL_PATCH, f"git cannot read it: {exc}")
    try:
        tests = set(await patch_paths(ready.root, test_patch))
    except CheckoutError as exc:
        return _why(_Step.TEST_PATCH, f"git cannot read it: {exc}")
    both = sorted(touched & tests)
    if both:
        return _why(_Step.MODEL_PATCH, f"it changes files the test patch changes: {_named(both)}")
    refused = await apply_patch(ready.root, model_patch)
    if refused:
        return _why(_Step.MODEL_PATCH, f"it does not apply: {refused}")
    refused = await apply_patch(ready.root, test_patch)
    if refused:
        return _why(_Step.TEST_PATCH, f"it does not apply over the model patch: {refused}")
    return ""


def _why(step: _Step, text: str) -> str:
    return text if step is _Step.SETUP else f"the {step.value} was refused: {text}"


def judge(f2p: Sequence[str], p2p: Sequence[str], run: TestRun) -> tuple[bool, str]:
    """Resolved, or why not (one line): the run's failure, else the first tests that did
    not pass, FAIL_TO_PASS first. Pure."""
    if run.error:
        return False, f"the tests could not run: {run.error}"
    if run.timed_out:
        return False, f"the tests did not finish within the time allowed ({run.seconds:.0f} s)"
    for name, ids in (("FAIL_TO_PASS", f2p), ("PASS_TO_PASS", p2p)):
        bad = [f"{i} ({run.statuses[i].value})" for i in ids
               if run.statuses[i] is not TestStatus.PASSED]  # fmt: skip
        if bad:
            return False, f"{name} not passing: {_named(bad)}"
    return True, ""


def _named(items: Sequence[str]) -> str:
    shown = ", ".join(items[:NAMED])
    more = len(items) - NAMED
    return f"{shown} and {more} more" if more > 0 else shown
