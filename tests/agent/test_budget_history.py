"""Budgets, compact result histories, and the planning history file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.llm.base import Usage
from bot.llm.budget import (
    MIN_ANSWER_TOKENS,
    Budget,
    BudgetExceeded,
    UsageLedger,
)
from bot.record.evidence import compact_results
from bot.record.history import HistoryError, PlanningHistory, format_timeline, history_path
from bot.record.state import ActionRecord, ActionStatus


def words(text: str) -> int:
    return len(text.split())


def test_the_answer_allowance_fits_the_call_and_the_task() -> None:
    budget = Budget(max_tokens_per_task=5000, max_tokens_per_call=2000, total_timeout=60)
    assert budget.answer_allowance("planning", 1200) == 800
    budget.ledger.add("planning", Usage(3000, 700), 1)
    assert budget.remaining == 1300
    assert budget.answer_allowance("execution", 900) == 400


def test_running_out_raises_with_the_setting_to_change() -> None:
    budget = Budget(max_tokens_per_task=1000, max_tokens_per_call=4000, total_timeout=60)
    with pytest.raises(BudgetExceeded) as task_error:
        budget.answer_allowance("planning", 1000 - MIN_ANSWER_TOKENS + 1)
    assert task_error.value.kind == "tokens"
    assert task_error.value.setting == "llm.max_tokens_per_task"

    per_call = Budget(max_tokens_per_task=100_000, max_tokens_per_call=1000, total_timeout=60)
    with pytest.raises(BudgetExceeded, match=r"llm.max_tokens_per_call \(1000\)") as call_error:
        per_call.answer_allowance("reflection", 800)
    assert call_error.value.setting == "llm.max_tokens_per_call"

    with pytest.raises(BudgetExceeded, match="total_timeout") as time_error:
        budget.check_time(61)
    assert time_error.value.kind == "time"
    budget.check_time(60)


def test_the_ledger_counts_per_phase_and_round_trips() -> None:
    ledger = UsageLedger()
    ledger.add("planning", Usage(100, 50), 2)
    ledger.add("execution", Usage(10, 5), 1)
    ledger.add("planning", Usage(1, 1), 1)

    assert ledger.total == 167 and ledger.calls == 4
    assert ledger.by_phase["planning"] == {"prompt": 101, "completion": 51, "calls": 3}
    assert UsageLedger.from_dict(json.loads(json.dumps(ledger.to_dict()))) == ledger
    assert UsageLedger.from_dict(None) == UsageLedger()


def _record(key: str, output: str, **kw: object) -> ActionRecord:
    return ActionRecord(key, key, "read", {"path": f"{key}.md"}, ActionStatus.DONE, output, **kw)  # type: ignore[arg-type]


def lines_of(text: str) -> int:
    return text.count("\n") + 1


def test_compact_results_keeps_the_newest_in_full_and_older_ones_on_one_line() -> None:
    records = [_record(f"t{n}", f"line one of t{n}\nsecond line of t{n}") for n in range(1, 5)]

    text = compact_results(records, budget_tokens=8, count=lines_of)

    assert text.splitlines() == [
        "- [t1] read(path=t1.md) -> done: line one of t1 second line of t1",
        "- [t2] read(path=t2.md) -> done: line one of t2 second line of t2",
        "- [t3] read(path=t3.md) -> done:",
        "line one of t3",
        "second line of t3",
        "- [t4] read(path=t4.md) -> done:",
        "line one of t4",
        "second line of t4",
    ]


def test_compact_results_drops_the_oldest_first_and_says_so() -> None:
    records = [_record(f"t{n}", "output " * 30) for n in range(1, 10)]

    text = compact_results(records, budget_tokens=40, count=words)

    assert text.startswith("- (")
    assert "earlier actions omitted" in text.splitlines()[0]
    assert "[t9]" in text and "[t1]" not in text
    assert compact_results([], budget_tokens=10, count=words) == "(no actions yet)"


def test_a_summary_stands_in_for_a_long_output_on_one_line() -> None:
    record = _record("t1", "x " * 500, summary="the file lists 500 x")
    text = compact_results([record, _record("t2", "y " * 50)], budget_tokens=80, count=words)
    assert "(summary) the file lists 500 x" in text


def test_history_is_append_only_jsonl_with_utc_timestamps(tmp_path: Path) -> None:
    history = PlanningHistory(tmp_path, "task-1", clock=lambda: 1_700_000_000.25)
    history.append("plan", plan={"goal_understanding": {"main_objective": "Fix"}}, cached=True)
    history.append("action", key="t1", tool="read", ok=True, duration=0.5)
    history.append("usage", phase="planning", prompt_tokens=10, completion_tokens=5, calls=1)
    history.append("revision", number=1, reason="wrong path")
    history.append(
        "reflection", action="t1", evaluation={"status": "failure", "plan_revision_needed": True}
    )
    history.append("approval", decision="approved")
    history.append("completion", status="completed")

    path = history_path(tmp_path, "task-1")
    assert path == tmp_path / "planning_history" / "task-1.jsonl"
    lines = path.read_text().splitlines()
    assert len(lines) == 7 and json.loads(lines[0])["timestamp"] == "2023-11-14T22:13:20.250Z"
    timeline = format_timeline(path).splitlines()
    assert timeline[0].endswith("plan (from cache): Fix (0 actions)")
    assert timeline[1].endswith("action t1 read: ok in 0.50 s")
    assert timeline[2].endswith("usage planning: 10 prompt + 5 answer tokens (1 calls)")
    assert timeline[3].endswith("revision 1: wrong path")
    assert timeline[4].endswith("reflection on t1: failure (revision needed)")
    assert timeline[5].endswith("approval: approved")
    assert timeline[6].endswith("completion: completed")
    assert history.entries()[1]["key"] == "t1"


def test_history_refuses_bad_ids_types_and_files(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not a task id"):
        history_path(tmp_path, "../escape")
    with pytest.raises(ValueError, match="unknown history entry type"):
        PlanningHistory(tmp_path, "t").append("gossip")
    with pytest.raises(HistoryError, match="no planning history"):
        format_timeline(tmp_path / "none.jsonl")
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"type": "plan"}\nnot json\n')
    with pytest.raises(HistoryError, match=r"broken\.jsonl:2: not a JSON line"):
        format_timeline(broken)
    odd = tmp_path / "odd.jsonl"
    odd.write_text("[1, 2]\n")
    with pytest.raises(HistoryError, match="not a history entry"):
        format_timeline(odd)


def test_cached_tokens_are_kept_apart_in_the_ledger_and_the_timeline(tmp_path: Path) -> None:
    ledger = UsageLedger()
    ledger.add("execution", Usage(2000, 100, cached_tokens=1500, cache_write_tokens=0), 1)
    ledger.add("execution", Usage(2100, 90, cached_tokens=0, cache_write_tokens=1800), 1)
    assert (ledger.prompt_tokens, ledger.cached_tokens, ledger.cache_write_tokens) == (
        4100,
        1500,
        1800,
    )
    assert ledger.total == 4290  # cached prompt tokens count like the others
    assert ledger.by_phase["execution"]["cached"] == 1500
    assert UsageLedger.from_dict(ledger.to_dict()) == ledger
    assert "cached_tokens" not in UsageLedger().to_dict()  # stored only where a cache was used
    history = PlanningHistory(tmp_path, "task-1")
    history.append("usage", phase="execution", prompt_tokens=2000, cached_tokens=1500,
                   completion_tokens=100, calls=1)  # fmt: skip
    [line] = format_timeline(history_path(tmp_path, "task-1")).splitlines()
    assert line.endswith("usage execution: 2000 prompt (1500 cached) + 100 answer tokens (1 calls)")
