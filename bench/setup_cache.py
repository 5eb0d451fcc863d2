"""Set-up before work, first and second task on the same repository (prints figures).

    .venv/bin/python -m bench.setup_cache

A real Python package whose dependency (iniconfig) and test extra (pytest) come from the
package index is cloned from a real git remote into a task workspace and set up in the
real sandbox (bubblewrap, network on); a second task clones it again and must restore the
environment from the cache instead of installing. Then a follow-up on the bot's own branch
(an earlier run changed a source file) with the cache pruned: set-up runs with network in a
clean checkout of the base branch and the environment is copied into the working tree
(``bot/sandbox/setup_base.py``). Each workspace then runs the project's tests offline with what
set-up left. Needs bubblewrap and the package index.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bot.config import SandboxSettings  # noqa: E402
from bot.sandbox.sandbox import Sandbox  # noqa: E402
from bot.sandbox.setup import SetupResult  # noqa: E402
from tests.tools.conftest import make_remote  # noqa: E402
from tests.tools.test_setup import PACKAGE, _preparer, _workspace  # noqa: E402
from tests.tools.test_setup_base import _push_branch  # noqa: E402

TASKS = 2


async def one_task(base: Path, name: str) -> tuple[SetupResult, float]:
    ws = _workspace(base, name, PACKAGE)
    result = await _preparer(ws, base / "data" / "setup-cache").prepare(
        log_dir=base / "runs" / name / "setup"
    )
    sandbox = Sandbox(SandboxSettings(timeout=120, max_output_chars=20_000), network=False)
    started = time.monotonic()
    tests = await sandbox.run(["pytest", "-q", "-p", "no:cacheprovider"], cwd=ws.path)
    if tests.exit_code != 0:
        raise SystemExit(f"{name}: the project's tests failed:\n{tests.stdout}{tests.stderr}")
    return result, time.monotonic() - started


async def main() -> int:
    with tempfile.TemporaryDirectory(prefix="bench-setup-") as tmp:
        base = Path(tmp)
        make_remote(base / "origin", dict(PACKAGE))
        rows = [await one_task(base, f"task-{n}") for n in range(1, TASKS + 1)]
        changed = PACKAGE["tinypkg/__init__.py"] + b"\nFIXED = True\n"
        _push_branch(base, {"tinypkg/__init__.py": changed})
        shutil.rmtree(base / "data" / "setup-cache")  # pruned
        rows.append(await one_task(base, "follow-up"))
    print(f"{'task':<22}{'set-up':>10}{'status':>10}{'commands':>10}{'tests':>9}")
    names = ["first", "second, same tree", "follow-up, pruned"]
    for name, (result, tests) in zip(names, rows, strict=True):
        print(
            f"{name:<22}{result.duration:>9.2f}s{result.status.value:>10}"
            f"{len(result.steps):>10}{tests:>8.2f}s"
        )
    follow_up = rows[2][0]
    from_base = bool(follow_up.steps) and all(s.base and s.network for s in follow_up.steps)
    print(f"follow-up set up with network from the base checkout: {'yes' if from_base else 'NO'}")
    print(f"follow-up set-up / first: {follow_up.duration / rows[0][0].duration:.2f}")
    first, second = rows[0][0], rows[1][0]
    skipped = second.status.value == "restored" and not second.steps
    print(f"second task skips the installs: {'yes' if skipped else 'NO'} (target: yes)")
    ratio = second.duration / first.duration if first.duration else 0.0
    print(f"second set-up / first: {ratio:.2f} (target: < 0.5)")
    return 0 if skipped and ratio < 0.5 and from_base else 1


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
