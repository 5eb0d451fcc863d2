"""CPU work on large text, off the event loop, in a few threads at most.

One process serves webhooks and runs tasks. A thread running Python code holds the GIL
in turns of ``sys.getswitchinterval()``, and the event loop waits for its turn behind
every such thread; with the default executor's threads (cores + 4) all searching and
reading files, each wake-up of the loop waited several turns, and a webhook's answer
took tens of milliseconds longer. Tool work and the redaction of large texts run here
instead: at most ``WORKERS`` threads, whatever the number of tasks (the GIL lets one run
at a time anyway, so more threads only make the loop wait longer).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

from bot.redact import redact

# One thread: measured with bench/ack_under_work.py, two threads did a third of the tool
# calls per second (1.6 against 5.1) for the same webhook p99, fighting over the GIL.
WORKERS = 1
# Characters; a shorter text is redacted on the loop. Redaction takes about 0.26 ms per
# 1,000 characters of ordinary text (0.8 ms at 2,000, 4.2 ms at 16,000): moving texts over
# 2,000 off the loop cut the webhook p99 under tool load from 20 to 17 ms.
LARGE_TEXT = 2_048

P = ParamSpec("P")
T = TypeVar("T")
_pool: ThreadPoolExecutor | None = None


def _executor() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="bot-offload")
    return _pool


async def run(fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """``fn(*args, **kwargs)`` in one of the offload threads (with this task's context)."""
    call = functools.partial(contextvars.copy_context().run, fn, *args, **kwargs)
    return await asyncio.get_running_loop().run_in_executor(_executor(), call)


async def redact_text(text: str, *, known: Iterable[str] = ()) -> str:
    """``redact``, in an offload thread when the text is large."""
    if len(text) < LARGE_TEXT:
        return redact(text, known=known)
    return await run(redact, text, known=tuple(known))
