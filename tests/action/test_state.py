"""The state kept between workflow runs: packed at the end of one, unpacked at the start of
the next; links are never followed out of the data directory, foreign entries refused."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import pytest

from bot.action import state
from bot.action.state import FolderCarrier, StateError, artifact_name, pack, unpack
from bot.storage.base import TaskState
from bot.storage.sqlite import SqliteStore
from tests.storage.store_support import request_for


async def data_dir_with_a_task(root: Path) -> tuple[Path, str]:
    """A data directory as a run leaves it: the store (its WAL not yet folded in), the
    history, the run directory and the workspace of a task that waits."""
    data = root / "data"
    store = SqliteStore(data / "bot.sqlite3")
    await store.open()
    task, _ = await store.create_task(request_for(5))
    await store.save_checkpoint(task.id, {"stage": "wait", "note": "x" * 1000})
    await store.set_state(task.id, TaskState.AWAITING_APPROVAL)
    await store.close()
    (data / "planning_history").mkdir()
    (data / "planning_history" / f"{task.id}.jsonl").write_text('{"type": "plan"}\n')
    run = data / "runs" / task.id
    run.mkdir(parents=True)
    (run / "report.md").write_text("# Report\n")
    (run / "artifacts").mkdir()
    (run / "artifacts" / "secret.txt").symlink_to("/etc/hostname")  # never followed
    workspace = data / "workspaces" / task.id
    (workspace / "bin").mkdir(parents=True)
    (workspace / "bin" / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (workspace / "bin" / "run.sh").chmod(0o755)
    (workspace / "run").symlink_to("bin/run.sh")
    return data, task.id


async def test_a_packed_state_unpacks_into_a_store_the_next_run_can_open(tmp_path: Path) -> None:
    data, task_id = await data_dir_with_a_task(tmp_path)
    out = tmp_path / "packed"

    notes = pack(data, out, workspaces=[task_id, "gone"])

    assert notes == []
    assert (out / "runs" / task_id / "report.md").read_text() == "# Report\n"
    assert not (out / "runs" / task_id / "artifacts" / "secret.txt").exists()
    assert sorted(p.name for p in out.iterdir()) == ["planning_history", "runs", "state.tar.gz"]

    fresh = tmp_path / "next-run"
    unpack(out, fresh)

    store = SqliteStore(fresh / "bot.sqlite3")
    await store.open()
    try:
        task = await store.get_task(task_id)
        assert task is not None and task.state is TaskState.AWAITING_APPROVAL
        checkpoint = await store.load_checkpoint(task_id)
        assert checkpoint is not None and checkpoint["stage"] == "wait"
    finally:
        await store.close()
    assert (fresh / "planning_history" / f"{task_id}.jsonl").read_text() == '{"type": "plan"}\n'
    script = fresh / "workspaces" / task_id / "bin" / "run.sh"
    assert os.access(script, os.X_OK)  # the tar keeps modes a zip would lose
    assert os.readlink(fresh / "workspaces" / task_id / "run") == "bin/run.sh"


async def test_a_workspace_over_the_bound_is_left_out_and_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data, task_id = await data_dir_with_a_task(tmp_path)
    monkeypatch.setattr(state, "MAX_WORKSPACE_BYTES", 10)
    [note] = pack(data, tmp_path / "packed", workspaces=[task_id])
    assert f"the workspace of task {task_id}" in note and "is not kept" in note
    with tarfile.open(tmp_path / "packed" / "state.tar.gz") as tar:
        assert tar.getnames() == ["bot.sqlite3"]


def archive(tmp_path: Path, *members: tuple[tarfile.TarInfo, bytes]) -> Path:
    packed = tmp_path / "packed"
    packed.mkdir()
    with tarfile.open(packed / "state.tar.gz", "w:gz") as tar:
        for info, data in members:
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return packed


@pytest.mark.parametrize(
    "name", ["etc/passwd", "../bot.sqlite3", "/tmp/x", "workspaces", "runs/x/report.md"]
)
def test_an_archive_with_a_foreign_entry_is_refused(tmp_path: Path, name: str) -> None:
    packed = archive(tmp_path, (tarfile.TarInfo(name), b"x"))
    with pytest.raises(StateError, match="unexpected entry"):
        unpack(packed, tmp_path / "data")
    assert not (tmp_path / "data" / "etc").exists()


def test_a_link_out_of_the_data_directory_is_refused(tmp_path: Path) -> None:
    link = tarfile.TarInfo("workspaces/t1/escape")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc"
    inside = tarfile.TarInfo("workspaces/t1/escape/owned")
    packed = archive(tmp_path, (link, b""), (inside, b"x"))
    with pytest.raises(StateError, match="cannot be unpacked"):
        unpack(packed, tmp_path / "data")


def test_an_archive_over_the_size_bound_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(state, "MAX_UNPACKED_BYTES", 100)
    packed = archive(tmp_path, (tarfile.TarInfo("workspaces/t1/big"), b"x" * 101))
    with pytest.raises(StateError, match="over 100 bytes"):
        unpack(packed, tmp_path / "data")


async def test_a_folder_carrier_keeps_and_fetches_by_issue(tmp_path: Path) -> None:
    carrier = FolderCarrier(tmp_path / "kept")
    assert await carrier.fetch(5, tmp_path / "in") is None
    packed = tmp_path / "packed"
    (packed / "runs").mkdir(parents=True)
    (packed / "runs" / "r.md").write_text("one")
    where = await carrier.keep(5, packed)
    assert where == f"folder {tmp_path / 'kept' / artifact_name(5)}"
    (packed / "runs" / "r.md").write_text("two")
    await carrier.keep(5, packed)  # the newest replaces the one before
    assert await carrier.fetch(6, tmp_path / "other") is None
    assert await carrier.fetch(5, tmp_path / "in") == where
    assert (tmp_path / "in" / "runs" / "r.md").read_text() == "two"
