"""What a sandboxed command may fill: its /tmp (a tmpfs, which the memory limit does not
count) has a size, hidden folders are read-only, and the workspace has a bound; a
command past a bound fails with a clear message and the host keeps working. With the
real bubblewrap. (The attacks on these bounds: tests/adversarial/test_sandbox_bounds.py.)"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from bot.config import SandboxSettings
from bot.sandbox import sandbox as sandbox_module
from bot.sandbox.disk import DiskUsageError, disk_usage
from bot.sandbox.sandbox import Sandbox, WorkspaceBound, WorkspaceFull

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap missing")
PYTHON = "python3"  # the system's: the test venv's interpreter lives under the hidden /root

WRITE = """import sys
with open(sys.argv[1], "wb") as f:
    for _ in range(int(sys.argv[2])):
        f.write(b"x" * (1 << 20))
        f.flush()
"""


def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "write.py").write_text(WRITE)
    return root


async def test_tmp_is_bounded_even_under_a_small_memory_limit(tmp_path: Path) -> None:
    """memory_mb=256 once let a command write 573 MB into /tmp, a tmpfs of half the RAM."""
    root = workspace(tmp_path)
    sandbox = Sandbox(SandboxSettings(memory_mb=256, tmp_mb=64, max_file_mb=1000))
    result = await sandbox.run([PYTHON, "write.py", "/tmp/big", "300"], cwd=root)
    assert result.exit_code != 0
    assert "No space left on device" in result.stderr
    df = await sandbox.run(["df", "-m", "/tmp"], cwd=root)
    assert df.exit_code == 0 and " 64 " in df.stdout.replace("  ", " ")


async def test_hidden_folders_cannot_be_filled(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    sandbox = Sandbox(SandboxSettings(max_file_mb=1000))
    result = await sandbox.run([PYTHON, "write.py", "/root/fill", "10"], cwd=root)
    assert result.exit_code != 0 and "Read-only file system" in result.stderr


async def test_a_command_that_grows_the_workspace_past_its_bound_fails_and_keeps_what_fit(
    tmp_path: Path,
) -> None:
    root = workspace(tmp_path)
    sandbox = Sandbox(SandboxSettings(workspace_mb=32, max_file_mb=1000, timeout=120))
    assert await sandbox.bound() is WorkspaceBound.KERNEL
    result = await sandbox.run([PYTHON, "write.py", "big.bin", "2000"], cwd=root)
    assert result.exit_code != 0 and not result.timed_out
    assert "No space left on device" in result.stderr
    assert "filled the room it had in the workspace (sandbox.workspace_mb 32 MB" in result.stderr
    written = (await disk_usage(root)).bytes
    assert 8 << 20 < written <= 32 << 20  # what fitted is on disk, and no more
    (root / "big.bin").unlink()
    after = await sandbox.run(["true"], cwd=root)
    assert after.exit_code == 0


async def test_a_workspace_over_its_bound_runs_no_command(tmp_path: Path) -> None:
    """Over the bound (the bot's own clone, or files the host wrote): refused before."""
    root = workspace(tmp_path)
    (root / "big.bin").write_bytes(b"x" * (17 << 20))
    sandbox = Sandbox(SandboxSettings(workspace_mb=16))
    with pytest.raises(WorkspaceFull, match="delete files before running commands"):
        await sandbox.run(["true"], cwd=root)
    for i in range(120):
        (root / f"f{i}").touch()
    (root / "big.bin").unlink()
    few = Sandbox(SandboxSettings(workspace_files=100))
    with pytest.raises(WorkspaceFull, match=r"sandbox.workspace_files \(100 files"):
        await few.run(["true"], cwd=root)


async def test_without_an_overlay_a_growing_workspace_is_measured_and_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fallback where the kernel refuses an overlay: checked once a second."""
    bwrap = shutil.which("bwrap")
    assert bwrap is not None
    monkeypatch.setitem(sandbox_module._overlay_errors, bwrap, "refused (test)")
    root = workspace(tmp_path)
    sandbox = Sandbox(SandboxSettings(workspace_mb=32, max_file_mb=1000, timeout=120))
    assert await sandbox.bound() is WorkspaceBound.MEASURED
    # slow enough that the once-a-second check sees it long before it ends
    slow = WRITE.replace("f.flush()", "f.flush(); __import__('time').sleep(0.02)")
    (root / "slow.py").write_text(slow)
    result = await sandbox.run([PYTHON, "slow.py", "big.bin", "2000"], cwd=root)
    assert result.exit_code == -1 and not result.timed_out
    assert "grew the workspace past sandbox.workspace_mb (32 MB)" in result.stderr
    assert result.duration < 30
    written = (await disk_usage(root)).bytes
    assert written < 600 << 20  # stopped far before the 2,000 MB it meant to write
    with pytest.raises(WorkspaceFull, match="delete files before running commands"):
        await sandbox.run(["true"], cwd=root)
    (root / "big.bin").unlink()
    after = await sandbox.run(["true"], cwd=root)  # once it shrinks, commands run again
    assert after.exit_code == 0


async def test_disk_use_counts_allocated_blocks_and_every_file(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "real.bin").write_bytes(b"x" * (1 << 20))
    (tmp_path / "sparse.bin").touch()
    os.truncate(tmp_path / "sparse.bin", 1 << 30)  # 1 GiB apparent, nothing allocated
    os.link(tmp_path / "a" / "real.bin", tmp_path / "again.bin")  # counted once
    used = await disk_usage(tmp_path)
    assert (1 << 20) <= used.bytes < (2 << 20)
    assert used.files == 4  # the root, a/, real.bin (with its second name), sparse.bin
    with pytest.raises(DiskUsageError, match="could not measure"):
        await disk_usage(tmp_path / "missing")


async def test_a_workspace_inside_a_hidden_folder_still_runs(tmp_path: Path) -> None:
    """The bot's data directory is hidden and holds the workspaces; in tests (and some
    set-ups) it lies under /tmp, which the sandbox covers with its own tmpfs."""
    data = tmp_path / "data"
    root = data / "workspaces" / "t1"
    root.mkdir(parents=True)
    (root / "notes.txt").write_text("DONE\n")
    outside = data / "secret.txt"
    outside.write_text("hidden")
    sandbox = Sandbox(SandboxSettings(), hide=(data,))
    result = await sandbox.run(["cat", "notes.txt"], cwd=root)
    assert result.exit_code == 0 and result.stdout == "DONE\n", result.stderr
    hidden = await sandbox.run(["cat", str(outside)], cwd=root)
    assert hidden.exit_code != 0
