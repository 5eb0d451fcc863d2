"""Set-up before work, as the loop sees it: prepare the workspace before the first batch
of actions of a run, record what happened, and end the task when set-up fails.

``Preparation.ensure`` asks the task's ``Preparer`` (bot/tools/setup.py) once per run;
what it did (the commands, their exit codes and times, or the cache it restored) goes
into ``AgentState.setup`` (so the checkpoint, the status and the report show it) and
the planning history (a server without a sandbox skips set-up: no command could use
it). A failing set-up asks a person, with the failing command and the
tail of its output in the issue, and without asking the model: there is nothing for it
to judge. A workspace an earlier run prepared is not set up again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from typing import Any, Protocol

from bot.agent.context import Outcome
from bot.agent.exits import Exit
from bot.agent.ports import Recorder
from bot.agent.runlog import RunLog
from bot.agent.state import AgentState
from bot.tools.factory import BuiltTools
from bot.tools.setup import SetupResult, SetupStatus


class Intervene(Protocol):
    def __call__(
        self,
        reason: str,
        *,
        ask_model: bool = True,
        hints: Sequence[str] = (),
        details: dict[str, Any] | None = None,
    ) -> Awaitable[Outcome]: ...


class Preparation:
    def __init__(
        self,
        state: AgentState,
        recorder: Recorder,
        built: BuiltTools | None,
        runlog: RunLog,
        intervene: Intervene,
    ) -> None:
        self.state = state
        self.recorder = recorder
        self.built = built
        self.runlog = runlog
        self.intervene = intervene
        self._ready = False

    async def ensure(self) -> None:
        """Prepare the workspace once per run; raises ``Exit`` when set-up failed."""
        preparer = self.built.preparer if self.built is not None else None
        if self._ready or preparer is None:
            return
        directory = self.runlog.directory
        result = await preparer.prepare(log_dir=directory.path / "setup" if directory else None)
        if result.status is SetupStatus.UNAVAILABLE:
            return  # no clone yet: the next batch tries again
        self._ready = True
        if result.status is SetupStatus.READY:
            return  # recorded by the run that prepared it
        self.state.setup = result.to_dict()
        self.recorder.record("setup", **result.to_dict())
        await self.recorder.checkpoint()
        if result.status is SetupStatus.FAILED:
            raise Exit(await self._failed(result))

    async def _failed(self, result: SetupResult) -> Outcome:
        step = result.failure
        assert step is not None
        how = "timed out" if step.timed_out else f"exit code {step.exit_code}"
        self.runlog.error("setup", f"{step.command}: {how}\n{step.tail}")
        reason = f"the set-up command `{step.command}` failed ({how}, {step.duration:.0f} s)"
        hints = [
            "Check that the project installs in a fresh clone, or name the set-up commands in "
            "`.agent.yaml` (`setup:`; `setup: []` turns set-up off)",
        ]
        failed = {"command": step.command, "exit_code": step.exit_code,
                  "timed_out": step.timed_out, "tail": step.tail}  # fmt: skip
        details = {"setup": failed}
        return await self.intervene(reason, ask_model=False, hints=hints, details=details)
