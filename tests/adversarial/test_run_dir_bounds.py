"""Attacks on the run directory: a command's log reached 100 MB in 15 s, a task had no
total, and ``runs/`` was never pruned. A task's run directory now holds at most
``storage.run_dir_mb`` (logs and artifacts stop there), and the run directories of
tasks that ended ``storage.runs_retention_days`` ago are deleted."""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from bot.comments.render import agent_comment
from bot.config import SandboxSettings, Settings, StorageSettings
from bot.events import ForgeKind, IssueRef, RepoRef, TaskRequest
from bot.record.runlog import RunLog
from bot.storage.base import TaskState
from bot.storage.runs import RunDirectory
from bot.tools.factory import build_tools
from tests.fakes import FakeForge
from tests.harness import Harness

if TYPE_CHECKING:
    from tests.tools.conftest import Remote

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap missing")
FLOOD = ["sh", "-c", "head -c 30000000 /dev/zero | tr '\\0' x; exit 3"]


def folder_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


@needs_bwrap
async def test_floods_of_output_cannot_fill_the_run_directory(
    tmp_path: Path, remote: Remote
) -> None:
    settings = Settings(
        storage=StorageSettings(data_dir=tmp_path / "data", run_dir_mb=8),
        sandbox=SandboxSettings(max_file_mb=100, max_output_chars=1000, timeout=60),
    )
    forge = FakeForge()
    repo = forge.add_repo("acme/demo", {"README.md": "# Demo\n"}, clone_url=remote.url)
    issue = forge.add_issue(repo, 7, title="Fix the parser")
    run_dir = RunDirectory(settings.data_dir, "task-9").path
    async with contextlib.AsyncExitStack() as stack:
        built = await build_tools(
            settings=settings, forge=forge, issue=issue, task_id="task-9",
            base_branch="main", repo_config=None, stack=stack,
            finish_comment=agent_comment("task", ()), run_dir=run_dir,
        )  # fmt: skip
        outputs = []
        for _ in range(3):
            result = await built.registry.call("run_command", {"argv": FLOOD}, timeout=120)
            outputs.append(result.output)
    logs = sorted((run_dir / "commands").iterdir())
    assert len(logs) == 3  # each kept: the agent saw only the ends of each
    assert folder_bytes(run_dir) <= (8 << 20) + 4096  # 90 MB of output, 8 MB kept
    assert "not kept (storage.run_dir_mb)" in logs[0].read_text()[-200:]
    assert logs[-1].stat().st_size < 200  # nothing left but the note
    assert all("commands/" in text for text in outputs)


async def test_artifacts_stop_at_the_run_directory_bound(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    for i in range(20):
        (root / f"f{i:02d}.bin").write_bytes(os.urandom(1 << 20))
    runlog = RunLog(tmp_path / "data", "task-1", max_bytes=5 << 20)
    await runlog.keep_files(root, [f"f{i:02d}.bin" for i in range(20)])
    directory = runlog.directory
    assert directory is not None
    assert folder_bytes(directory.path) <= 5 << 20
    assert len(directory.artifact_names()) == 4  # 1 MB each, and the record takes room
    errors = (directory.path / "errors.log").read_text()
    assert "[persistence] 16 changed files not copied to artifacts/" in errors


def age(folder: Path, days: float) -> None:
    then = time.time() - days * 86400
    for path in [*folder.rglob("*"), folder]:
        os.utime(path, (then, then), follow_symlinks=False)


async def test_old_run_directories_of_ended_tasks_are_deleted(tmp_path: Path) -> None:
    overrides = {"storage": {"runs_retention_days": 30}}
    async with Harness(tmp_path, overrides=overrides) as bot:
        repo = RepoRef(ForgeKind.GITHUB, "octo/hello", scope_id="1")
        ids = {}
        for name, state in (
            ("old_done", TaskState.DONE),
            ("old_waiting", TaskState.AWAITING_INPUT),
            ("new_done", TaskState.DONE),
            ("old_failed", TaskState.FAILED),
        ):
            task, _ = await bot.store.create_task(
                TaskRequest(issue=IssueRef(repo, len(ids) + 1, title=name), requested_by="alice")
            )
            await bot.store.set_state(task.id, state)
            ids[name] = task.id
        data = bot.settings.data_dir
        for name, task_id in ids.items():
            run = RunDirectory(data, task_id)
            run.write_task({"id": task_id})
            (run.path / "commands").mkdir()
            (run.path / "commands" / "001-x.log").write_text("x")
            age(run.path, 1 if name.startswith("new") else 40)
        stray = RunDirectory(data, "gone-task")  # no task in the store any more
        age(stray.path, 40)
        recent_log = RunDirectory(data, ids["old_failed"]).path / "commands" / "001-x.log"
        os.utime(recent_log)  # a log written today: the run is not old
        await bot.worker.maintain()
        left = sorted(p.name for p in (data / "runs").iterdir())
        assert left == sorted([ids["old_waiting"], ids["new_done"], ids["old_failed"]])


async def test_run_directories_are_kept_when_retention_is_off(tmp_path: Path) -> None:
    async with Harness(tmp_path, overrides={"storage": {"runs_retention_days": 0}}) as bot:
        stray = RunDirectory(bot.settings.data_dir, "gone-task")
        age(stray.path, 4000)
        await bot.worker.maintain()
        assert stray.path.is_dir()
