"""Webhook deliveries' spans, lean: the ack path records each one as a tuple, and a process
of its own encodes and exports them.

The ack path is the bot's hot path (every comment on every installed repository). An SDK
span and the SDK's OTLP encoding of it cost more there than the rest of the delivery's
handling, and even a lean encoding and its HTTP requests, done in this process, take the
GIL from the event loop for a measurable share (``bench/trace_overhead.py``). So while
traces are on (OTLP/HTTP), the ack path records a delivery's span as what it has at hand:
its clock readings, the route, the event, the status and outcome, the delivery's id and
key, in a tuple appended to a queue. No id is made and nothing is formatted or added to
the inbox row: the ids are derived from the key (``bot.tracing.ids``), by the export
process and, for the row, by the worker. A thread hands the recorded spans in batches
(``marshal``: a C copy of plain tuples) through a pipe to ``bot.tracing.export_proc``,
which derives their ids, samples them by the SDK's rule, writes them as OTLP protobuf
(``bot.tracing.otlp``) and sends them. A full queue drops spans (counted), never makes a
delivery wait.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import marshal
import struct
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from contextvars import ContextVar, Token
from typing import Any

from bot.tracing import ids
from bot.tracing.handle import Span, Value

log = logging.getLogger("bot.tracing")

MAX_QUEUE = 8192  # recorded spans waiting for their export; beyond, dropped
BATCH = 512
# A recorded span: the route and the forge, start and end (ns), the event, the action,
# the status and the bot's outcome, the delivery's id, its key (ids.py derives the span's
# ids from it), any other attributes (``()``: none), the error type.
Recorded = tuple[
    str, str, int, int, str, str, int, str, str, str, dict[str, Value] | tuple[()], str
]

# A delivery with no other attribute: a recorded span of plain strings and numbers only,
# which the garbage collector stops tracking (a dict would keep it tracked).
_NONE: tuple[()] = ()
_time_ns = time.time_ns


class Delivery(Span):
    """One delivery's span: the context manager around its handling, and the ``Span``
    the webhook code sees. On the request path it is a few stores of what is at hand (two
    clock readings, what the delivery is and what it got) and a tuple appended to a
    queue: its ids are derived from its key later, in the export process."""

    __slots__ = ("_action", "_delivery", "_error", "_event", "_extra", "_forge", "_key",
                 "_outcome", "_recorder", "_route", "_start", "_status", "_token")  # fmt: skip

    def __init__(self, recorder: DeliverySpans, route: str, forge: str) -> None:
        self._recorder = recorder
        self._route = route
        self._forge = forge
        self._extra: dict[str, Value] | tuple[()] = _NONE  # a dict once something is set
        self._error = self._event = self._action = self._outcome = self._delivery = ""
        self._key = ""
        self._status = 0

    @property
    def name(self) -> str:
        return f"POST {self._route}"

    def __enter__(self) -> Delivery:
        self._token: Token[Delivery | None] = _current.set(self)
        self._start = _time_ns()
        return self

    def __exit__(self, kind: type[BaseException] | None, *rest: object) -> None:
        end = _time_ns()
        _current.reset(self._token)
        if kind is not None and not issubclass(kind, asyncio.CancelledError):
            self._error = kind.__qualname__
        self._recorder.keep((self._route, self._forge, self._start, end, self._event,
                             self._action, self._status, self._outcome, self._delivery,
                             self._key, self._extra, self._error))  # fmt: skip

    def delivered(self, event: str, action: str, delivery: str, key: str) -> None:
        """What the delivery is, and its key (the inbox row's)."""
        self._event, self._action, self._delivery, self._key = event, action, delivery, key

    def answered(self, status: int, outcome: str) -> None:
        self._status, self._outcome = status, outcome

    @property
    def recording(self) -> bool:
        """Whether it is sampled: known from its key (before the key, from the ratio)."""
        limit = self._recorder.bound
        if not self._key:
            return limit > 0
        return ids.sampled(ids.derived(self._key.encode("utf-8")), limit)

    @property
    def trace_id(self) -> str:
        """The trace id derived from its key ("" before the key is known)."""
        return ids.derived(self._key.encode("utf-8"))[:16].hex() if self._key else ""

    @property
    def traceparent(self) -> str:
        """The context the worker continues for the row this delivery makes."""
        return ids.traceparent(self._key, self._recorder.ratio) if self._key else ""

    def set(self, key: str, value: Value | None) -> None:
        self.update({key: value})

    def update(self, attributes: Mapping[str, Value | None]) -> None:
        extra = self._extra
        if not isinstance(extra, dict):
            extra = self._extra = {}
        for key, value in attributes.items():
            if value is not None:
                extra[key] = value

    def fail(self, error_type: str) -> None:
        self._error = error_type


_current: ContextVar[Delivery | None] = ContextVar("bot_trace_delivery", default=None)


def current() -> Delivery | None:
    """The delivery being handled in this context, if its span is a lean one."""
    return _current.get()


class DeliverySpans:
    """Records delivery spans; a thread hands them to ``send`` in batches (the export
    process derives their ids and samples them: ``bot.tracing.ids``)."""

    def __init__(
        self,
        ratio: float,
        send: Callable[[list[Recorded]], None],
        *,
        delay: float,
        on_close: Callable[[], None] = lambda: None,
    ) -> None:
        self.ratio = ratio
        self.bound = ids.bound(ratio)
        if not self.bound:  # nothing is ever sampled: nothing is kept
            self.keep = self._drop  # type: ignore[method-assign]
        self._send = send  # a batch -> its export (in this recorder's thread)
        self._on_close = on_close
        self._delay = delay
        self._pending: deque[Recorded] = deque()  # appended by the loop, taken by the thread
        self._wake = threading.Event()
        self._closed = False
        self.dropped = 0
        self._thread = threading.Thread(target=self._run, name="bot-trace-deliveries",
                                        daemon=True)  # fmt: skip
        self._thread.start()

    def delivery(self, route: str, forge: str) -> Delivery:
        """The span for one delivery to ``route`` (entered by ``with``)."""
        return Delivery(self, route, forge)

    def keep(self, recorded: Recorded) -> None:
        pending = self._pending
        if len(pending) >= MAX_QUEUE:
            self.dropped += 1
            return
        pending.append(recorded)
        if len(pending) % BATCH == 0:  # a batch more: the thread sends all there is
            self._wake.set()

    def _drop(self, recorded: Recorded) -> None:
        return None

    def _run(self) -> None:
        while not self._closed:
            self._wake.wait(self._delay)
            self._wake.clear()
            self._flush()

    def _flush(self) -> None:
        pending = self._pending
        while pending:
            batch = [pending.popleft() for _ in range(min(BATCH, len(pending)))]
            try:
                self._send(batch)
            except Exception:  # an export's trouble must not end the thread
                self.dropped += len(batch)
                log.exception("traces: %d delivery spans not exported", len(batch))

    def close(self) -> None:
        """Export what is recorded and stop."""
        self._closed = True
        self._wake.set()
        self._thread.join(10)
        self._flush()
        if self.dropped:
            log.warning("traces: %d delivery spans were dropped", self.dropped)
        self._on_close()


class ExportProcess:
    """``bot.tracing.export_proc`` in a process of its own, fed batches through its stdin
    (started with the first batch, again after it ended; ``send`` from one thread)."""

    def __init__(self, config: dict[str, Any]) -> None:
        self._config = marshal.dumps(config)
        self._process: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()  # a frame is written whole before the pipe closes
        self._closed = False

    def send(self, batch: list[Recorded]) -> None:
        data = marshal.dumps(batch)
        with self._lock:
            if self._closed:
                raise ValueError("the export process is closed")
            process = self._process
            if process is None or process.poll() is not None:
                process = self._process = self._start()
            assert process.stdin is not None
            process.stdin.write(struct.pack("!I", len(data)) + data)  # lets the GIL go
            process.stdin.flush()

    def _start(self) -> subprocess.Popen[bytes]:
        command = [sys.executable, "-m", "bot.tracing.export_proc"]
        process = subprocess.Popen(command, stdin=subprocess.PIPE)
        assert process.stdin is not None
        process.stdin.write(struct.pack("!I", len(self._config)) + self._config)
        return process

    def close(self, timeout: float = 15.0) -> None:
        """Let it send what it holds and end (killed after ``timeout``)."""
        with self._lock:
            self._closed = True
            process, self._process = self._process, None
        if process is None:
            return
        with contextlib.suppress(OSError):
            assert process.stdin is not None
            process.stdin.close()
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
