"""The report's figures from results. Pure."""

from __future__ import annotations

from bot.eval.report import render, summarize
from bot.eval.results import TaskResult


def test_the_summary_and_report_hold_every_figure() -> None:
    phases = {"planning": {"prompt": 1500, "completion": 700, "calls": 1},
              "reflection": {"prompt": 300, "completion": 100, "calls": 1}}  # fmt: skip
    results = [
        TaskResult("a", True, "", "done", prompt_tokens=2000, completion_tokens=800,
                   tokens_by_phase=phases, cost=0.02, model_calls=2, agent_seconds=30.0,
                   test_seconds=5.0, harness_seconds=0.3),
        TaskResult("b", False, "FAIL_TO_PASS not passing: t::x (failed)", "help needed",
                   prompt_tokens=9000, completion_tokens=3000, cost=0.10, model_calls=5,
                   agent_seconds=90.0, statement="commit"),
        TaskResult("c", False, "boom", "error", harness_seconds=0.1),
    ]  # fmt: skip
    summary = summarize(results, model="m", tasks=4, refused=1, not_run=["d"], stopped="cost")
    assert summary["resolved"] == 1 and summary["finished"] == 3
    assert summary["outcomes"] == {"done": 1, "error": 1, "help needed": 1}
    assert summary["by_statement"] == {"commit": {"tasks": 1, "resolved": 0},
                                       "issue": {"tasks": 2, "resolved": 1}}  # fmt: skip
    assert summary["median"]["tokens"] == 2800 and summary["slowest"][0] == "b"
    assert summary["most_expensive"] == ["b", "a", "c"]
    assert summary["phases"]["planning"]["median_per_call"] == 2200
    report = render(summary, results)
    assert "**Resolved: 1 of 3 (33.3%; 95% interval 6.1% to 79.2%, Wilson)**" in report
    assert "not run: 1 (cost)" in report
    assert "| planning | 1 | 2,200 | 2,200 | 2,000 (OVER) |" in report
    assert "| reflection | 1 | 400 | 400 | 500 (within) |" in report
    assert "from a commit message: 0 of 1 resolved" in report
    assert "| b | no | help needed | 12,000 | $0.1000 | 90.0 s | FAIL_TO_PASS not passing" in report


def test_the_report_names_each_kind_of_problem_statement() -> None:
    results = [TaskResult("a", True, "", "done", statement="change_request"),
               TaskResult("b", False, "x", "done", statement="change_request"),
               TaskResult("c", True, "", "done")]  # fmt: skip
    summary = summarize(results, model="m", tasks=3, refused=0, not_run=[], stopped="")
    assert summary["by_statement"] == {"change_request": {"tasks": 2, "resolved": 1},
                                       "issue": {"tasks": 1, "resolved": 1}}  # fmt: skip
    report = render(summary, results)
    assert ("Problem statements: from a merged change request: 1 of 2 resolved; "
            "from an issue: 1 of 1 resolved") in report  # fmt: skip
