"""What the bot keeps of one of its change requests after opening it. Pure data.

The store keeps it as the ``data`` of the change request's watch; the worker reads it,
changes it and saves it back (``bot.storage.base.Watches``), and the status comment
shows it: the head commit's checks as last read, the last decision about them, the
rounds (CI fixes, review rounds, base merges) with what each cost, and whether the bot
took the draft out of draft.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import msgspec

from bot.events import Check, CheckState, RoundKind, TaskState


class CiNote(StrEnum):
    """What the status comment says of the head commit's checks (the last decision)."""

    NONE = ""
    RUNNING = "running"  # some are queued or running
    GREEN = "green"  # every check passed
    READY = "ready"  # ... and the bot took the draft out of draft
    FIX = "fix"  # a CI fix round started
    GIVE_UP = "give_up"  # the fix rounds are used up: a person is needed
    PRE_EXISTING = "pre_existing"  # the failures fail on the base's head too: not fixed
    NEEDS_PERSON = "needs_person"  # an approval, a manual job, a cancelled check
    AUTOFIX_OFF = "autofix_off"  # failing, and ``/agent autofix off`` holds
    CONFLICT = "conflict"  # it conflicts with its base: a base round started
    UNTRUSTED = "untrusted"  # failing only in checks not from the repository's CI


_ENDED = frozenset({TaskState.DONE, TaskState.NEEDS_HUMAN, TaskState.FAILED, TaskState.STOPPED})


@dataclass
class RoundRecord:
    """One follow-up round: what it answered (``head_sha``, ``about``), the task that ran
    it, how it ended and what it cost; ``pushed_sha`` the commit it pushed, if any;
    ``unanswered``: a review round's threads the forge refused its answer in."""

    kind: RoundKind
    number: int
    head_sha: str
    task_id: str = ""
    state: TaskState = TaskState.QUEUED
    about: str = ""
    tokens: int = 0
    cost: float = 0.0
    pushed_sha: str = ""
    unanswered: int = 0

    @property
    def ended(self) -> bool:
        return self.state in _ENDED

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind.value,
            "number": self.number,
            "head_sha": self.head_sha,
            "task_id": self.task_id,
            "state": self.state.value,
            "about": self.about,
            "tokens": self.tokens,
            "cost": self.cost,
            "pushed_sha": self.pushed_sha,
            "unanswered": self.unanswered,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RoundRecord:
        return cls(
            kind=RoundKind(data["kind"]),
            number=int(data.get("number", 1)),
            head_sha=str(data.get("head_sha", "")),
            task_id=str(data.get("task_id", "")),
            state=TaskState(data.get("state", TaskState.QUEUED.value)),
            about=str(data.get("about", "")),
            tokens=int(data.get("tokens", 0)),
            cost=float(data.get("cost", 0.0)),
            pushed_sha=str(data.get("pushed_sha", "")),
            unanswered=int(data.get("unanswered", 0)),
        )


@dataclass
class ChangeRecord:
    """``checks``: the checks of ``checks_sha`` as last read (the status comment shows
    them while they run). ``note``: what the status comment says of them (the decision,
    or that they run), ``names`` the checks it names; ``untrusted`` the failing checks
    not from the repository's CI, reported beside any note, never acted on. ``gate_sha``:
    the last head the bot pushed with its quality gate passed. ``ready``: the bot took
    the draft out of draft."""

    head_sha: str = ""
    checks_sha: str = ""
    checks: list[Check] = field(default_factory=list)
    note: CiNote = CiNote.NONE
    names: list[str] = field(default_factory=list)
    untrusted: list[str] = field(default_factory=list)
    gate_sha: str = ""
    ready: bool = False
    rounds: list[RoundRecord] = field(default_factory=list)

    def rounds_of(self, kind: RoundKind) -> int:
        return sum(1 for r in self.rounds if r.kind is kind)

    def round_of_task(self, task_id: str) -> RoundRecord | None:
        return next((r for r in self.rounds if r.task_id == task_id), None)

    def running(self) -> RoundRecord | None:
        """The round whose task has not ended."""
        return next((r for r in self.rounds if not r.ended), None)

    @property
    def tokens(self) -> int:
        return sum(r.tokens for r in self.rounds)

    @property
    def cost(self) -> float:
        return sum(r.cost for r in self.rounds)

    def show_checks(self, sha: str, checks: list[Check] | tuple[Check, ...]) -> bool:
        """The checks of ``sha`` as read now (a new head forgets the last note); whether
        what the status comment shows of them changed."""
        before = (self.checks_sha, [(c.key, c.state) for c in self.checks])
        if sha != self.checks_sha:
            self.note, self.names, self.untrusted = CiNote.NONE, [], []
        self.checks_sha, self.checks = sha, list(checks)
        return before != (sha, [(c.key, c.state) for c in self.checks])

    def say(self, note: CiNote, names: list[str] | tuple[str, ...] = ()) -> bool:
        """Set what the status comment says; whether it changed."""
        changed = (self.note, self.names) != (note, list(names))
        self.note, self.names = note, list(names)
        return changed

    def tally(self) -> dict[CheckState, int]:
        counts: dict[CheckState, int] = {}
        for check in self.checks:
            counts[check.state] = counts.get(check.state, 0) + 1
        return counts

    def to_dict(self) -> dict[str, Any]:
        return {
            "head_sha": self.head_sha,
            "checks_sha": self.checks_sha,
            "checks": msgspec.to_builtins(self.checks),
            "note": self.note.value,
            "names": list(self.names),
            "untrusted": list(self.untrusted),
            "gate_sha": self.gate_sha,
            "ready": self.ready,
            "rounds": [r.to_dict() for r in self.rounds],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ChangeRecord:
        return cls(
            head_sha=str(data.get("head_sha", "")),
            checks_sha=str(data.get("checks_sha", "")),
            checks=msgspec.convert(data.get("checks") or [], list[Check]),
            note=CiNote(data.get("note", "")),
            names=[str(n) for n in data.get("names") or []],
            untrusted=[str(n) for n in data.get("untrusted") or []],
            gate_sha=str(data.get("gate_sha", "")),
            ready=bool(data.get("ready", False)),
            rounds=[RoundRecord.from_dict(r) for r in data.get("rounds") or []],
        )
