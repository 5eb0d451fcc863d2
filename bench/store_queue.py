"""Store figures: webhook-path write latency and task-queue throughput.

    python -m bench.store_queue                     # SQLite in a temporary directory
    python -m bench.store_queue --dsn postgresql://user@127.0.0.1/db   # PostgreSQL

``record_delivery`` is what a webhook request waits for: it is timed with
``--concurrency`` deliveries in flight at once (the target is p99 < 50 ms at 64).
The queue figure is tasks created, leased, checkpointed and finished per second by
``--workers`` concurrent workers. The prune figure is the hourly clean-up: 1,000
handled deliveries past the window, deleted beside few or many newer ones; its time
should not grow with what is kept (it scanned the whole inbox before the index of
handled events). Prints figures; passes or fails nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from bot.events import ForgeKind, IssueRef, RepoRef, TaskRequest
from bot.storage.base import TaskState
from bot.storage.sql_store import SqlStore
from bot.storage.sqlite import SqliteStore


def _percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


async def _timed_delivery(store: SqlStore, key: str) -> float:
    started = time.perf_counter()
    await store.record_delivery(key, "github", {"action": "labeled", "key": key, "pad": "x" * 2000})
    return time.perf_counter() - started


async def bench_deliveries(store: SqlStore, concurrency: int, rounds: int) -> None:
    samples: list[float] = []
    for round_no in range(rounds):
        keys = [f"bench-{round_no}-{n}" for n in range(concurrency)]
        samples += await asyncio.gather(*(_timed_delivery(store, key) for key in keys))
    ms = [s * 1000 for s in samples]
    print(
        f"record_delivery x{len(ms)} at concurrency {concurrency}: "
        f"p50 {statistics.median(ms):.2f} ms, p99 {_percentile(ms, 0.99):.2f} ms, "
        f"max {max(ms):.2f} ms"
    )


def _request(number: int) -> TaskRequest:
    repo = RepoRef(forge=ForgeKind.GITHUB, full_name="bench/repo")
    return TaskRequest(issue=IssueRef(repo=repo, number=number), requested_by="bench")


async def _worker(store: SqlStore, owner: str) -> int:
    done = 0
    while (task := await store.lease_task(owner, 60)) is not None:
        await store.save_checkpoint(task.id, {"step": 1})
        await store.set_state(task.id, TaskState.DONE)
        done += 1
    return done


async def bench_queue(store: SqlStore, tasks: int, workers: int) -> None:
    started = time.perf_counter()
    for number in range(tasks):
        await store.create_task(_request(number))
    created = time.perf_counter()
    counts = await asyncio.gather(*(_worker(store, f"worker-{n}") for n in range(workers)))
    finished = time.perf_counter()
    assert sum(counts) == tasks, counts
    print(
        f"create_task: {tasks / (created - started):.0f}/s; "
        f"lease+checkpoint+finish with {workers} workers: {tasks / (finished - created):.0f}/s"
    )


async def _handled_deliveries(store: SqlStore, count: int, tag: str) -> None:
    for start in range(0, count, 64):
        keys = [f"prune-{tag}-{n}" for n in range(start, min(start + 64, count))]
        await asyncio.gather(*(store.record_delivery(k, "github", {"key": k}) for k in keys))
    while (event := await store.lease_event("bench", 60)) is not None:
        await store.finish_event(event.id)


async def bench_prune(store: SqlStore, kept: list[int], old: int = 1000) -> None:
    """The hourly prune: ``old`` handled deliveries past the window, beside ``kept`` newer
    ones (the rest of the 14 days). Its time should follow what it deletes, not the table."""
    times: list[float] = []
    for size in kept:
        await _handled_deliveries(store, 0, "drain")  # handle what is pending, then
        await store.prune(older_than=time.time() + 1)  # start from an empty inbox
        await _handled_deliveries(store, old, f"old-{size}")
        cutoff = time.time()
        await _handled_deliveries(store, size, f"kept-{size}")
        started = time.perf_counter()
        removed = await store.prune(older_than=cutoff)
        times.append(time.perf_counter() - started)
        print(f"prune of {removed} old deliveries beside {size:,} kept: {times[-1] * 1000:.1f} ms")
    print(f"prune time, most kept vs fewest: {times[-1] / times[0]:.2f}x")


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-store-") as tmp:
        store: SqlStore
        if args.dsn:
            from bot.storage.postgres import PostgresStore

            store = PostgresStore(dsn=args.dsn, max_size=args.pool)
        else:
            store = SqliteStore(Path(tmp) / "bot.sqlite3")
        await store.open()
        try:
            print(f"backend: {type(store).__name__}")
            await bench_deliveries(store, args.concurrency, args.rounds)
            await bench_queue(store, args.tasks, args.workers)
            await bench_prune(store, args.prune)
        finally:
            await store.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", help="a PostgreSQL DSN (an empty database); default SQLite")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--tasks", type=int, default=500)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--pool", type=int, default=16, help="PostgreSQL pool size")
    parser.add_argument("--prune", type=int, nargs="+", default=[1000, 40000], help="rows kept")
    asyncio.run(main(parser.parse_args()))
