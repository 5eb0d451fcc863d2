"""``bot eval run`` and ``bot eval compare`` through the real command: the suite's real
repositories, the bot's own worker on the local forge, the real sandbox, the scripted model
(one script per task, from ``tests/eval/suite.py``), and the real scoring."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bot.cli import main
from tests.eval.projects import EXPOSE
from tests.eval.suite import build

pytestmark = [
    pytest.mark.sandbox,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap missing"),
]

ROOT = Path(__file__).resolve().parents[2]


def config(base: Path, scripts: Path) -> Path:
    path = base / "config.yaml"
    settings = {
        "storage": {"data_dir": str(base / "data")},
        "llm": {"provider": "scripted", "script_path": str(scripts)},
        "sandbox": {"expose_paths": EXPOSE, "timeout": 120},
    }
    path.write_text(json.dumps(settings))
    return path


def scripts(suite: Path, out: Path, kinds: dict[str, str]) -> Path:
    """A folder of scripts: ``kinds`` maps a project to its script kind."""
    out.mkdir(parents=True)
    for project, kind in kinds.items():
        name = f"suite__{project}-1.json"
        shutil.copyfile(suite / "scripts" / kind / name, out / name)
    return out


def some_tasks(suite: Path, out: Path, projects: list[str], extra: list[str] | None = None) -> Path:
    """A tasks file of some of the suite's projects (their repositories where they are)."""
    chosen = []
    for line in (suite / "tasks.jsonl").read_text().splitlines():
        task = json.loads(line)
        if task["instance_id"].split("__")[1][:-2] in projects:
            chosen.append(json.dumps({**task, "repo_path": str(suite / task["repo_path"])}))
    out.write_text("\n".join(chosen + (extra or [])) + "\n")
    return out


def results(run: Path) -> dict[str, dict[str, object]]:
    lines = (run / "results.jsonl").read_text().splitlines()
    return {r["instance_id"]: r for r in map(json.loads, lines)}


def bot_eval(base: Path, scripts_dir: Path, *args: str) -> int:
    return main(["--config", str(config(base, scripts_dir)), "eval", *args])


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("suite")
    build(out)
    return out


