"""``bot eval run --queue`` through the real command, a real PostgreSQL server and two real
``bot serve --role worker`` processes (each with a data directory of its own, as two
machines have), the suite's real repositories, the real sandbox and scoring, and the
scripted model (one script per task, read by whichever worker takes the task)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest

from bot.cli import main
from tests.agent.conftest import script
from tests.eval.projects import EXPOSE
from tests.eval.suite import build
from tests.eval.test_eval_run import results, scripts, some_tasks

pytestmark = [
    pytest.mark.sandbox,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap missing"),
]

ROOT = Path(__file__).resolve().parents[2]
KINDS = {"calc": "fix", "textutil": "nothing", "stats": "break"}


def config(base: Path, name: str, scripts_dir: Path) -> Path:
    path = base / f"{name}.yaml"
    settings = {
        "storage": {"backend": "postgres", "data_dir": str(base / name)},
        "llm": {"provider": "scripted", "script_path": str(scripts_dir)},
        "sandbox": {"expose_paths": EXPOSE, "timeout": 120},
        "worker": {"max_workers": 1, "poll_interval": 0.2},
        "planning": {"security": {"require_approval": ["write_file"]}},  # a wait per write
    }
    path.write_text(json.dumps(settings))
    return path


def start_worker(cfg: Path, dsn: str, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "BOT_POSTGRES_DSN": dsn, "PYTHONPATH": str(ROOT)}
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "bot", "--config", str(cfg), "serve", "--role", "worker"],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip


def wait_for(path: Path, processes: list[subprocess.Popen[bytes]], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not path.is_file():
        assert time.monotonic() < deadline, f"{path} not written in {seconds:.0f} s"
        assert all(p.poll() is None for p in processes), "a worker stopped"
        time.sleep(0.5)


def test_a_queued_run_is_taken_by_two_workers_and_ends_as_a_run_in_this_process(
    tmp_path: Path,
    pg_test_dsn: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    suite = tmp_path / "suite"
    build(suite)
    tasks = some_tasks(suite, tmp_path / "tasks.jsonl", list(KINDS))
    scripts_dir = scripts(suite, tmp_path / "scripts", KINDS)
    [unclear] = script("unclear_goal")[:1]  # calc first asks what is meant
    calc = scripts_dir / "suite__calc-1.json"
    calc.write_text(json.dumps([unclear, *json.loads(calc.read_text())]))
    run = tmp_path / "run"
    monkeypatch.setenv("BOT_POSTGRES_DSN", pg_test_dsn)
    command = config(tmp_path, "command", scripts_dir)

    # queued: the folder made, every task on the store's queue, nothing run yet
    assert main(["--config", str(command), "eval", "run", str(tasks), "--out", str(run),
                 "--queue", "--max-cost", "5"]) == 0  # fmt: skip
    out = capsys.readouterr()
    assert "queued 3, on the queue already 0" in out.out
    meta = json.loads((run / "run.json").read_text())
    assert meta["queue"] is True and meta["total"] == 3 and meta["budgets"]["task_cost"] == 5.0
    assert main(["--config", str(command), "eval", "status", str(run)]) == 0
    status = capsys.readouterr().out
    assert "done 0 of 3" in status and "on the queue, not recorded yet: queued 3" in status
    with psycopg.connect(pg_test_dsn) as conn:
        [(count,)] = conn.execute("SELECT count(*) FROM tasks WHERE state = 'queued'").fetchall()
    assert count == 3

    # queued again: nothing is queued twice
    assert main(["--config", str(command), "eval", "run", str(tasks), "--out", str(run),
                 "--queue", "--resume"]) == 0  # fmt: skip
    assert "queued 0, on the queue already 3" in capsys.readouterr().out

    # two workers, as on two machines, take them; the last to record writes the summary
    logs = [tmp_path / "worker-a.log", tmp_path / "worker-b.log"]
    workers = [
        start_worker(config(tmp_path, name, scripts_dir), pg_test_dsn, log)
        for name, log in zip(("worker-a", "worker-b"), logs, strict=True)
    ]
    try:
        wait_for(run / "summary.json", workers, 300)
    finally:
        for worker in workers:
            worker.terminate()
        for worker in workers:
            worker.wait(timeout=30)
    texts = [log.read_text() for log in logs]
    assert all("evaluation task suite__" in text for text in texts), texts  # both took tasks
    found = results(run)
    assert set(found) == {f"suite__{name}-1" for name in KINDS}
    assert found["suite__calc-1"]["resolved"] is True
    assert found["suite__calc-1"]["outcome"] == "done"
    # its question and its write's approval were answered by queueing it again; the forge
    # each run built from the folder kept the status comment it edits in place
    assert found["suite__calc-1"]["waits_answered"] == 2
    assert "no answer: decide" in (run / "tasks" / "suite__calc-1" / "trajectory.jsonl").read_text()
    nothing = found["suite__textutil-1"]
    assert nothing["resolved"] is False and nothing["model_patch"] == ""
    assert str(nothing["reason"]).startswith("FAIL_TO_PASS not passing")
    broke = found["suite__stats-1"]  # the bug fixed, another test broken
    assert broke["reason"] == "PASS_TO_PASS not passing: tests/test_stats.py::test_total (failed)"
    assert all(int(r["model_calls"]) > 0 and int(r["prompt_tokens"]) > 0 for r in found.values())
    summary = json.loads((run / "summary.json").read_text())
    assert summary["resolved"] == 1 and summary["finished"] == 3
    assert "**Resolved: 1 of 3" in (run / "report.md").read_text()
    calc = run / "tasks" / "suite__calc-1"
    assert "Quality gate:** ✅ passed" in (calc / "comments.md").read_text()
    assert (calc / "trajectory.jsonl").read_text().count('"type"') > 3
    predictions = (run / "predictions.jsonl").read_text().splitlines()
    assert sorted(json.loads(p)["instance_id"] for p in predictions) == sorted(found)

    # a worker that died while scoring leaves the task ended, unrecorded: --resume scores it
    for name in ("results.jsonl", "predictions.jsonl"):
        kept = [line for line in (run / name).read_text().splitlines()
                if "suite__calc-1" not in line]  # fmt: skip
        (run / name).write_text("\n".join(kept) + "\n")
    (run / "summary.json").unlink()
    assert main(["--config", str(command), "eval", "run", str(tasks), "--out", str(run),
                 "--queue", "--resume"]) == 0  # fmt: skip
    assert "queued 0, on the queue already 0, scored here 1" in capsys.readouterr().out
    assert results(run)["suite__calc-1"]["resolved"] is True
    assert json.loads((run / "summary.json").read_text())["resolved"] == 1  # written again
    predicted = [json.loads(p)["instance_id"] for p in
                 (run / "predictions.jsonl").read_text().splitlines()]  # fmt: skip
    assert sorted(predicted) == sorted(found)  # once each
