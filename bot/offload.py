"""CPU work on large text, off the event loop and out of its process.

One process serves webhooks and runs tasks. A thread running Python code holds the GIL
in turns of ``sys.getswitchinterval()``, and the event loop waits for its turn behind
every such thread: with tool work in threads (even a single one), a webhook's answer
waited behind greps, file reads and redactions of other tasks, and its p99 under load was
about twice the idle one (bench/ack_under_work.py). Tool work and the redaction of large
texts run here instead: in ``WORKERS`` worker processes of their own, whatever the number
of tasks, each with its own GIL. The event loop only pickles the arguments and the result.

What runs here must be picklable: module-level functions (or ``functools.partial`` of
them) with plain arguments, raising exceptions that survive pickling. A worker that dies
(killed, out of memory) breaks the pool; the next call builds a new one, and a call that
was waiting on the broken one is tried once more.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import ParamSpec, TypeVar

from bot.redact import redact

# Worker processes: one per core but one, which is left to the event loop. With two
# cores, one worker: measured with bench/ack_under_work.py.
WORKERS = max(1, (os.cpu_count() or 2) - 1)
# Characters; a shorter text is redacted on the loop. Redaction takes about 0.26 ms per
# 1,000 characters of ordinary text (0.8 ms at 2,000, 4.2 ms at 16,000); a round trip to
# a worker process took 0.5-1 ms (65,000 characters included) on a busy 2-core machine.
LARGE_TEXT = 2_048
# How much lower than the server's the workers' scheduling priority is (nice(1) steps).
NICENESS = 10
# Seconds between a worker's checks that the server that started it still runs.
PARENT_POLL = 1.0

P = ParamSpec("P")
T = TypeVar("T")
_pool: ProcessPoolExecutor | None = None
_lock = threading.Lock()


def _executor() -> ProcessPoolExecutor:
    global _pool
    with _lock:
        if _pool is None:
            # "spawn": a fresh interpreter, not a fork of a process with an event loop,
            # threads and open connections (a fork copies locks other threads hold).
            context = multiprocessing.get_context("spawn")
            _pool = ProcessPoolExecutor(
                max_workers=WORKERS, mp_context=context, initializer=_worker_start
            )
        return _pool


def _worker_start() -> None:
    # Ctrl-C reaches the whole process group: the server stops its workers itself (at
    # exit), so a worker ignores it instead of printing a KeyboardInterrupt of its own.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # Tool work can wait a few milliseconds; a webhook's answer should not. When both want
    # a core, the scheduler gives it to the server's event loop first.
    os.nice(NICENESS)
    # A server that is killed (SIGKILL, the OOM killer, an unhandled SIGTERM) cannot stop
    # its workers: each one leaves when its parent is gone instead of living on.
    parent = os.getppid()
    threading.Thread(target=_follow, args=(parent,), name="parent-watch", daemon=True).start()


def _follow(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(PARENT_POLL)
    os._exit(0)


def _discard(broken: ProcessPoolExecutor) -> None:
    global _pool
    with _lock:
        if _pool is broken:
            _pool = None
    broken.shutdown(wait=False, cancel_futures=True)


async def run(fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """``fn(*args, **kwargs)`` in a worker process; its result, or its exception."""
    loop = asyncio.get_running_loop()
    for attempt in (1, 2):
        pool = _executor()
        try:
            return await loop.run_in_executor(pool, _call, fn, args, kwargs)
        except BrokenProcessPool:
            _discard(pool)
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


def _call(fn: Callable[..., T], args: tuple[object, ...], kwargs: dict[str, object]) -> T:
    return fn(*args, **kwargs)


async def redact_text(text: str, *, known: Iterable[str] = ()) -> str:
    """``redact``, in a worker process when the text is large."""
    if len(text) < LARGE_TEXT:
        return redact(text, known=known)
    return await run(redact, text, known=tuple(known))


def shutdown() -> None:
    """Stop the worker processes (they are started again on the next call)."""
    global _pool
    with _lock:
        pool, _pool = _pool, None
    if pool is not None:
        pool.shutdown(wait=True, cancel_futures=True)
