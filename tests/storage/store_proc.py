"""A second process on the same SQLite file (run by test_store_sqlite.py).

Usage: python store_proc.py DB_PATH deliver|lease COUNT. It opens the store, prints
``ready``, waits for a line on stdin (so both processes start together), does its
work and prints the result as JSON.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys

from bot.storage.sqlite import SqliteStore


async def main(path: str, mode: str, count: int) -> None:
    store = SqliteStore(path, busy_timeout=30.0)
    await store.open()
    print("ready", flush=True)
    sys.stdin.readline()
    try:
        if mode == "deliver":
            results = await asyncio.gather(
                *(store.record_delivery("shared-key", "github", {"n": n}) for n in range(count))
            )
            print(json.dumps(results.count(True)), flush=True)
        else:
            owner = f"process-{os.getpid()}"
            leased = []
            while (task := await store.lease_task(owner, 60)) is not None:
                leased.append(task.id)
            print(json.dumps(leased), flush=True)
    finally:
        await store.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
