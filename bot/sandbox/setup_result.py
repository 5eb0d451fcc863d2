"""What set-up did, as the record keeps it: its status, each command it ran (where, with
network or not, its exit code, time and output tail), the paths it left in the workspace,
and for the issue, when it failed, why and what to do (``hints``)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from bot.sandbox.setup_plan import SetupSource


class SetupStatus(StrEnum):
    NOTHING = "nothing"  # nothing to set up
    RAN = "ran"  # the commands ran and succeeded
    RESTORED = "restored"  # the cached environment was copied in: no install ran
    READY = "ready"  # an earlier run of this task prepared this workspace
    FAILED = "failed"
    UNAVAILABLE = "unavailable"  # no clone yet (the forge refused it): tried again later
    SKIPPED = "skipped"  # no sandbox on this server: no command could use what set-up makes


@dataclass(frozen=True, slots=True)
class SetupStep:
    command: str
    exit_code: int
    timed_out: bool
    duration: float
    tail: str = ""
    log: str = ""  # the file in the run directory with the whole output
    network: bool = False  # it ran with network (through the egress proxy)
    base: bool = False  # it ran in the checkout of the base branch, not the workspace

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    def to_dict(self) -> dict[str, Any]:
        return {
            "command": self.command,
            "exit_code": self.exit_code,
            "timed_out": self.timed_out,
            "duration": round(self.duration, 2),
            "tail": self.tail,
            "log": self.log,
            "network": self.network,
            "base": self.base,
        }


@dataclass(frozen=True, slots=True)
class SetupResult:
    status: SetupStatus
    source: SetupSource = SetupSource.NONE
    key: str = ""
    steps: tuple[SetupStep, ...] = ()
    duration: float = 0.0
    paths: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    error: str = ""
    base_commit: str = ""  # set up in a checkout of this commit of the base branch
    base_key: str = ""  # what that checkout's environment is cached under
    hints: tuple[str, ...] = ()  # for the issue, when set-up failed: why, and what to do

    @property
    def failure(self) -> SetupStep | None:
        return next((step for step in self.steps if not step.ok), None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status.value,
            "source": self.source.value,
            "key": self.key,
            "steps": [step.to_dict() for step in self.steps],
            "duration": round(self.duration, 2),
            "paths": list(self.paths),
            "notes": list(self.notes),
            "error": self.error,
            "base_commit": self.base_commit,
            "base_key": self.base_key,
            "hints": list(self.hints),
        }
