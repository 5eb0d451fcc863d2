"""Webhook deliveries' spans, lean: the ack path records each one as a tuple, and a process
of its own encodes and exports them.

The ack path is the bot's hot path (every comment on every installed repository). An SDK
span and the SDK's OTLP encoding of it cost more there than the rest of the delivery's
handling, and even a lean encoding and its HTTP requests, done in this process, take the
GIL from the event loop for a measurable share (``bench/trace_overhead.py``). So while
traces are on (OTLP/HTTP), a delivery's span is ids, times and a few attributes: sampled by
the SDK's rule (the trace id against the ratio), its context propagated as usual; a thread
makes the ids (and their ``traceparent``) ahead of the deliveries that take them, and hands
the recorded spans in batches (``marshal``: a C copy of plain tuples) through a pipe to
``bot.tracing.export_proc``, which writes them as OTLP protobuf (``bot.tracing.otlp``) and
sends them. A full queue drops spans (counted), never makes a delivery wait.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import marshal
import random
import struct
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from contextvars import ContextVar, Token
from typing import Any

from bot.tracing.core import Span, Value

log = logging.getLogger("bot.tracing")

MAX_QUEUE = 8192  # recorded spans waiting for their export; beyond, dropped
BATCH = 512
MADE = 2048  # ids made ahead by the recorder's thread (it wakes once per BATCH spans)
_MASK = (1 << 64) - 1
Base = tuple[tuple[str, Value], ...]  # the attributes every delivery of a route has
# What most deliveries share: the event, the action, the status and the bot's outcome.
Common = tuple[str, str, int, str]
# A recorded span: trace id, span id, name, kind, start and end (ns), the route's
# attributes, the common ones, the delivery's id, any other attributes, the error type.
Recorded = tuple[int, int, str, str, int, int, Base, Common, str, dict[str, Value], str]


# A delivery's ids made ahead: trace id, span id, its traceparent, whether it is sampled.
Ids = tuple[int, int, str, bool]

_NONE: dict[str, Value] = {}  # never written: a delivery with no other attribute shares it
_getrandbits = random.getrandbits
_time_ns = time.time_ns


class Delivery(Span):
    """One delivery's span: the context manager around its handling, and the ``Span``
    the webhook code sees. On the request path it is a few stores: its ids and their
    ``traceparent`` (made ahead by the recorder's thread: one random number for both ids,
    the trace id its high 128 bits, the span id its low 64), two clock readings, what the
    delivery is and what it got; everything else happens in the export process."""

    __slots__ = ("_action", "_delivery", "_error", "_event", "_extra", "_ids", "_outcome",
                 "_parent", "_recorder", "_route", "_sampled", "_span", "_start", "_status",
                 "_token", "_trace")  # fmt: skip

    def __init__(self, recorder: DeliverySpans, route: tuple[str, Base]) -> None:
        self._recorder = recorder
        self._route = route  # the span's name and the route's attributes
        self._extra: dict[str, Value] = _NONE  # a dict of its own once something is set
        self._error = self._event = self._action = self._outcome = self._delivery = ""
        self._status = 0

    @property
    def name(self) -> str:
        return self._route[0]

    def __enter__(self) -> Delivery:
        try:  # ids the recorder's thread made beforehand, off the request path
            self._trace, self._span, self._parent, self._sampled = self._recorder.made.pop()
        except IndexError:  # a burst used them all: made here
            self._trace, self._span, self._parent, self._sampled = self._recorder.ids()
        self._token: Token[Delivery | None] = _current.set(self)
        self._start = _time_ns()
        return self

    def __exit__(self, kind: type[BaseException] | None, *rest: object) -> None:
        end = _time_ns()
        _current.reset(self._token)
        if kind is not None and not issubclass(kind, asyncio.CancelledError):
            self._error = kind.__qualname__
        if self._sampled:
            name, base = self._route
            common = (self._event, self._action, self._status, self._outcome)
            self._recorder.keep((self._trace, self._span, name, "server", self._start, end, base,
                                 common, self._delivery, self._extra, self._error))  # fmt: skip

    def delivered(self, event: str, action: str, delivery: str) -> str:
        """What the delivery is; its ``traceparent``."""
        self._event, self._action, self._delivery = event, action, delivery
        return self._parent

    def answered(self, status: int, outcome: str) -> None:
        self._status, self._outcome = status, outcome

    @property
    def recording(self) -> bool:
        return self._sampled

    @property
    def trace_id(self) -> str:
        return self._parent[3:35]

    @property
    def traceparent(self) -> str:
        return self._parent

    def set(self, key: str, value: Value | None) -> None:
        self.update({key: value})

    def update(self, attributes: Mapping[str, Value | None]) -> None:
        if self._extra is _NONE:
            self._extra = {}
        for key, value in attributes.items():
            if value is not None:
                self._extra[key] = value

    def fail(self, error_type: str) -> None:
        self._error = error_type


_current: ContextVar[Delivery | None] = ContextVar("bot_trace_delivery", default=None)


def current() -> Delivery | None:
    """The delivery being handled in this context, if its span is a lean one."""
    return _current.get()


class DeliverySpans:
    """Records delivery spans; a thread hands them to ``send`` in batches."""

    def __init__(
        self,
        ratio: float,
        send: Callable[[list[Recorded]], None],
        *,
        delay: float,
        on_close: Callable[[], None] = lambda: None,
    ) -> None:
        self.bound = round(ratio * (_MASK + 1))  # the SDK's TraceIdRatioBased rule
        self._send = send  # a batch -> its export (in this recorder's thread)
        self._on_close = on_close
        self._delay = delay
        self._routes: dict[tuple[str, str], tuple[str, Base]] = {}
        # Ids for the next deliveries, made by the thread (popped by the loop).
        self.made: deque[Ids] = deque(self.ids() for _ in range(MADE))
        self._pending: deque[Recorded] = deque()  # appended by the loop, taken by the thread
        self._wake = threading.Event()
        self._closed = False
        self.dropped = 0
        self._thread = threading.Thread(target=self._run, name="bot-trace-deliveries",
                                        daemon=True)  # fmt: skip
        self._thread.start()

    def delivery(self, route: str, forge: str) -> Delivery:
        """The span for one delivery to ``route`` (entered by ``with``)."""
        known = self._routes.get((route, forge))
        if known is None:
            base: Base = (("http.request.method", "POST"), ("http.route", route),
                          ("bot.forge", forge))  # fmt: skip
            known = self._routes[(route, forge)] = (f"POST {route}", base)
        return Delivery(self, known)

    def keep(self, recorded: Recorded) -> None:
        pending = self._pending
        if len(pending) >= MAX_QUEUE:
            self.dropped += 1
            return
        pending.append(recorded)
        if len(pending) % BATCH == 0:  # a batch more: the thread sends all there is
            self._wake.set()

    def ids(self) -> Ids:
        """A delivery's trace and span ids (random, never zero), its ``traceparent`` and
        whether it is sampled (the SDK's rule: the trace id's low 64 bits against the
        ratio)."""
        ids = _getrandbits(192)
        while not ids >> 64 or not ids & _MASK:  # neither id may be zero
            ids = _getrandbits(192)
        trace = ids >> 64
        sampled = self.bound > _MASK or (trace & _MASK) < self.bound
        hexed = ids.to_bytes(24, "big").hex()
        return (
            trace,
            ids & _MASK,
            f"00-{hexed[:32]}-{hexed[32:]}-{'01' if sampled else '00'}",
            sampled,
        )

    def _run(self) -> None:
        while not self._closed:
            self._wake.wait(self._delay)
            self._wake.clear()
            self._flush()
            made = self.made
            made.extend(self.ids() for _ in range(MADE - len(made)))

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
