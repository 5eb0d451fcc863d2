"""A worker process for the kill -9 test: real SQLite store, a coordinator that
marks the task as started and then works for a long time."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from bot.agent.session import TaskContext
from bot.config import load_settings
from bot.events import ForgeKind
from bot.llm.scripted import ScriptedLLM
from bot.run_events import Outcome
from bot.runtime import Runtime
from bot.storage.sqlite import SqliteStore
from bot.worker import Worker
from tests.fakes import FakeForge


class SlowCoordinator:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    async def run(self, ctx: TaskContext) -> Outcome:
        await ctx.store.save_checkpoint(ctx.task.id, {"step": 1})
        with self.marker.open("a") as out:
            out.write(ctx.task.id + "\n")
        await asyncio.sleep(3600)
        raise AssertionError("never finishes")


async def main(data_dir: Path, marker: Path, config: Path) -> None:
    settings = load_settings({"BOT_DATA_DIR": str(data_dir)}, config)
    worker_settings = settings.worker.model_copy(update={"max_workers": 1, "lease_seconds": 5})
    settings = settings.model_copy(update={"worker": worker_settings})
    forge = FakeForge(ForgeKind.GITHUB)
    forge.add_repo("octo/hello")
    for number in range(1, 4):
        forge.add_issue(forge.repos["octo/hello"].ref, number, title=f"issue {number}")
    store = SqliteStore(data_dir / "bot.sqlite3")
    runtime = Runtime(
        settings,
        store=store,
        forges={ForgeKind.GITHUB: forge},
        llm=ScriptedLLM([]),
    )
    await store.open()
    worker = Worker(runtime, coordinator_factory=lambda: SlowCoordinator(marker), owner="victim")
    await worker.start()
    await asyncio.sleep(3600)


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])))
