"""Attacks on the sandbox's edges, with the real bubblewrap: what one command may fill.

Each attack is the one issue 18 measured: 990 MB written to ``/dev/shm`` under
``sandbox.tmp_mb=512``; 20 x ``fallocate -l 99M`` leaving 1,980 MB on disk with
``sandbox.workspace_mb=64``; 100,000 empty files costing 2 MB of the limit while each
size walk took 0.32 s on a thread of the server. The bounds hold where the kernel holds
them (a tmpfs with ``size=`` and ``nr_inodes=``), so a command that writes faster than
anyone could look still stops at them.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from bot.config import SandboxSettings
from bot.sandbox.sandbox import Sandbox, WorkspaceFull

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap missing")

PYTHON = "python3"  # the system's: the test venv's interpreter lives under the hidden /root


def disk_bytes(root: Path) -> int:
    """What ``root`` occupies on disk, as ``du`` counts it (a hard link once)."""
    done = subprocess.run(["du", "-s", "-x", "-B1", str(root)], capture_output=True, text=True)
    return int(done.stdout.split()[0])


def entries(root: Path) -> int:
    return sum(len(dirs) + len(files) for _, dirs, files in os.walk(root))


def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / ".git").mkdir(parents=True)
    (root / "README.md").write_text("demo\n")
    return root


# --- item 5: /dev -----------------------------------------------------------------------------


async def test_dev_shm_cannot_take_more_than_its_bound(tmp_path: Path) -> None:
    """One command wrote 990 MB to /dev/shm with sandbox.tmp_mb=512: /dev was a tmpfs
    of half the machine's memory."""
    root = workspace(tmp_path)
    sandbox = Sandbox(SandboxSettings(tmp_mb=64, max_file_mb=1000))
    script = "head -c 300000000 /dev/zero > /dev/shm/fill; stat -c %s /dev/shm/fill"
    result = await sandbox.run(["sh", "-c", script], cwd=root)
    assert "No space left on device" in result.stderr, result.stderr
    held = int(result.stdout.split()[-1])
    assert held <= 64 << 20


