"""``bot eval status RUN`` (a run folder's progress: done, started, queued, resolved,
tokens, cost) and ``bot eval run --queue``'s refusal, through the real command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.cli import main
from bot.eval.results import RunFolder, TaskResult
from bot.eval.status import NotARun, run_status
from tests.pg import free_port


def _config(base: Path) -> Path:
    path = base / "config.yaml"
    settings = {
        "storage": {"data_dir": str(base / "data")},
        "llm": {"provider": "scripted", "script_path": str(base / "scripts")},
    }
    path.write_text(json.dumps(settings))
    return path


def _run_folder(path: Path, total: int | None) -> Path:
    path.mkdir()
    meta: dict[str, object] = {"tasks": "tasks.jsonl", "model": "scripted"}
    if total is not None:
        meta["total"] = total
    (path / "run.json").write_text(json.dumps(meta))
    folder = RunFolder(path, "scripted")
    folder.record(TaskResult("a-1", True, "", "done", prompt_tokens=1000,
                             completion_tokens=200, cost=0.25))  # fmt: skip
    folder.record(TaskResult("b-1", False, "FAIL_TO_PASS failed", "done", prompt_tokens=500,
                             completion_tokens=50, cost=0.125))  # fmt: skip
    for name in ("a-1", "b-1", "c-1"):  # c-1 started, not finished
        (path / "tasks" / name).mkdir(parents=True)
    return path


def test_status_counts_done_started_and_queued_tasks_with_their_spending(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _run_folder(tmp_path / "run", total=5)
    status = run_status(run)
    assert (status.done, status.started, status.queued) == (2, ("c-1",), 2)
    assert (status.resolved, status.tokens, status.cost) == (1, 1750, 0.375)
    assert main(["--config", str(_config(tmp_path)), "eval", "status", str(run)]) == 0
    out = capsys.readouterr().out
    assert "done 2 of 5, started 1, queued 2; resolved 1; tokens 1,750; cost $0.3750" in out
    assert "started, not finished: c-1" in out


def test_status_of_a_run_folder_without_its_total_says_so(tmp_path: Path) -> None:
    status = run_status(_run_folder(tmp_path / "run", total=None))
    assert status.queued is None and "total unknown" in status.line()


def test_status_of_a_folder_that_is_not_a_run_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(NotARun):
        run_status(tmp_path)
    (tmp_path / "run.json").write_text("[1, 2")
    with pytest.raises(NotARun, match="not JSON"):
        run_status(tmp_path)
    assert main(["--config", str(_config(tmp_path)), "eval", "status", str(tmp_path / "x")]) == 2
    assert "is not a run folder" in capsys.readouterr().err


def test_queue_with_sqlite_storage_is_refused_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    args = ["--config", str(_config(tmp_path)), "eval", "run", str(tmp_path / "tasks.jsonl"),
            "--out", str(out), "--queue"]  # fmt: skip
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "--queue needs PostgreSQL storage (storage.backend: postgres)" in err
    assert "SQLite" in err and not out.exists()


def test_queue_on_a_postgresql_server_that_cannot_be_reached_says_so_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("")
    config = tmp_path / "pg.yaml"
    config.write_text(json.dumps({"storage": {"backend": "postgres",
                                              "data_dir": str(tmp_path / "data")}}))  # fmt: skip
    port = free_port()  # nothing listens there
    monkeypatch.setenv(
        "BOT_POSTGRES_DSN", f"postgresql://bot@127.0.0.1:{port}/bot?connect_timeout=2"
    )
    out = tmp_path / "run"
    args = ["--config", str(config), "eval", "run", str(tasks), "--out", str(out), "--queue"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("bot eval run: ") and f"127.0.0.1:{port}" in err
    assert not out.exists()
