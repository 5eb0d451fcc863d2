"""CPU work and file work off the event loop, in worker processes shared fairly by tasks.

One process serves webhooks and runs tasks. A thread running Python code holds the GIL
in turns of ``sys.getswitchinterval()``, and the event loop waits for its turn behind
every such thread: with tool work in threads (even a single one), a webhook's answer
waited behind greps, file reads and redactions of other tasks (bench/ack_under_work.py).
Tool work and CPU work on large texts run here instead, in ``WORKERS`` worker processes
(``bot/offload_worker.py``: spawned, nice +10, each leaves when the server is gone),
whatever the number of tasks. The event loop only pickles the arguments and the result.

Two kinds of work share the workers, and neither may wedge the other:

- ``run``: tool work (a directory walk, a search, reading files). Its time depends on
  the workspace: a search over 100,000 files takes long. Tool work never holds every
  worker: one is always left for text work, and one task (its *lane*, ``join_lane``)
  holds at most ``LANE_TOOL_SHARE`` of the tool workers while other tasks wait.
- ``compute``: work on a text in memory whose time is bounded by its length
  (redaction, cleaning people's text, rendering a comment). It goes first to a free
  worker (unless no tool work runs and some waits: then that goes first), so one task's
  long search never delays another task's redaction, and a stream of text work never
  stops all tool work.

Waiting calls are served by lane, the lane served longest ago first, so a task that
calls again and again does not starve another. A call whose caller stops waiting for it
(``asyncio.wait_for`` timed out, the task was cancelled, stopped or lost its lease) is not
left running: its worker process is killed at once and a new one started in its place.
A call whose worker dies (killed, out of memory) raises ``WorkerDied``; the next call
gets a new worker.

What runs here must be picklable: module-level functions (or ``functools.partial`` of
them) with plain arguments, raising exceptions that survive pickling. The pool belongs
to the running event loop; the workers of a closed loop's pool are taken over by the
next loop's (tests run one loop after another).
"""

from __future__ import annotations

import asyncio
import atexit
import contextvars
import enum
import os
import pickle
import threading
from collections import Counter, deque
from collections.abc import Callable, Iterable
from typing import Any, ParamSpec, TypeVar

from bot.offload_worker import NICENESS, PARENT_POLL, Worker, WorkerDied, answer
from bot.redact import redact

__all__ = ["NICENESS", "PARENT_POLL", "WorkerDied"]

# Worker processes: one per core but one (left to the event loop), and at least two, so
# that tool work can never hold all of them (measured with bench/ack_under_work.py).
WORKERS = max(2, (os.cpu_count() or 2) - 1)
# Of the workers tool work may use (all but one), the share one task may hold while
# other tasks' tool calls wait (at least one).
LANE_TOOL_SHARE = 0.5
# Characters; a shorter text is redacted on the loop. Redaction takes about 0.26 ms per
# 1,000 characters of ordinary text (0.8 ms at 2,000, 4.2 ms at 16,000); a round trip to
# a worker process took 0.5-1 ms (65,000 characters included) on a busy 2-core machine.
LARGE_TEXT = 2_048

P = ParamSpec("P")
T = TypeVar("T")


class Kind(enum.Enum):
    TOOL = "tool"  # time depends on the workspace
    TEXT = "text"  # time bounded by the text's length


_lane: contextvars.ContextVar[str] = contextvars.ContextVar("bot_offload_lane", default="")


def join_lane(name: str) -> None:
    """Count the current context's calls (and those of tasks it starts) as ``name``'s: a
    task's id. Use with ``contextvars.Context.run`` or at the start of an asyncio task."""
    _lane.set(name)


