"""What the workspace's bounds cost (prints figures; not a test).

1. Measuring a workspace of ``--files`` (100,000) empty files: the walk the sandbox did
   before each command (Python's ``os.scandir`` over the tree, in ``asyncio.to_thread``:
   the server's shared pool), against ``bot.sandbox.disk.disk_usage`` (two ``du``
   processes). For each: the wall time and the event loop's worst lag meanwhile (a 5 ms
   ticker), the median of ``--repeat`` runs.
2. One sandboxed command, the median of ``--repeat`` runs, through the overlay whose
   layer the kernel bounds and, as the baseline, with the workspace bound directly and
   measured once a second (the fallback, and the way every command ran before): ``true``
   (the overlay's own cost: the wrapper, the handshake, nothing to apply) and a command
   writing ``--write-mb`` (50) MB (the layer applied to the disk afterwards).

    .venv/bin/python bench/sandbox_bounds.py [--files N] [--repeat N] [--write-mb N]

Needs bubblewrap. Takes about half a minute with the defaults.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from bot.config import SandboxSettings
from bot.sandbox import sandbox as sandbox_module
from bot.sandbox.disk import disk_usage
from bot.sandbox.sandbox import Sandbox, WorkspaceBound


def python_walk(root: Path) -> int:
    """The measure the sandbox took before this change (bot/sandbox/disk.py: tree_bytes)."""
    total = 0
    stack = [root]
    while stack:
        with os.scandir(stack.pop()) as entries:
            for entry in entries:
                info = entry.stat(follow_symlinks=False)
                total += info.st_blocks * 512
                if entry.is_dir(follow_symlinks=False):
                    stack.append(Path(entry.path))
    return total


async def timed(work: Callable[[], Awaitable[object]]) -> tuple[float, float]:
    """Wall seconds of ``work`` and the loop's worst lag meanwhile."""
    lags: list[float] = []
    done = asyncio.Event()

    async def tick() -> None:
        last = time.perf_counter()
        while not done.is_set():
            await asyncio.sleep(0.005)
            now = time.perf_counter()
            lags.append(now - last - 0.005)
            last = now

    ticker = asyncio.create_task(tick())
    started = time.perf_counter()
    await work()
    wall = time.perf_counter() - started
    done.set()
    await ticker
    return wall, max(lags, default=0.0)


async def measuring(root: Path, repeat: int) -> None:
    rows = []
    for name, work in (
        ("python walk in asyncio.to_thread", lambda: asyncio.to_thread(python_walk, root)),
        ("disk_usage (du, two processes)", lambda: disk_usage(root)),
    ):
        runs = [await timed(work) for _ in range(repeat)]
        wall = statistics.median(r[0] for r in runs)
        lag = statistics.median(r[1] for r in runs)
        rows.append((name, wall, lag))
    base = rows[0][1]
    files = (await disk_usage(root)).files
    print(f"\n1. measuring a tree of {files:,} files and folders (median of {repeat})")
    print(f"   {'':36} {'wall':>9} {'loop lag':>9} {'vs walk':>8}")
    for name, wall, lag in rows:
        print(f"   {name:36} {wall * 1000:7.1f}ms {lag * 1000:7.1f}ms {wall / base:7.2f}x")


async def commanding(scratch: Path, repeat: int, write_mb: int) -> None:
    bwrap = shutil.which("bwrap")
    assert bwrap is not None
    settings = SandboxSettings(workspace_mb=4096, max_file_mb=1000, timeout=120)
    write = ["sh", "-c", f"head -c {write_mb << 20} /dev/zero > out.bin"]
    results: dict[str, dict[str, float]] = {}
    for mode in ("measured (baseline)", "overlay"):
        if mode == "overlay":
            sandbox_module._overlay_errors.pop(bwrap, None)
        else:
            sandbox_module._overlay_errors[bwrap] = "bench: the baseline"
        sandbox = Sandbox(settings)
        expected = WorkspaceBound.KERNEL if mode == "overlay" else WorkspaceBound.MEASURED
        assert await sandbox.bound() is expected, sandbox.overlay_refused
        root = scratch / mode.split()[0]
        (root / ".git").mkdir(parents=True)
        times: dict[str, list[float]] = {"true": [], f"write {write_mb} MB": []}
        for _ in range(repeat):
            for label, argv in (("true", ["true"]), (f"write {write_mb} MB", write)):
                started = time.perf_counter()
                result = await sandbox.run(argv, cwd=root)
                times[label].append(time.perf_counter() - started)
                assert result.exit_code == 0, result.stderr
                (root / "out.bin").unlink(missing_ok=True)
        results[mode] = {k: statistics.median(v) for k, v in times.items()}
    sandbox_module._overlay_errors.pop(bwrap, None)
    print(f"\n2. one sandboxed command (median of {repeat}, measuring included)")
    labels = list(next(iter(results.values())))
    print(f"   {'':20} " + " ".join(f"{label:>16}" for label in labels))
    base = results["measured (baseline)"]
    for mode, row in results.items():
        cells = " ".join(
            f"{row[label] * 1000:7.1f}ms {row[label] / base[label]:5.2f}x" for label in labels
        )
        print(f"   {mode:20} {cells}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--write-mb", type=int, default=50)
    args = parser.parse_args()
    if shutil.which("bwrap") is None:
        sys.exit("bubblewrap is needed")
    with tempfile.TemporaryDirectory(prefix="bench-bounds-") as folder:
        scratch = Path(folder)
        many = scratch / "many"
        for i in range(args.files):
            if i % 1000 == 0:
                (many / f"d{i // 1000}").mkdir(parents=True)
            (many / f"d{i // 1000}" / f"f{i}").touch()
        print(f"cores: {os.cpu_count()}; load average: {os.getloadavg()[0]:.2f}")
        await measuring(many, args.repeat)
        await commanding(scratch, args.repeat, args.write_mb)


if __name__ == "__main__":
    asyncio.run(main())
