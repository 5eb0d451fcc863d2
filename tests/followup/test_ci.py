"""One CI decision per head commit: settling, what counts as a failure, order and
repetition of events, and the step each decision leads to."""

from __future__ import annotations

import itertools
import random

import pytest

from bot.config import CiSettings
from bot.events import Check, CheckKind, CheckState
from bot.followup.ci import (
    CiAction,
    CiDecision,
    CiVerdict,
    autofix_switch,
    ci_mark,
    decide_ci,
    needs_base_checks,
    plan_ci_step,
    relevant_checks,
)

SHA = "a" * 40
BOT = ("coding-agent[bot]",)
SETTINGS = CiSettings()  # settle 60 s, 3 rounds, poll 600 s


ACTIONS = "github-actions[bot]"


def check(name: str, state: CheckState, **fields: object) -> Check:
    """A check of the repository's CI (GitHub Actions) unless ``reporter`` says otherwise."""
    fields.setdefault("reporter", ACTIONS)
    return Check(name=name, state=state, **fields)  # type: ignore[arg-type]


def decide(
    checks: list[Check], *, last: float = 0.0, now: float = 1000.0, **kw: object
) -> CiDecision:
    return decide_ci(
        checks,
        head_sha=SHA,
        last_change_at=last,
        now=now,
        settings=SETTINGS,
        bot_names=BOT,
        **kw,  # type: ignore[arg-type]
    )


# --- settling ---------------------------------------------------------------------------------


def test_a_running_check_is_not_settled_and_the_poll_is_the_fallback() -> None:
    decision = decide([check("test", CheckState.RUNNING), check("lint", CheckState.PASSED)])
    assert decision.verdict is CiVerdict.UNSETTLED and not decision.settled
    assert decision.recheck_at == 1000.0 + SETTINGS.poll_seconds
    assert [c.name for c in decision.pending] == ["test"]


def test_settled_checks_wait_for_quiet_after_the_last_change() -> None:
    checks = [check("test", CheckState.PASSED)]
    early = decide(checks, last=990.0, now=1000.0)
    assert early.verdict is CiVerdict.UNSETTLED and early.recheck_at == 1050.0
    assert decide(checks, last=990.0, now=1050.0).verdict is CiVerdict.PASSED


def test_no_checks_at_all_after_the_quiet_time() -> None:
    assert decide([], last=0.0, now=30.0).verdict is CiVerdict.UNSETTLED
    assert decide([], last=0.0, now=60.0).verdict is CiVerdict.NO_CHECKS


# --- what counts ------------------------------------------------------------------------------


def test_a_failure_to_fix() -> None:
    decision = decide([check("test", CheckState.FAILED), check("lint", CheckState.PASSED)])
    assert decision.verdict is CiVerdict.FAILED
    assert [c.name for c in decision.failed] == ["test"]
    assert [c.name for c in decision.passed] == ["lint"]


def test_the_bot_s_own_checks_are_ignored_whatever_they_say() -> None:
    own = check("coding-agent/gate", CheckState.FAILED, reporter="Coding-Agent[bot]")
    running = check("coding-agent/plan", CheckState.RUNNING, reporter="coding-agent[bot]")
    decision = decide([own, running, check("test", CheckState.PASSED)])
    assert decision.verdict is CiVerdict.PASSED
    assert [c.name for c in decision.checks] == ["test"]


def test_an_optional_failure_is_not_a_failure() -> None:
    flaky = check("docs", CheckState.FAILED, optional=True, kind=CheckKind.JOB)
    assert decide([flaky, check("test", CheckState.PASSED, kind=CheckKind.JOB)]).verdict is (
        CiVerdict.PASSED
    )


@pytest.mark.parametrize("state", [CheckState.WAITING, CheckState.CANCELLED])
def test_a_check_that_needs_a_person_is_reported(state: CheckState) -> None:
    decision = decide([check("deploy", state, conclusion="action_required")])
    assert decision.verdict is CiVerdict.NEEDS_PERSON
    assert [c.name for c in decision.waiting] == ["deploy"]


def test_a_failure_outranks_a_check_waiting_for_a_person() -> None:
    checks = [check("deploy", CheckState.WAITING), check("test", CheckState.FAILED)]
    assert decide(checks).verdict is CiVerdict.FAILED


