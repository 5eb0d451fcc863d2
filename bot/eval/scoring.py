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
from bot.tools.gitcmd import WorkspaceError

__all__ = ["Score", "TestStatus", "judge", "score_patch"]

NAMED = 3  # the failing test ids a reason names


@dataclass(frozen=True)
class Score:
    resolved: bool
    reason: str  # "" when resolved, else why in one line
    fail_to_pass: dict[str, TestStatus]
    pass_to_pass: dict[str, TestStatus]
    seconds: float


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
    missing = {i: TestStatus.MISSING for i in [*f2p, *p2p]}

    def unresolved(reason: str, statuses: dict[str, TestStatus] = missing) -> Score:
        return Score(False, reason, {i: statuses[i] for i in f2p},
                     {i: statuses[i] for i in p2p}, time.monotonic() - started)  # fmt: skip

    if not f2p:
        return unresolved("the task names no FAIL_TO_PASS test")
    try:
        async with prepared(repo=repo, commit=base_commit, work_dir=work_dir, setup=setup,
                            test_command=test_command, settings=settings) as ready:  # fmt: skip
            refused = await _patched(ready, model_patch, test_patch)
            if refused:
                return unresolved(refused)
            run = await run_tests(ready.root, [*f2p, *p2p], sandbox=ready.sandbox,
                                  how=ready.how, log_path=work_dir / "tests.log")  # fmt: skip
    except (CheckoutError, WorkspaceError) as exc:
        return unresolved(f"no checkout could be prepared: {exc}")
    resolved, reason = judge(f2p, p2p, run)
    return Score(resolved, reason, {i: run.statuses[i] for i in f2p},
                 {i: run.statuses[i] for i in p2p}, time.monotonic() - started)  # fmt: skip


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