async def run(fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """Tool work: ``fn(*args, **kwargs)`` in a worker process; its result, or its
    exception. Cancelling the caller kills the worker running it."""
    return await _call(Kind.TOOL, fn, args, kwargs)


async def compute(fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """Work on a text in memory, bounded by its length: never waits behind tool work."""
    return await _call(Kind.TEXT, fn, args, kwargs)


async def redact_text(text: str, *, known: Iterable[str] = ()) -> str:
    """``redact``, in a worker process when the text is large."""
    if len(text) < LARGE_TEXT:
        return redact(text, known=known)
    return await compute(redact, text, known=tuple(known))


async def _call(kind: Kind, fn: Callable[..., T], args: Any, kwargs: Any) -> T:
    request = pickle.dumps((fn, args, kwargs))  # before a worker is taken: a bad argument
    pool = _pool()  # fails here, alone
    lane = _lane.get()
    worker = await pool.acquire(kind, lane)
    done = False
    try:
        reply = await worker.call(request)
        done = True
    finally:
        # Not done: cancelled or timed out mid-call, or the worker died: never reused.
        pool.release(worker, kind, lane, reuse=done)
    result: T = answer(reply)
    return result


class _Pool:
    """The workers of one event loop and the calls waiting for them (module docstring)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, idle: list[Worker]) -> None:
        self.loop = loop
        self.idle = idle
        self.busy: set[Worker] = set()
        self.waiting: dict[Kind, dict[str, deque[asyncio.Future[Worker]]]] = {
            Kind.TEXT: {},
            Kind.TOOL: {},
        }
        self.running: Counter[tuple[Kind, str]] = Counter()
        self.served: dict[tuple[Kind, str], int] = {}  # when each lane last got a worker
        self.turns = 0

    async def acquire(self, kind: Kind, lane: str) -> Worker:
        future: asyncio.Future[Worker] = self.loop.create_future()
        self.waiting[kind].setdefault(lane, deque()).append(future)
        self._dispatch()
        try:
            return await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():  # given a worker, then cancelled
                self.release(future.result(), kind, lane, reuse=True)
            else:
                self._forget(kind, lane, future)
            raise

    def release(self, worker: Worker, kind: Kind, lane: str, *, reuse: bool) -> None:
        self.running[kind, lane] -= 1
        if self.running[kind, lane] <= 0:
            del self.running[kind, lane]
            if lane not in self.waiting[kind]:  # idle: nothing to remember it by
                self.served.pop((kind, lane), None)
        self.busy.discard(worker)
        if reuse:
            self.idle.append(worker)
        else:
            worker.kill()
            # The replacement starts now, and is taken last: it needs a moment to boot.
            self.idle.insert(0, Worker.start())
        self._dispatch()

    def close(self) -> None:
        for worker in [*self.idle, *self.busy]:
            worker.kill()
        self.idle, self.busy = [], set()

    def _forget(self, kind: Kind, lane: str, future: asyncio.Future[Worker]) -> None:
        queue = self.waiting[kind].get(lane)
        if queue is not None and future in queue:
            queue.remove(future)
            if not queue:
                del self.waiting[kind][lane]

    def _dispatch(self) -> None:
        """Give free workers to waiting calls: text work first (tool work first while
        none runs), tool work within its bounds; of the lanes waiting, the one served
        longest ago first."""
        while len(self.busy) < WORKERS:
            # Text work first, except that waiting tool work always gets one worker: a
            # stream of text work must not stop every task's tool work either.
            tool_runs = any(k is Kind.TOOL for k, _ in self.running)
            order = (Kind.TEXT, Kind.TOOL) if tool_runs else (Kind.TOOL, Kind.TEXT)
            kind, lane = order[0], self._next(order[0])
            if lane is None:
                kind, lane = order[1], self._next(order[1])
            if lane is None:
                return
            queue = self.waiting[kind][lane]
            future = queue.popleft()
            if not queue:
                del self.waiting[kind][lane]
            if future.done():  # its task was cancelled and has not run since: no worker
                continue
            self.turns += 1
            self.served[kind, lane] = self.turns
            worker = self._take()
            self.busy.add(worker)
            self.running[kind, lane] += 1
            future.set_result(worker)

    def _next(self, kind: Kind) -> str | None:
        """The lane whose call of ``kind`` starts next, if one may start now."""
        lanes = list(self.waiting[kind])
        if kind is Kind.TOOL:
            tool_workers = WORKERS - 1
            if sum(n for (k, _), n in self.running.items() if k is kind) >= tool_workers:
                return None
            share = max(1, int(tool_workers * LANE_TOOL_SHARE))
            lanes = [lane for lane in lanes if self.running[kind, lane] < share]
        # Never served (or not since it was last idle) first; ties in the order they came.
        return min(lanes, key=lambda lane: self.served.get((kind, lane), 0), default=None)

    def _take(self) -> Worker:
        while self.idle:
            worker = self.idle.pop()
            if worker.alive():
                return worker
            worker.kill()  # died while idle: its call would fail for nothing
        return Worker.start()


_pools: dict[asyncio.AbstractEventLoop, _Pool] = {}
_lock = threading.Lock()
_exit_hook: list[bool] = []


def _pool() -> _Pool:
    loop = asyncio.get_running_loop()
    with _lock:
        pool = _pools.get(loop)
        if pool is None:
            idle: list[Worker] = []
            for old_loop, old in list(_pools.items()):
                if old_loop.is_closed():  # its calls are gone: keep its idle workers
                    idle += old.idle
                    old.idle = []
                    old.close()  # a call it never finished: that worker is killed
                    del _pools[old_loop]
            for extra in idle[WORKERS:]:
                extra.kill()
            pool = _pools[loop] = _Pool(loop, idle[:WORKERS])
            if not _exit_hook:
                atexit.register(shutdown)
                _exit_hook.append(True)
        return pool


def shutdown() -> None:
    """Stop the worker processes (they are started again on the next call)."""
    with _lock:
        pools = list(_pools.values())
        _pools.clear()
    for pool in pools:
        pool.close()