def test_a_failure_the_base_shares_is_pre_existing() -> None:
    base = [check("test", CheckState.FAILED), check("lint", CheckState.PASSED)]
    head = [check("test", CheckState.FAILED), check("lint", CheckState.FAILED)]
    decision = decide(head, base_checks=base)
    assert decision.verdict is CiVerdict.FAILED
    assert [c.name for c in decision.failed] == ["lint"]
    assert [c.name for c in decision.pre_existing] == ["test"]
    only_shared = decide([check("test", CheckState.FAILED)], base_checks=base)
    assert only_shared.verdict is CiVerdict.PRE_EXISTING and only_shared.failed == ()


def test_base_checks_are_wanted_only_for_failures_not_yet_compared() -> None:
    failing = decide([check("test", CheckState.FAILED)])
    assert needs_base_checks(failing, base_read=False)
    assert not needs_base_checks(failing, base_read=True)
    assert not needs_base_checks(decide([check("t", CheckState.PASSED)]), base_read=False)


def test_aggregates_give_way_to_their_members() -> None:
    suite = check("github-actions", CheckState.FAILED, kind=CheckKind.SUITE)
    run = check("test", CheckState.PASSED)
    assert relevant_checks([suite, run], bot_names=BOT) == (run,)
    alone = check("pipeline 4", CheckState.RUNNING, kind=CheckKind.PIPELINE)
    assert relevant_checks([alone], bot_names=BOT) == (alone,)


def test_the_latest_report_of_a_check_counts() -> None:
    first = check("test", CheckState.FAILED)
    rerun = check("test", CheckState.PASSED)
    assert decide([first, rerun]).verdict is CiVerdict.PASSED


# --- order, repetition, absence ---------------------------------------------------------------

FINAL = [
    check("test", CheckState.FAILED, id="1"),
    check("lint", CheckState.PASSED, id="2"),
    check("build", CheckState.PASSED, id="3", kind=CheckKind.STATUS),
]


def _replay(deliveries: list[Check], *, poll_at: float) -> list[tuple[str, float]]:
    """The worker as part B runs it: each delivery moves ``last_change_at`` and makes it
    look at the forge's current checks; a poll looks without a delivery. Returns the
    decisions taken (each head commit's mark kept, as the store would)."""
    marks: set[str] = set()
    taken: list[tuple[str, float]] = []
    seen: list[Check] = []
    last = 0.0
    clock = 0.0
    wakes = [(10.0 * (i + 1), c) for i, c in enumerate(deliveries)] + [(poll_at, None)]
    # after the decision: a late redelivery of a report, then the next polls
    late: list[tuple[float, Check | None]] = [(poll_at + 5.0, FINAL[0])]
    wakes += [*late, (poll_at + 100.0, None), (poll_at + 700.0, None)]
    for clock, delivery in sorted(wakes, key=lambda item: item[0]):
        if delivery is not None:
            seen.append(delivery)
            last = clock
        current = FINAL if clock >= poll_at else seen  # a poll reads the forge itself
        decision = decide(list(current), last=last, now=clock)
        step = plan_ci_step(
            decision, decided=ci_mark("r", 1, SHA) in marks, rounds_done=0, settings=SETTINGS,
            autofix=True, gate_passed=True, ready_when_green=False, draft=True,
        )  # fmt: skip
        if step.action not in (CiAction.WAIT, CiAction.ALREADY_DECIDED):
            marks.add(ci_mark("r", 1, SHA))
            taken.append((step.action.value, clock))
    return taken


def test_events_in_any_order_and_twice_give_one_decision() -> None:
    rng = random.Random(7)
    for _ in range(50):
        deliveries = FINAL + rng.sample(FINAL, k=rng.randint(0, 3))  # some twice
        rng.shuffle(deliveries)
        taken = _replay(deliveries, poll_at=10.0 * len(deliveries) + SETTINGS.settle_seconds)
        assert taken == [("fix", 10.0 * len(deliveries) + SETTINGS.settle_seconds)]


def test_no_events_at_all_the_poll_decides_once() -> None:
    assert _replay([], poll_at=600.0) == [("fix", 600.0)]


def test_every_order_of_three_reports_decides_the_same() -> None:
    outcomes = {
        tuple(decide(list(order), last=0.0, now=100.0).failed)
        for order in itertools.permutations(FINAL)
    }
    assert len(outcomes) == 1


# --- the step ---------------------------------------------------------------------------------


def _step(decision: CiDecision, **kw: object) -> CiAction:
    args: dict[str, object] = {
        "decided": False, "rounds_done": 0, "settings": SETTINGS, "autofix": True,
        "gate_passed": True, "ready_when_green": False, "draft": True,
    }  # fmt: skip
    return plan_ci_step(decision, **(args | kw)).action  # type: ignore[arg-type]


