"""CI results of the bot's own change request: one decision per head commit. Pure.

``decide_ci`` reads the checks of the head commit as they are now (a poll, or the
forge's listing after an event woke the worker) and says whether they have settled and
how they ended. It depends on nothing an event carries, only on the current checks,
the time of the last change seen, and the clock: events arriving in any order, twice,
or not at all (the poll) reach the same decision. ``plan_ci_step`` turns the decision
into the one thing to do, at most once per head commit (``ci_mark`` is the key the
store keeps), rounds counted against ``ci.max_fix_rounds``.

Only the repository's own CI starts a round (``from_repo_ci``): GitHub Actions and the
GitHub Apps ``ci.trusted_apps`` names, and GitLab's pipelines of the project itself. A
failing check of anyone else (another app, a commit status a person set, an external
status, another project's pipeline) is reported, never acted on: its name and text would
otherwise reach the agent's prompt from whoever can post a check.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from enum import StrEnum

from bot.config import CiSettings
from bot.events import Check, CheckKind, CheckState

# Aggregates stand for their members; when members are listed, the aggregate adds nothing.
_AGGREGATES = {CheckKind.SUITE, CheckKind.WORKFLOW, CheckKind.PIPELINE}
ACTIONS_APP = "github-actions"  # GitHub Actions' App: the repository's own workflows
# GitLab's jobs and pipelines: the adapter lists only the project's own pipelines as these
# (an external status or another project's pipeline is a STATUS)
_PROJECT_CI = {CheckKind.JOB, CheckKind.PIPELINE}


class CiVerdict(StrEnum):
    UNSETTLED = "unsettled"  # something is queued or running, or changed too recently
    NO_CHECKS = "no_checks"  # settled, and the commit has no checks at all
    PASSED = "passed"
    FAILED = "failed"  # at least one failure the bot should fix
    NEEDS_PERSON = "needs_person"  # waiting for a person (approval, manual job) or cancelled
    PRE_EXISTING = "pre_existing"  # every failure also fails on the base branch's head
    UNTRUSTED = "untrusted"  # the only failures are of checks not from the repository's CI


@dataclass(frozen=True, slots=True)
class CiDecision:
    """How the head commit's checks stand. ``failed``: the failures to fix (not the
    bot's own, not optional, not failing on the base's head as well); ``pre_existing``:
    failures the base shares (reported, not fixed); ``waiting``: checks a person must
    act on (``WAITING``) or that were cancelled; ``untrusted``: failures of checks not
    from the repository's CI (reported, never fixed); ``recheck_at``: when an unsettled
    decision can be taken again if nothing changes (a poll at the latest)."""

    verdict: CiVerdict
    head_sha: str
    checks: tuple[Check, ...] = ()
    failed: tuple[Check, ...] = ()
    pre_existing: tuple[Check, ...] = ()
    waiting: tuple[Check, ...] = ()
    untrusted: tuple[Check, ...] = ()
    recheck_at: float | None = None

    @property
    def settled(self) -> bool:
        return self.verdict is not CiVerdict.UNSETTLED

    @property
    def pending(self) -> tuple[Check, ...]:
        return tuple(check for check in self.checks if not check.state.settled)

    @property
    def passed(self) -> tuple[Check, ...]:
        return tuple(check for check in self.checks if check.state is CheckState.PASSED)


def ci_mark(repo_key: str, number: int, head_sha: str) -> str:
    """The key of the one CI decision for this head commit (the store keeps it as a mark)."""
    return f"ci:{repo_key}#{number}@{head_sha}"


def own_check(check: Check, bot_names: Collection[str]) -> bool:
    """Reported by the bot itself (its App as ``<slug>[bot]``, its user): never a reason
    to act. The whole login, exactly: ``coding-agent`` is a person, not the App."""
    reporter = check.reporter.lower()
    return bool(reporter) and reporter in {name.lower() for name in bot_names}


def from_repo_ci(check: Check, trusted_apps: Collection[str]) -> bool:
    """Reported by the repository's own CI: a GitLab job or pipeline of the project
    itself, or a check run or commit status of GitHub Actions or of an App
    ``trusted_apps`` names. An App reports as ``<slug>[bot]``, a login no person can
    have (brackets are not allowed in one), compared exactly."""
    if check.kind in _PROJECT_CI:
        return True
    trusted = {f"{slug.lower()}[bot]" for slug in (ACTIONS_APP, *trusted_apps)}
    return check.reporter.lower() in trusted


def relevant_checks(checks: Sequence[Check], *, bot_names: Collection[str]) -> tuple[Check, ...]:
    """The checks to decide on: the last report of each (by ``Check.key``), without the
    bot's own, and without aggregates (suites, workflow runs, pipelines) when any single
    run or job is listed (they would repeat the members' outcome)."""
    latest: dict[str, Check] = {}
    for check in checks:
        if not own_check(check, bot_names):
            latest[check.key] = check
    found = tuple(latest.values())
    if any(check.kind not in _AGGREGATES for check in found):
        found = tuple(check for check in found if check.kind not in _AGGREGATES)
    return found


def decide_ci(
    checks: Sequence[Check],
    *,
    head_sha: str,
    last_change_at: float,
    now: float,
    settings: CiSettings,
    bot_names: Collection[str],
    base_checks: Sequence[Check] | None = None,
) -> CiDecision:
    """The decision for ``head_sha`` given its checks now.

    ``last_change_at``: when anything about this commit's checks was last seen to change
    (an event's arrival, a push, or a poll that found other checks than the one before).
    Settled means no check is queued or running and ``settings.settle_seconds`` passed
    since that change. ``base_checks``: the checks of the base branch's head commit, when
    read; a failure that also fails there is pre-existing (or flaky), not the bot's to fix.
    """
    found = relevant_checks(checks, bot_names=bot_names)
    quiet_until = last_change_at + settings.settle_seconds
    if any(not check.state.settled for check in found):
        # events wake the worker as checks end; the poll is the fallback for lost ones
        recheck = max(quiet_until, now + settings.poll_seconds)
        return CiDecision(CiVerdict.UNSETTLED, head_sha, found, recheck_at=recheck)
    if now < quiet_until:
        return CiDecision(CiVerdict.UNSETTLED, head_sha, found, recheck_at=quiet_until)
    failing = [c for c in found if c.state is CheckState.FAILED and not c.optional]
    untrusted = tuple(c for c in failing if not from_repo_ci(c, settings.trusted_apps))
    failing = [c for c in failing if c not in untrusted]
    on_base = _failing_keys(base_checks or (), bot_names)
    failed = tuple(c for c in failing if c.key not in on_base)
    shared = tuple(c for c in failing if c.key in on_base)
    waiting = tuple(c for c in found if c.state in (CheckState.WAITING, CheckState.CANCELLED))
    verdict = _verdict(found, failed, shared, waiting, untrusted)
    return CiDecision(verdict, head_sha, found, failed, shared, waiting, untrusted)


def _failing_keys(checks: Sequence[Check], bot_names: Collection[str]) -> set[str]:
    return {
        check.key
        for check in relevant_checks(checks, bot_names=bot_names)
        if check.state is CheckState.FAILED
    }


def _verdict(
    found: tuple[Check, ...],
    failed: tuple[Check, ...],
    shared: tuple[Check, ...],
    waiting: tuple[Check, ...],
    untrusted: tuple[Check, ...],
) -> CiVerdict:
    if failed:
        return CiVerdict.FAILED
    if waiting:
        return CiVerdict.NEEDS_PERSON
    if shared:
        return CiVerdict.PRE_EXISTING
    if untrusted:
        return CiVerdict.UNTRUSTED
    return CiVerdict.PASSED if found else CiVerdict.NO_CHECKS


def needs_base_checks(decision: CiDecision, *, base_read: bool) -> bool:
    """Whether to read the base head's checks before acting: there are failures to fix,
    and they have not been compared with the base's yet."""
    return decision.verdict is CiVerdict.FAILED and not base_read


# --- what to do -------------------------------------------------------------------------------


class CiAction(StrEnum):
    WAIT = "wait"  # look again at ``recheck_at`` (or on the next event)
    ALREADY_DECIDED = "already_decided"  # this head commit had its decision: nothing
    FIX = "fix"  # start a CI fix round on the same branch
    GIVE_UP = "give_up"  # fix rounds used up: ``coding agent help needed``, checks named
    # say so in the status comment; no round (a person, the base, autofix off, not the CI's)
    REPORT = "report"
    MARK_READY = "mark_ready"  # green and the gate passed: take the draft out of draft
    GREEN = "green"  # green: say so (ready stays a person's call, or already ready)


@dataclass(frozen=True, slots=True)
class CiStep:
    action: CiAction
    decision: CiDecision
    reason: str


def plan_ci_step(
    decision: CiDecision,
    *,
    decided: bool,
    rounds_done: int,
    settings: CiSettings,
    autofix: bool,
    gate_passed: bool,
    ready_when_green: bool,
    draft: bool,
) -> CiStep:
    """The one thing to do with ``decision``. ``decided``: the store holds this head
    commit's ``ci_mark`` already (a second event, a poll after the event). ``rounds_done``:
    CI fix rounds this change request has had. ``autofix``: ``/agent autofix`` is on for it."""
    if not decision.settled:
        return CiStep(CiAction.WAIT, decision, "checks still running or changed recently")
    if decided:
        return CiStep(CiAction.ALREADY_DECIDED, decision, "this head commit was decided")
    verdict = decision.verdict
    if verdict is CiVerdict.FAILED:
        names = ", ".join(check.name for check in decision.failed)
        if not autofix:
            return CiStep(CiAction.REPORT, decision, f"autofix is off; failing: {names}")
        if rounds_done >= settings.max_fix_rounds:
            why = f"{rounds_done} CI fix round(s) used (ci.max_fix_rounds); failing: {names}"
            return CiStep(CiAction.GIVE_UP, decision, why)
        return CiStep(CiAction.FIX, decision, f"failing: {names}")
    if verdict is CiVerdict.NEEDS_PERSON:
        names = ", ".join(f"{c.name} ({c.conclusion})" for c in decision.waiting)
        return CiStep(CiAction.REPORT, decision, f"waiting for a person: {names}")
    if verdict is CiVerdict.PRE_EXISTING:
        names = ", ".join(check.name for check in decision.pre_existing)
        return CiStep(CiAction.REPORT, decision, f"also failing on the base branch: {names}")
    if verdict is CiVerdict.UNTRUSTED:
        names = ", ".join(check.name for check in decision.untrusted)
        why = f"failing, not from the repository's CI (ci.trusted_apps): {names}"
        return CiStep(CiAction.REPORT, decision, why)
    if gate_passed and ready_when_green and draft:
        return CiStep(CiAction.MARK_READY, decision, "the gate and every check passed")
    return CiStep(CiAction.GREEN, decision, "every check passed")


def autofix_switch(args: str) -> bool | None:
    """``/agent autofix on`` / ``off`` (also yes/no, true/false): the new setting; None
    when the argument is neither."""
    word = args.strip().lower()
    if word in ("on", "yes", "true", "1"):
        return True
    if word in ("off", "no", "false", "0"):
        return False
    return None
