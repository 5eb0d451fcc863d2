"""A finished task's result: scored from the bot's branch, or the error that ended it
(``bot eval run`` in this process, and a queued task's worker)."""

from __future__ import annotations

from pathlib import Path

from bot.config import Settings
from bot.eval.agent_run import AgentRun, Finish
from bot.eval.origin import bot_patch
from bot.eval.results import Statement, TaskResult
from bot.eval.scoring import Score, score_patch
from bot.eval.tasks import EvalTask


async def scored(
    settings: Settings, task: EvalTask, source: Path, base: str, folder: Path
) -> tuple[str, str, Score]:
    """The bot's branch and patch on the task's ``origin.git``, and their score."""
    branch, patch = await bot_patch(folder / "origin.git", base)
    score = await score_patch(
        repo=source, base_commit=base, model_patch=patch, test_patch=task.test_patch,
        fail_to_pass=task.fail_to_pass, pass_to_pass=task.pass_to_pass,
        test_command=task.test_command, setup=task.setup, settings=settings,
        work_dir=folder / "score",
    )  # fmt: skip
    return branch, patch, score


def failed(task: EvalTask, why: str, took: float) -> TaskResult:
    return TaskResult(task.instance_id, False, why.splitlines()[0][:500] if why else "error",
                      Finish.ERROR.value, harness_seconds=took,
                      statement=statement_of(task))  # fmt: skip


def result_of(
    task: EvalTask, agent: AgentRun, score: Score, patch: str, branch: str, took: float
) -> TaskResult:
    usage = agent.usage
    setup = agent.setup_seconds + score.setup_seconds
    harness = max(0.0, took - agent.setup_seconds - agent.agent_seconds - score.seconds)
    harness += max(0.0, score.seconds - score.setup_seconds - score.test_seconds)
    return TaskResult(
        instance_id=task.instance_id,
        resolved=score.resolved,
        reason=score.reason,
        outcome=agent.finish.value,
        agent_reason=agent.reason,
        model_patch=patch,
        branch=branch,
        prompt_tokens=int(usage.get("prompt_tokens", 0)),
        completion_tokens=int(usage.get("completion_tokens", 0)),
        tokens_by_phase=dict(usage.get("by_phase", {})),
        cost=float(usage.get("cost", 0.0)),
        model_calls=int(usage.get("calls", 0)),
        revisions=agent.revisions,
        waits_answered=agent.answered,
        setup_seconds=setup,
        agent_seconds=agent.agent_seconds,
        test_seconds=score.test_seconds,
        harness_seconds=harness,
        fail_to_pass={k: v.value for k, v in score.fail_to_pass.items()},
        pass_to_pass={k: v.value for k, v in score.pass_to_pass.items()},
        statement=statement_of(task),
    )


def statement_of(task: EvalTask) -> str:
    """Where the task's problem statement came from (``bot eval mine`` marks a commit's)."""
    return str(task.extra.get("statement", Statement.ISSUE.value))
