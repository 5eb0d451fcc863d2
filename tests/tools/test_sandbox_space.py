"""What a sandboxed command may fill: its /tmp (a tmpfs, which the memory limit does not
count) has a size, hidden folders are read-only, and the workspace has a bound; a
command past a bound fails with a clear message and the host keeps working. With the
real bubblewrap."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bot.config import SandboxSettings
from bot.tools.disk import tree_bytes
from bot.tools.sandbox import Sandbox, WorkspaceFull

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap missing")

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
    result = await sandbox.run(["python3", "write.py", "/tmp/big", "300"], cwd=root)
    assert result.exit_code != 0
    assert "No space left on device" in result.stderr
    df = await sandbox.run(["df", "-m", "/tmp"], cwd=root)
    assert df.exit_code == 0 and " 64 " in df.stdout.replace("  ", " ")


async def test_hidden_folders_cannot_be_filled(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    sandbox = Sandbox(SandboxSettings(max_file_mb=1000))
    result = await sandbox.run(["python3", "write.py", "/root/fill", "10"], cwd=root)
    assert result.exit_code != 0 and "Read-only file system" in result.stderr


async def test_a_command_that_grows_the_workspace_past_its_bound_is_stopped(
    tmp_path: Path,
) -> None:
    root = workspace(tmp_path)
    sandbox = Sandbox(SandboxSettings(workspace_mb=32, max_file_mb=1000, timeout=120))
    # slow enough that the once-a-second check sees it long before it ends
    slow = WRITE.replace("f.flush()", "f.flush(); __import__('time').sleep(0.02)")
    (root / "slow.py").write_text(slow)
    result = await sandbox.run(["python3", "slow.py", "big.bin", "2000"], cwd=root)
    assert result.exit_code == -1 and not result.timed_out
    assert "grew the workspace past sandbox.workspace_mb (32 MB)" in result.stderr
    assert result.duration < 30
    written = tree_bytes(root)
    assert written < 600 << 20  # stopped far before the 2,000 MB it meant to write
    with pytest.raises(WorkspaceFull, match="delete files before running commands"):
        await sandbox.run(["true"], cwd=root)
    (root / "big.bin").unlink()
    after = await sandbox.run(["true"], cwd=root)  # once it shrinks, commands run again
    assert after.exit_code == 0


def test_disk_use_counts_allocated_blocks_and_stops_early(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "real.bin").write_bytes(b"x" * (1 << 20))
    with open(tmp_path / "sparse.bin", "wb") as handle:
        handle.truncate(1 << 30)  # 1 GiB apparent, nothing allocated
    total = tree_bytes(tmp_path)
    assert (1 << 20) <= total < (2 << 20)
    assert tree_bytes(tmp_path, stop_above=1000) > 1000


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