async def test_dev_shm_has_the_configured_size_and_still_works(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    sandbox = Sandbox(SandboxSettings(shm_mb=8, max_file_mb=1000))
    script = "head -c 30000000 /dev/zero > /dev/shm/fill; stat -c %s /dev/shm/fill"
    result = await sandbox.run(["sh", "-c", script], cwd=root)
    assert int(result.stdout.split()[-1]) == 8 << 20
    # POSIX shared memory (Python's multiprocessing uses it) works within the bound
    shm = (
        "from multiprocessing import shared_memory as s\n"
        "m = s.SharedMemory(create=True, size=4096); m.buf[0] = 7; print(m.buf[0])\n"
        "m.close(); m.unlink()\n"
    )
    used = await sandbox.run([PYTHON, "-c", shm], cwd=root)
    assert used.exit_code == 0 and used.stdout.strip() == "7", used.stderr


async def test_dev_itself_cannot_be_filled(tmp_path: Path) -> None:
    """Outside /dev/shm, /dev is read-only; its devices still work."""
    root = workspace(tmp_path)
    sandbox = Sandbox(SandboxSettings(max_file_mb=1000))
    fill = await sandbox.run(["sh", "-c", "head -c 50000000 /dev/zero > /dev/fill"], cwd=root)
    assert fill.exit_code != 0 and "Read-only file system" in fill.stderr, fill.stderr
    devices = await sandbox.run(
        ["sh", "-c", "echo x > /dev/null && head -c 4 /dev/urandom | wc -c"], cwd=root
    )
    assert devices.exit_code == 0 and devices.stdout.strip() == "4", devices.stderr


# --- item 6: the workspace --------------------------------------------------------------------


async def test_fallocate_cannot_pass_the_workspace_bound(tmp_path: Path) -> None:
    """20 x fallocate -l 99M left 1,980 MB on disk with workspace_mb=64: the check ran
    once a second and fallocate takes microseconds."""
    if shutil.which("fallocate") is None:
        pytest.skip("fallocate (util-linux) missing")
    root = workspace(tmp_path)
    sandbox = Sandbox(SandboxSettings(workspace_mb=64, max_file_mb=100, timeout=120))
    script = "for i in $(seq 20); do fallocate -l 99M f$i; done"
    result = await sandbox.run(["sh", "-c", script], cwd=root)
    assert "No space left on device" in result.stderr, result.stderr
    assert disk_bytes(root) <= 64 << 20


async def test_fast_writes_cannot_pass_the_workspace_bound(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    sandbox = Sandbox(SandboxSettings(workspace_mb=64, max_file_mb=100, timeout=120))
    script = "for i in $(seq 10); do head -c 20000000 /dev/zero > w$i || exit 1; done"
    result = await sandbox.run(["sh", "-c", script], cwd=root)
    assert result.exit_code != 0 and "No space left on device" in result.stderr
    assert disk_bytes(root) <= 64 << 20
    assert (root / "w1").stat().st_size == 20_000_000  # what fitted is kept, on disk


async def test_the_number_of_files_is_bounded(tmp_path: Path) -> None:
    """100,000 empty files cost 2 MB of the limit: files are bounded on their own."""
    root = workspace(tmp_path)
    sandbox = Sandbox(SandboxSettings(workspace_files=2000, timeout=120))
    script = "import os\nfor i in range(10000):\n    open(f'e{i}', 'w').close()\n"
    result = await sandbox.run([PYTHON, "-c", script], cwd=root)
    assert result.exit_code != 0 and "No space left on device" in result.stderr, result.stderr
    assert entries(root) <= 2000
    assert (root / "e0").is_file()


async def test_hard_links_cannot_multiply_what_lands_on_disk(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    sandbox = Sandbox(SandboxSettings(workspace_mb=64, max_file_mb=100))
    script = "head -c 10000000 /dev/urandom > one && for i in $(seq 40); do ln one l$i; done"
    result = await sandbox.run(["sh", "-c", script], cwd=root)
    assert result.exit_code == 0, result.stderr
    assert disk_bytes(root) <= 64 << 20
    assert (root / "l40").read_bytes() == (root / "one").read_bytes()
    assert (root / "l40").stat().st_ino == (root / "one").stat().st_ino


async def test_sparse_files_stay_sparse_on_disk(tmp_path: Path) -> None:
    """A sparse file costs nothing in the sandbox: copied naively it would cost its size."""
    root = workspace(tmp_path)
    sandbox = Sandbox(SandboxSettings(workspace_mb=64, max_file_mb=100))
    script = "for i in $(seq 30); do truncate -s 99M s$i && printf x >> s$i; done"
    result = await sandbox.run(["sh", "-c", script], cwd=root)
    assert result.exit_code == 0, result.stderr
    assert (root / "s30").stat().st_size == 99 * (1 << 20) + 1
    assert disk_bytes(root) <= 64 << 20


async def test_many_small_commands_cannot_creep_past_the_bound(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    sandbox = Sandbox(SandboxSettings(workspace_mb=16, max_file_mb=100))
    for i in range(6):
        try:
            await sandbox.run(["sh", "-c", f"head -c 8000000 /dev/zero > c{i}"], cwd=root)
        except WorkspaceFull:
            break
    assert disk_bytes(root) <= 16 << 20


async def test_measuring_a_large_workspace_leaves_the_loop_and_the_shared_pool_alone(
    tmp_path: Path,
) -> None:
    """Each size walk over 100,000 files took 0.32 s on a thread of the server's pool."""
    root = workspace(tmp_path)
    many = root / "many"
    many.mkdir()
    for i in range(100_000):
        (many / f"f{i}").touch()
    sandbox = Sandbox(SandboxSettings(workspace_files=200_000))
    loop = asyncio.get_running_loop()
    pool = _CountingPool()
    loop.set_default_executor(pool)
    gaps: list[float] = []
    done = asyncio.Event()

    async def tick() -> None:
        last = time.monotonic()
        while not done.is_set():
            await asyncio.sleep(0.005)
            now = time.monotonic()
            gaps.append(now - last)
            last = now

    ticker = asyncio.create_task(tick())
    try:
        result = await sandbox.run(["true"], cwd=root)
    finally:
        done.set()
        await ticker
    assert result.exit_code == 0, result.stderr
    assert pool.submitted == 0, "the workspace was measured on the shared thread pool"
    assert max(gaps) < 0.25, f"the event loop stalled for {max(gaps):.3f} s"


class _CountingPool(ThreadPoolExecutor):
    def __init__(self) -> None:
        super().__init__(max_workers=2)
        self.submitted = 0

    def submit(self, fn, /, *args, **kwargs):  # type: ignore[no-untyped-def]
        self.submitted += 1
        return super().submit(fn, *args, **kwargs)
