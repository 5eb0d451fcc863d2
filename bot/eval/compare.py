"""``bot eval compare RUN_A RUN_B``: the tasks both runs finished, side by side, and B's
resolved rate minus A's with its 95% interval (paired). Pure apart from ``compare_runs``."""

from __future__ import annotations

from pathlib import Path

from bot.eval.results import TaskResult, read_results
from bot.eval.stats import Paired, median, paired_difference


class CompareRefused(Exception):
    pass


def compare_runs(a: Path, b: Path) -> str:
    """The comparison as Markdown; raises ``CompareRefused`` when a run has no result."""
    first, second = read_results(a), read_results(b)
    for path, results in ((a, first), (b, second)):
        if not results:
            raise CompareRefused(f"{path}: no finished task (results.jsonl)")
    return render_comparison(str(a), first, str(b), second)


def render_comparison(name_a: str, a: list[TaskResult], name_b: str, b: list[TaskResult]) -> str:
    by_b = {r.instance_id: r for r in b}
    pairs = [(r, by_b[r.instance_id]) for r in sorted(a, key=lambda r: r.instance_id)
             if r.instance_id in by_b]  # fmt: skip
    paired = paired_difference([x.resolved for x, _ in pairs], [y.resolved for _, y in pairs])
    only = len(a) + len(b) - 2 * len(pairs)
    lines = [
        f"# {name_b} against {name_a}",
        "",
        f"Tasks in both runs: {paired.tasks}"
        + (f" ({only} in one run only, left out)" if only else ""),
        "",
        _headline(paired),
        "",
        "| | A | B |",
        "| --- | ---: | ---: |",
        f"| resolved | {sum(x.resolved for x, _ in pairs)} | {sum(y.resolved for _, y in pairs)} |",
        _median_row(
            "median tokens", [x.tokens for x, _ in pairs], [y.tokens for _, y in pairs], "{:,.0f}"
        ),
        _median_row(
            "median cost", [x.cost for x, _ in pairs], [y.cost for _, y in pairs], "${:.4f}"
        ),
        _median_row(
            "median time", [x.seconds for x, _ in pairs], [y.seconds for _, y in pairs], "{:.1f} s"
        ),
        "",
        "| task | A | B | tokens A | tokens B | cost A | cost B | time A | time B |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
        *(_row(x, y) for x, y in pairs),
        "",
    ]
    return "\n".join(lines)


def _headline(paired: Paired) -> str:
    return (f"**Resolved rate, B minus A: {paired.difference:+.1%} "
            f"(95% interval {paired.low:+.1%} to {paired.high:+.1%}, paired)**; "
            f"resolved in A only: {paired.only_a}, in B only: {paired.only_b}")  # fmt: skip


def _median_row(name: str, a: list[float], b: list[float], form: str) -> str:
    return f"| {name} | {form.format(median(a))} | {form.format(median(b))} |"


def _row(x: TaskResult, y: TaskResult) -> str:
    def mark(r: TaskResult) -> str:
        return "resolved" if r.resolved else "-"

    return (f"| {x.instance_id} | {mark(x)} | {mark(y)} | {x.tokens:,} | {y.tokens:,} "
            f"| ${x.cost:.4f} | ${y.cost:.4f} | {x.seconds:.1f} s "
            f"| {y.seconds:.1f} s |")  # fmt: skip