@pytest.fixture(scope="module")
def fixed_run(suite: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The whole suite with a model that writes the reference fix, four tasks at a time."""
    base = tmp_path_factory.mktemp("fixed")
    run = base / "run"
    code = bot_eval(base, suite / "scripts" / "fix", "run", str(suite / "tasks.jsonl"),
                    "--out", str(run), "--workers", "4")  # fmt: skip
    assert code == 0
    return run


def test_a_model_that_writes_the_reference_fix_resolves_every_task(
    suite: Path, fixed_run: Path
) -> None:
    found = results(fixed_run)
    assert len(found) == 8
    assert all(r["resolved"] and r["outcome"] == "done" for r in found.values()), found
    summary = json.loads((fixed_run / "summary.json").read_text())
    assert summary["resolved"] == 8 and summary["resolved_rate"] == 1.0
    assert 0.6 < summary["interval_95"][0] < 0.7 and summary["interval_95"][1] == 1.0  # Wilson
    assert summary["median"]["tokens"] > 0 and summary["model_calls"] == 16
    assert set(summary["phases"]) == {"planning", "completion"}
    # the predictions are SWE-bench's, and each is the reference fix
    tasks = {
        t["instance_id"]: t
        for t in map(json.loads, (suite / "tasks.jsonl").read_text().splitlines())
    }
    predictions = [
        json.loads(line) for line in (fixed_run / "predictions.jsonl").read_text().splitlines()
    ]
    assert len(predictions) == 8
    for prediction in predictions:
        assert set(prediction) == {"instance_id", "model_name_or_path", "model_patch"}
        assert prediction["model_name_or_path"] == "scripted"
        assert _changes(prediction["model_patch"]) == _changes(
            tasks[prediction["instance_id"]]["patch"]
        )
    report = (fixed_run / "report.md").read_text()
    assert "**Resolved: 8 of 8 (100.0%; 95% interval 67.6% to 100.0%, Wilson)**" in report
    assert "| planning | 8 |" in report
    calc = fixed_run / "tasks" / "suite__calc-1"
    assert "Quality gate:** ✅ passed" in (calc / "comments.md").read_text()  # the status comment
    assert (calc / "trajectory.jsonl").read_text().count('"type"') > 3
    assert (calc / "report.md").is_file()


def _changes(patch: str) -> list[str]:
    return [
        line for line in patch.splitlines() if line[:1] in "+-" and line[:3] not in ("+++", "---")
    ]


def test_a_model_that_changes_nothing_resolves_none_and_a_malformed_task_is_refused(
    suite: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # the run folder is given relative to it
    broken = json.dumps({"instance_id": "bad-1", "repo": "x/y", "base_commit": "abc1234"})
    tasks = some_tasks(suite, tmp_path / "tasks.jsonl", ["calc", "words"], [broken])
    scripted = scripts(suite, tmp_path / "scripts", {"calc": "nothing", "words": "nothing"})
    assert bot_eval(tmp_path, scripted, "run", str(tasks), "--out", "run") == 0
    found = results(tmp_path / "run")
    assert sorted(found) == ["suite__calc-1", "suite__words-1"]
    for result in found.values():
        assert not result["resolved"] and result["model_patch"] == ""
        assert str(result["reason"]).startswith("FAIL_TO_PASS not passing")
        assert set(result["fail_to_pass"].values()) == {"failed"}  # type: ignore[union-attr]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["resolved_rate"] == 0.0 and summary["refused"] == 1
    assert "task bad-1: problem_statement: missing or empty" in capsys.readouterr().err
    assert "bad-1" in (tmp_path / "run" / "refused.jsonl").read_text()


def test_a_fix_that_breaks_another_test_or_edits_the_tests_is_unresolved_with_the_reason(
    suite: Path, tmp_path: Path
) -> None:
    tasks = some_tasks(suite, tmp_path / "tasks.jsonl", ["stats", "bounds", "money"])
    lines = [json.loads(line) for line in tasks.read_text().splitlines()]
    for task in lines:  # money's test patch was made for another version of its tests
        if task["instance_id"] == "suite__money-1":
            task["test_patch"] = task["test_patch"].replace(" def test_show", " def test_shown")
    tasks.write_text("".join(json.dumps(task) + "\n" for task in lines))
    kinds = {"stats": "break", "bounds": "tests", "money": "fix"}
    scripted = scripts(suite, tmp_path / "scripts", kinds)
    run = tmp_path / "run"
    assert bot_eval(tmp_path, scripted, "run", str(tasks), "--out", str(run), "--workers", "2") == 0
    found = results(run)
    stale = found["suite__money-1"]
    assert not stale["resolved"] and stale["outcome"] == "done"
    assert str(stale["reason"]).startswith(
        "the test patch was refused: it does not apply over the model patch: "
        "error: patch failed: tests/test_money.py:"
    )
    broke = found["suite__stats-1"]
    assert not broke["resolved"]
    assert broke["fail_to_pass"] == {"tests/test_stats.py::test_mean": "passed"}
    assert broke["pass_to_pass"] == {"tests/test_stats.py::test_total": "failed"}
    assert broke["reason"] == "PASS_TO_PASS not passing: tests/test_stats.py::test_total (failed)"
    edited = found["suite__bounds-1"]
    assert not edited["resolved"]
    assert edited["reason"] == (
        "the model patch was refused: it changes files the test patch changes: tests/test_bounds.py"
    )
    assert "suite__bounds-1 | no |" in (run / "report.md").read_text()


def test_a_run_budget_stops_the_run_cleanly_and_resume_finishes_it(
    suite: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tasks = some_tasks(suite, tmp_path / "tasks.jsonl", ["money", "dates"])
    scripted = scripts(suite, tmp_path / "scripts", {"money": "fix", "dates": "fix"})
    run = tmp_path / "run"
    assert bot_eval(tmp_path, scripted, "run", str(tasks), "--out", str(run),
                    "--max-run-tokens", "1000") == 0  # fmt: skip
    summary = json.loads((run / "summary.json").read_text())
    assert summary["finished"] == 1 and summary["not_run"] == ["suite__dates-1"]
    assert "--max-run-tokens" in summary["stopped"]
    first = (run / "results.jsonl").read_text()
    # the same folder again without --resume is refused; with it, only what is left runs
    assert bot_eval(tmp_path, scripted, "run", str(tasks), "--out", str(run)) == 2
    assert bot_eval(tmp_path, scripted, "run", str(tasks), "--out", str(run), "--resume") == 0
    assert (run / "results.jsonl").read_text().startswith(first)  # never recomputed
    assert sorted(results(run)) == ["suite__dates-1", "suite__money-1"]
    assert len((run / "predictions.jsonl").read_text().splitlines()) == 2
    capsys.readouterr()
    assert bot_eval(tmp_path, scripted, "status", str(run)) == 0
    assert "done 2 of 2, started 0, queued 0; resolved 2;" in capsys.readouterr().out
    # a task's own budget stops that task as any task stops at its budget
    small = tmp_path / "small"
    assert bot_eval(tmp_path, scripted, "run", str(tasks), "--out", str(small),
                    "--max-tokens", "1000", "--max-run-cost", "5") == 0  # fmt: skip
    for result in results(small).values():
        assert result["outcome"] == "help needed" and not result["resolved"]
        assert "llm.max_tokens_per_task (1000)" in str(result["agent_reason"])


def test_an_interrupted_run_resumed_gives_the_same_results(
    suite: Path, fixed_run: Path, tmp_path: Path
) -> None:
    tasks = some_tasks(suite, tmp_path / "tasks.jsonl", ["calc", "textutil", "listutil"])
    scripted = scripts(suite, tmp_path / "scripts",
                       {"calc": "fix", "textutil": "fix", "listutil": "fix"})  # fmt: skip
    cfg = config(tmp_path, scripted)
    run = tmp_path / "run"
    command = [sys.executable, "-m", "bot", "--config", str(cfg), "eval", "run", str(tasks),
               "--out", str(run)]  # fmt: skip
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not _lines(run / "results.jsonl") and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        os.killpg(process.pid, signal.SIGKILL)  # the whole run, as a power cut would
        process.wait()
    kept = (run / "results.jsonl").read_text()
    assert 1 <= len(kept.splitlines()) < 3
    assert bot_eval(tmp_path, scripted, "run", str(tasks), "--out", str(run), "--resume") == 0
    assert (run / "results.jsonl").read_text().startswith(kept)
    resumed = results(run)
    whole = results(fixed_run)
    assert sorted(resumed) == ["suite__calc-1", "suite__listutil-1", "suite__textutil-1"]
    for name, result in resumed.items():
        assert result["resolved"] == whole[name]["resolved"] is True
        assert result["model_patch"] == whole[name]["model_patch"]
    predictions = [
        json.loads(line)["instance_id"]
        for line in (run / "predictions.jsonl").read_text().splitlines()
    ]
    assert sorted(predictions) == sorted(resumed)  # each once


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.is_file() else 0


def test_compare_reports_the_paired_difference(
    suite: Path, fixed_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tasks = some_tasks(suite, tmp_path / "tasks.jsonl", ["calc", "words"])
    scripted = scripts(suite, tmp_path / "scripts", {"calc": "fix", "words": "nothing"})
    other = tmp_path / "run"
    assert (
        bot_eval(tmp_path, scripted, "run", str(tasks), "--out", str(other), "--workers", "2") == 0
    )
    capsys.readouterr()
    assert bot_eval(tmp_path, scripted, "compare", str(fixed_run), str(other)) == 0
    shown = capsys.readouterr().out
    assert "Tasks in both runs: 2 (6 in one run only, left out)" in shown
    assert "**Resolved rate, B minus A: -50.0%" in shown
    assert "resolved in A only: 1, in B only: 0" in shown
    assert "| suite__words-1 | resolved | - |" in shown
    assert "| suite__calc-1 | resolved | resolved |" in shown
    assert bot_eval(tmp_path, scripted, "compare", str(fixed_run), str(tmp_path)) == 2


def test_questions_get_no_answer_and_approvals_follow_the_flag(suite: Path, tmp_path: Path) -> None:
    from tests.agent.conftest import script

    [unclear] = script("unclear_goal")[:1]
    scripted = scripts(suite, tmp_path / "scripts", {"calc": "fix", "words": "fix"})
    words = scripted / "suite__words-1.json"
    words.write_text(json.dumps([unclear, *json.loads(words.read_text())]))
    tasks = some_tasks(suite, tmp_path / "tasks.jsonl", ["calc", "words"])
    cfg = config(tmp_path, scripted)
    settings = json.loads(cfg.read_text())
    planning = {"security": {"require_approval": ["write_file"]}}
    cfg.write_text(json.dumps({**settings, "planning": planning}))
    approved, refused = tmp_path / "approved", tmp_path / "refused"
    args = ["--config", str(cfg), "eval", "run", str(tasks), "--workers", "2"]
    assert main([*args, "--out", str(approved)]) == 0
    found = results(approved)
    assert all(r["resolved"] and r["outcome"] == "done" for r in found.values()), found
    assert found["suite__calc-1"]["waits_answered"] == 1  # the write's approval
    assert found["suite__words-1"]["waits_answered"] == 2  # the questions, then the write
    comments = (approved / "tasks" / "suite__words-1" / "comments.md").read_text()
    assert "I need a few answers before I start" in comments
    history = (approved / "tasks" / "suite__words-1" / "trajectory.jsonl").read_text()
    assert "no answer: decide" in history
    assert main([*args, "--out", str(refused), "--approve", "none"]) == 0
    for result in results(refused).values():
        assert not result["resolved"] and result["model_patch"] == ""
        assert result["waits_answered"] >= 1 and result["outcome"] != "done"
