"""summary.json and report.md of a run, from its results. Pure (``summarize``, ``render``)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from bot.eval.results import Statement, TaskResult
from bot.eval.stats import median, wilson

# Seed 004's token budgets (13.4): per call for planning and reflection, per simple task.
PHASE_BUDGETS = {"planning": 2000, "reflection": 500}
TASK_BUDGET = 10_000
LISTED = 5  # the slowest and the most expensive tasks shown
# How report.md names where a kind of problem statement came from.
STATEMENT_SOURCES = {
    Statement.ISSUE: "an issue",
    Statement.CHANGE_REQUEST: "a merged change request",
    Statement.COMMIT: "a commit message",
}


def summarize(
    results: Sequence[TaskResult],
    *,
    model: str,
    tasks: int,
    refused: int = 0,
    not_run: Sequence[str] = (),
    stopped: str = "",
) -> dict[str, Any]:
    """The run's figures; ``tasks``: how many it was given (read ones), ``not_run`` those a
    run budget kept from starting, ``stopped`` why."""
    n = len(results)
    resolved = sum(1 for r in results if r.resolved)
    low, high = wilson(resolved, n)
    outcomes = Counter(r.outcome for r in results)
    return {
        "model": model,
        "tasks": tasks,
        "finished": n,
        "refused": refused,
        "not_run": list(not_run),
        "stopped": stopped,
        "resolved": resolved,
        "resolved_rate": resolved / n if n else 0.0,
        "interval_95": [low, high],
        "outcomes": dict(sorted(outcomes.items())),
        "by_statement": by_statement(results),
        "tokens": sum(r.tokens for r in results),
        "cost": sum(r.cost for r in results),
        "model_calls": sum(r.model_calls for r in results),
        "median": {
            "tokens": median([r.tokens for r in results]),
            "cost": median([r.cost for r in results]),
            "seconds": median([r.seconds for r in results]),
            "setup_seconds": median([r.setup_seconds for r in results]),
            "agent_seconds": median([r.agent_seconds for r in results]),
            "test_seconds": median([r.test_seconds for r in results]),
            "harness_seconds": median([r.harness_seconds for r in results]),
            "model_calls": median([r.model_calls for r in results]),
            "revisions": median([r.revisions for r in results]),
        },
        "phases": phase_figures(results),
        "slowest": [r.instance_id for r in sorted(results, key=lambda r: -r.seconds)[:LISTED]],
        "most_expensive": [
            r.instance_id for r in sorted(results, key=lambda r: (-r.cost, -r.tokens))[:LISTED]
        ],
    }


def by_statement(results: Sequence[TaskResult]) -> dict[str, dict[str, int]]:
    """Tasks and resolved per kind of problem statement: an issue's, or (tasks mined
    without an issue) a merged change request's or a commit message."""
    kinds: dict[str, dict[str, int]] = {}
    for result in results:
        entry = kinds.setdefault(result.statement, {"tasks": 0, "resolved": 0})
        entry["tasks"] += 1
        entry["resolved"] += int(result.resolved)
    return dict(sorted(kinds.items()))


def phase_figures(results: Sequence[TaskResult]) -> dict[str, dict[str, Any]]:
    """Per phase: calls, tokens, and the median tokens per call, against the budget."""
    totals: dict[str, dict[str, int]] = {}
    per_call: dict[str, list[float]] = {}
    for result in results:
        for phase, entry in result.tokens_by_phase.items():
            tokens = int(entry.get("prompt", 0)) + int(entry.get("completion", 0))
            calls = int(entry.get("calls", 0))
            total = totals.setdefault(phase, {"calls": 0, "tokens": 0})
            total["calls"] += calls
            total["tokens"] += tokens
            if calls:
                per_call.setdefault(phase, []).append(tokens / calls)
    figures: dict[str, dict[str, Any]] = {}
    for phase, total in sorted(totals.items()):
        figures[phase] = {**total, "median_per_call": median(per_call.get(phase, [])),
                          "budget_per_call": PHASE_BUDGETS.get(phase)}  # fmt: skip
    return figures