def test_steps() -> None:
    failed = decide([check("test", CheckState.FAILED)])
    green = decide([check("test", CheckState.PASSED)])
    assert _step(decide([check("test", CheckState.RUNNING)])) is CiAction.WAIT
    assert _step(failed) is CiAction.FIX
    assert _step(failed, decided=True) is CiAction.ALREADY_DECIDED
    assert _step(failed, rounds_done=3) is CiAction.GIVE_UP
    assert _step(failed, autofix=False) is CiAction.REPORT
    assert _step(decide([check("d", CheckState.WAITING)])) is CiAction.REPORT
    assert _step(green) is CiAction.GREEN
    assert _step(green, ready_when_green=True) is CiAction.MARK_READY
    assert _step(green, ready_when_green=True, gate_passed=False) is CiAction.GREEN
    assert _step(green, ready_when_green=True, draft=False) is CiAction.GREEN


def test_giving_up_names_the_failing_checks() -> None:
    decision = decide([check("test", CheckState.FAILED), check("lint", CheckState.FAILED)])
    step = plan_ci_step(
        decision, decided=False, rounds_done=3, settings=SETTINGS, autofix=True,
        gate_passed=True, ready_when_green=False, draft=True,
    )  # fmt: skip
    assert step.action is CiAction.GIVE_UP and "test, lint" in step.reason


def test_no_fix_rounds_allowed_gives_up_at_once() -> None:
    failed = decide([check("test", CheckState.FAILED)])
    assert _step(failed, settings=CiSettings(max_fix_rounds=0)) is CiAction.GIVE_UP


def test_the_mark_is_per_head_commit() -> None:
    assert ci_mark("github:o/r", 4, SHA) != ci_mark("github:o/r", 4, "b" * 40)


@pytest.mark.parametrize(
    ("args", "want"), [("on", True), (" OFF ", False), ("yes", True), ("maybe", None), ("", None)]
)
def test_autofix_switch(args: str, want: bool | None) -> None:
    assert autofix_switch(args) is want


# --- whose checks start a round (issue 27) ----------------------------------------------------


def test_only_the_repository_s_ci_starts_a_round_the_others_are_reported() -> None:
    """Another App's check run, a status a person set (even one whose login is an App's
    slug without ``[bot]``) and an external status are reported, never fixed."""
    others = [
        check("lint", CheckState.FAILED, reporter="some-app[bot]"),
        check("deploy", CheckState.FAILED, kind=CheckKind.STATUS, reporter="github-actions"),
        check("gl-status", CheckState.FAILED, kind=CheckKind.STATUS, reporter="mallory"),
        check("nobody", CheckState.FAILED, reporter=""),
    ]
    decision = decide([*others, check("build", CheckState.PASSED)])
    assert decision.verdict is CiVerdict.UNTRUSTED and decision.failed == ()
    assert [c.name for c in decision.untrusted] == ["lint", "deploy", "gl-status", "nobody"]
    step = plan_ci_step(
        decision, decided=False, rounds_done=0, settings=SETTINGS, autofix=True,
        gate_passed=True, ready_when_green=True, draft=True,
    )  # fmt: skip
    assert step.action is CiAction.REPORT and "not from the repository's CI" in step.reason

    ours = [
        check("test", CheckState.FAILED),  # GitHub Actions' check run
        check("job", CheckState.FAILED, kind=CheckKind.JOB, reporter=""),  # a GitLab job
    ]
    for own in ours:
        mixed = decide([own, *others])
        assert mixed.verdict is CiVerdict.FAILED and mixed.failed == (own,)
        assert len(mixed.untrusted) == len(others)
    pipeline = check("pipe", CheckState.FAILED, kind=CheckKind.PIPELINE, reporter="")
    assert decide([pipeline]).failed == (pipeline,)  # a GitLab pipeline with no jobs yet


def test_the_apps_the_settings_name_are_trusted() -> None:
    trusting = CiSettings(trusted_apps=("Some-App",))
    lint = check("lint", CheckState.FAILED, reporter="some-app[bot]")
    person = check("lint2", CheckState.FAILED, kind=CheckKind.STATUS, reporter="some-app")
    decision = decide_ci([lint, person], head_sha=SHA, last_change_at=0.0, now=1000.0,
                         settings=trusting, bot_names=BOT)  # fmt: skip
    assert decision.failed == (lint,) and decision.untrusted == (person,)
    with pytest.raises(ValueError, match="pattern"):
        CiSettings(trusted_apps=("evil[bot]",))
