"""The run directory: task.json, conversation.jsonl, quality.json, errors.log, artifacts/,
report.md, written to a real directory."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from bot.storage.run_report import render_report
from bot.storage.runs import RunDirectory


@pytest.fixture
def run(tmp_path: Path) -> RunDirectory:
    return RunDirectory(tmp_path / "data", "task-0001")


def test_the_directory_and_artifacts_folder_are_created(run: RunDirectory, tmp_path: Path) -> None:
    assert run.path == tmp_path / "data" / "runs" / "task-0001"
    assert (run.path / "artifacts").is_dir()
    again = RunDirectory(tmp_path / "data", "task-0001")  # reopening is fine
    assert again.path == run.path


@pytest.mark.parametrize("task_id", ["", "../x", "a/b", "..", ".hidden", "x" * 129, "a b"])
def test_unsafe_task_ids_are_refused(tmp_path: Path, task_id: str) -> None:
    with pytest.raises(ValueError, match="cannot name a run directory"):
        RunDirectory(tmp_path, task_id)
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_task_json_merges_and_keeps_each_state(run: RunDirectory) -> None:
    run.update_task({"id": "t", "model": {"model": "m"}}, state="running")
    run.update_task({}, state="running")  # the same state again: nothing new to say
    run.update_task({"title": "Fix"}, state="awaiting_approval", reason="waiting for approval")
    (run.path / "task.json").write_text("{not json")  # a broken file is started afresh
    assert run.read_task() == {}
    run.update_task({"id": "t"}, state="done")
    run.update_task({"tokens": "10"})  # the report's facts, no state change
    task = run.read_task()
    assert task["state"] == "done" and task["tokens"] == "10" and task["updated_at"]
    assert [s["state"] for s in task["states"]] == ["done"]


def test_task_json_states_follow_the_task(run: RunDirectory) -> None:
    run.update_task({"id": "t"}, state="running")
    run.update_task({}, state="running")
    run.update_task({}, state="awaiting_approval", reason="waiting for approval of the plan")
    run.update_task({}, state="running")
    states = run.read_task()["states"]
    assert [s["state"] for s in states] == ["running", "awaiting_approval", "running"]
    assert states[1]["reason"] == "waiting for approval of the plan" and "at" in states[1]


def test_task_and_quality_are_json_replaced_atomically(run: RunDirectory) -> None:
    run.write_task({"id": "task-0001", "title": "Fix the typo", "path": Path("/x")})
    run.write_task({"id": "task-0001", "title": "READMEの誤字を直す"})
    task = json.loads((run.path / "task.json").read_text(encoding="utf-8"))
    assert task == {"id": "task-0001", "title": "READMEの誤字を直す"}
    assert "READMEの誤字" in (run.path / "task.json").read_text(encoding="utf-8")
    run.write_quality({"passed": False, "lint": {"status": "failed"}})
    assert json.loads((run.path / "quality.json").read_text())["lint"] == {"status": "failed"}
    leftovers = [p.name for p in run.path.iterdir() if p.name.startswith(".")]
    assert leftovers == []


def test_conversation_is_appended_one_json_object_a_line(run: RunDirectory) -> None:
    run.append_conversation({"role": "user", "content": "こんにちは\nline two"})
    run.append_conversation({"role": "tool", "name": "read_file", "ok": True})
    lines = (run.path / "conversation.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in lines] == [
        {"role": "user", "content": "こんにちは\nline two"},
        {"role": "tool", "name": "read_file", "ok": True},
    ]


def test_errors_are_timestamped_and_appended(run: RunDirectory) -> None:
    run.log_error("git push failed")
    run.log_error("traceback:\n  line 1\n  line 2")
    text = (run.path / "errors.log").read_text()
    stamp = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00"
    assert re.fullmatch(
        rf"{stamp} git push failed\n{stamp} traceback:\n      line 1\n      line 2\n", text
    )


def test_artifacts_keep_relative_paths_and_never_leave_the_workspace(
    run: RunDirectory, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    (ws / "src" / "deep").mkdir(parents=True)
    (ws / "src" / "deep" / "mod.py").write_text("x = 1\n")
    (ws / "README.md").write_text("# hi\n")
    (tmp_path / "secret.txt").write_text("secret")
    os.symlink(tmp_path / "secret.txt", ws / "leak.txt")
    (ws / ".git").mkdir()
    (ws / ".git" / "config").write_text("[core]")
    run.copy_artifacts(ws, ["src/deep/mod.py", "README.md", "deleted.py", "leak.txt",
                            "../secret.txt", ".git/config"])  # fmt: skip
    assert run.artifact_names() == ["README.md", "src/deep/mod.py"]
    assert (run.path / "artifacts" / "src" / "deep" / "mod.py").read_text() == "x = 1\n"
    errors = (run.path / "errors.log").read_text()
    assert "leak.txt: a symbolic link on this path points outside" in errors
    assert "../secret.txt: the path leaves the workspace" in errors
    assert ".git/config: the .git directory is off limits" in errors
    assert "deleted.py" not in errors  # a deleted file is simply not copied


def test_the_report_has_every_section(run: RunDirectory, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "docs").mkdir(parents=True)
    (ws / "docs" / "my guide.md").write_text("guide\n")
    run.copy_artifacts(ws, ["docs/my guide.md"])
    quality = {
        "passed": False,
        "lint": {"command": ["ruff", "check", "."], "status": "passed", "counts": {}},
        "test": {"command": ["pytest", "-q"], "status": "failed",
                 "counts": {"failed": 1, "passed": 4}},
        "feedback": "Tests failed: `pytest -q` failed (exit code 1).\n```\nFAILED t.py::x\n```",
    }  # fmt: skip
    path = run.write_report(
        task={"id": "task-0001", "title": "Fix the guide", "issue": "acme/demo#7",
              "description": "The guide has a typo."},
        changes=["docs/my guide.md", "src/app.py"],
        diff_stat=" docs/my guide.md | 2 +-\n 1 file changed",
        quality=quality,
        conversation_summary="Read the guide, fixed the typo, ran the tests.",
        outcome="done",
    )  # fmt: skip
    assert path == run.path / "report.md"
    text = path.read_text(encoding="utf-8")
    assert text.startswith("# Run report: Fix the guide\n\n**Outcome:** done\n")
    assert "- **issue**: acme/demo#7" in text and "The guide has a typo." in text
    assert "- `docs/my guide.md`\n- `src/app.py`" in text
    assert "```\n docs/my guide.md | 2 +-\n 1 file changed\n```" in text
    assert "Result: **failed**" in text
    assert "| test | failed | `pytest -q` | failed: 1, passed: 4 |" in text
    assert "````\nTests failed" in text  # the feedback's own fence does not break the report
    assert "## Conversation summary\n\nRead the guide, fixed the typo, ran the tests." in text
    assert "- [`docs/my guide.md`](artifacts/docs/my%20guide.md)" in text


def test_a_report_without_changes_or_quality_gate() -> None:
    text = render_report(task={}, changes=[], diff_stat="", quality=None,
                         conversation_summary="", outcome="needs_human", artifacts=[])  # fmt: skip
    assert "# Run report: task" in text
    assert "No files changed." in text
    assert "The quality gate did not run." in text
    assert "## Conversation summary\n\n(none)" in text
    assert "## Artifacts\n\nNone." in text
