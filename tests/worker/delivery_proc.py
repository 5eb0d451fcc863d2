"""A worker process killed in the middle of delivering: it runs one queued task with the
real agent (scripted model, the one FakeForge, a real git remote) until the remote's
pre-receive hook holds its push, where the test kills it.

    python tests/worker/delivery_proc.py TMP_PATH REMOTE_URL
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from tests.e2e.support import github_repo
from tests.harness import Harness
from tests.tools.conftest import Remote
from tests.worker.test_kill_delivery import SCRIPT


async def main(tmp_path: Path, url: str) -> None:
    async with Harness(tmp_path, script=SCRIPT) as bot:
        github_repo(bot, Remote(bare=Path(), url=url, base_commit=""))
        task = await bot.store.lease_task("victim", 600)
        assert task is not None
        await bot.worker.run_task(task)
    raise AssertionError("the test kills this process before the task ends")


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), sys.argv[2]))