def render(summary: dict[str, Any], results: Sequence[TaskResult]) -> str:
    """report.md."""
    low, high = summary["interval_95"]
    med = summary["median"]
    lines = [
        f"# Evaluation: {summary['model']}",
        "",
        f"**Resolved: {summary['resolved']} of {summary['finished']} "
        f"({summary['resolved_rate']:.1%}; 95% interval {low:.1%} to {high:.1%}, Wilson)**",
        "",
        f"Tasks given: {summary['tasks']}; finished: {summary['finished']}; "
        f"refused as malformed: {summary['refused']}; not run: {len(summary['not_run'])}"
        + (f" ({summary['stopped']})" if summary["stopped"] else ""),
        "",
        "| outcome | tasks |",
        "| --- | ---: |",
        *(f"| {name} | {count} |" for name, count in summary["outcomes"].items()),
        "",
        "Problem statements: "
        + "; ".join(
            f"from {STATEMENT_SOURCES.get(kind, kind)}: "
            f"{entry['resolved']} of {entry['tasks']} resolved"
            for kind, entry in summary["by_statement"].items()
        ),
        "",
        "## Per task (medians)",
        "",
        "| tokens | cost | model calls | revisions | set-up | agent | tests | harness | total |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        f"| {med['tokens']:,.0f} | ${med['cost']:.4f} | {med['model_calls']:.0f} "
        f"| {med['revisions']:.0f} | {med['setup_seconds']:.1f} s | {med['agent_seconds']:.1f} s "
        f"| {med['test_seconds']:.1f} s | {med['harness_seconds']:.2f} s "
        f"| {med['seconds']:.1f} s |",
        "",
        f"Whole run: {summary['tokens']:,} tokens, ${summary['cost']:.4f}, "
        f"{summary['model_calls']} model calls.",
        "",
        "## Tokens per phase against the planning specification's budgets",
        "",
        "| phase | calls | tokens | median per call | budget per call |",
        "| --- | ---: | ---: | ---: | --- |",
        *_phase_rows(summary["phases"]),
        "",
        f"A simple task should stay under {TASK_BUDGET:,} tokens: "
        f"{sum(1 for r in results if r.tokens <= TASK_BUDGET)} of {len(results)} did.",
        "",
        "## Tasks",
        "",
        "| task | resolved | outcome | tokens | cost | time | why not |",
        "| --- | --- | --- | ---: | ---: | ---: | --- |",
        *(_task_row(r) for r in sorted(results, key=lambda r: r.instance_id)),
        "",
        "Slowest: " + ", ".join(summary["slowest"]),
        "",
        "Most expensive: " + ", ".join(summary["most_expensive"]),
        "",
    ]
    return "\n".join(lines)


def _phase_rows(phases: dict[str, dict[str, Any]]) -> list[str]:
    rows = []
    for phase, figures in phases.items():
        budget = figures["budget_per_call"]
        verdict = (
            "-"
            if budget is None
            else (f"{budget:,} ({'within' if figures['median_per_call'] <= budget else 'OVER'})")
        )
        rows.append(f"| {phase} | {figures['calls']} | {figures['tokens']:,} "
                    f"| {figures['median_per_call']:,.0f} | {verdict} |")  # fmt: skip
    return rows or ["| (no model call) | 0 | 0 | 0 | - |"]


def _task_row(result: TaskResult) -> str:
    why = result.reason.replace("|", "\\|").replace("\n", " ")[:160]
    mark = "yes" if result.resolved else "no"
    return (f"| {result.instance_id} | {mark} | {result.outcome} | {result.tokens:,} "
            f"| ${result.cost:.4f} | {result.seconds:.1f} s | {why} |")  # fmt: skip
