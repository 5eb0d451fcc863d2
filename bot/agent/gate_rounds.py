"""The quality gate's fix rounds (docs/planning.md#delivery).

``GateRounds.run`` runs the gate; after a failing run, up to ``QUALITY_ROUNDS`` fix rounds,
each up to ``FIX_STEPS`` calls of the file tools (several files), ended when the model
names ``READY_TOOL``; the gate runs again after each round. Every run is recorded in the
planning history.
"""

from __future__ import annotations

import time

from bot.agent.plan import PlannedAction
from bot.agent.ports import Recorder, RunAction
from bot.agent.state import ActionRecord
from bot.tools.factory import BuiltTools
from bot.tools.quality import (
    GateResult,
    QualityCommands,
    QualityReport,
    detect_commands,
    run_quality_gate,
)
from bot.tools.registry import Tool, ToolRegistry

QUALITY_ROUNDS = 3  # fix rounds after the first failing run: at most four gate runs
FIX_STEPS = 6  # calls in one fix round
FIX_TOOLS = ("replace_in_file", "write_file", "delete_file", "move_path", "read_file")
READY_TOOL = "run_quality_gate"  # the model names it when the round's fixes are in
GATE_TASK = "quality_gate"  # the task id of the fix calls


def quality_commands(built: BuiltTools) -> QualityCommands:
    """The repository's configured gate (``.agent.yaml``), else the detected commands."""
    return built.quality or detect_commands(built.workspace.path)


class GateRounds:
    def __init__(
        self,
        recorder: Recorder,
        tools: ToolRegistry,
        run_action: RunAction,
        *,
        gate_timeout: float,
    ) -> None:
        self.recorder = recorder
        self.tools = tools
        self.run_action = run_action
        self.gate_timeout = gate_timeout

    async def run(self, built: BuiltTools) -> QualityReport:
        """Run the gate; after a failure, up to ``QUALITY_ROUNDS`` fix rounds, each
        followed by the gate again."""
        commands = quality_commands(built)
        fixers = [t for name in FIX_TOOLS if (t := self.tools.get(name)) is not None]
        report = await self._gate(built, commands, 1)
        for round_number in range(1, QUALITY_ROUNDS + 1):
            if report.result is not GateResult.FAILED or not fixers:
                break
            await self._fix_round(round_number, report.feedback, fixers)
            report = await self._gate(built, commands, round_number + 1)
        return report

    async def _fix_round(self, number: int, feedback: str, fixers: list[Tool]) -> None:
        """Up to ``FIX_STEPS`` calls of the file tools; the model names ``READY_TOOL``
        when its fixes are in (one call per round when that tool is not offered)."""
        ready = self.tools.get(READY_TOOL)
        choices = [*fixers, ready] if ready is not None else fixers
        purpose = (
            f"Fix the quality gate failures below (fix round {number} of {QUALITY_ROUNDS}): "
            "change as many files as needed, one call at a time"
        )
        if ready is not None:
            purpose += f"; call {READY_TOOL} when the fixes are in"
        for step in range(1, FIX_STEPS + 1):
            fix = PlannedAction(
                key=f"quality.{number}.{step}",
                task_id=GATE_TASK,
                tool=fixers[0].name,
                purpose=purpose,
                expected_outcome="lint and tests pass",
            )
            outcome = await self.run_action(
                fix, feedback=feedback, choices=choices, ready_tool=READY_TOOL if ready else ""
            )
            # a call the policy wants approved ends the round (the gate shows what is left)
            done = not isinstance(outcome, ActionRecord) or outcome.tool == READY_TOOL
            if ready is None or done:
                return

    async def _gate(self, built: BuiltTools, commands: QualityCommands, run: int) -> QualityReport:
        started = time.monotonic()
        report = await run_quality_gate(
            built.workspace.path, built.sandbox, commands, timeout=self.gate_timeout
        )
        self.recorder.record(
            "quality",
            run=run,
            passed=report.passed,
            result=report.result.value,
            feedback=report.feedback,
            duration=round(time.monotonic() - started, 3),
        )
        return report
