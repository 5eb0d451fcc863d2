"""The tracing core: spans, the run's span, the context kept in stored payloads.

While traces are off nothing here imports OpenTelemetry: ``span`` hands back one shared
no-op context manager whose span records nothing, and callers do costly attribute work
(redaction, content) only when ``Span.recording``. ``start`` turns traces on with the
SDK (``bot.tracing.sdk``); tests ``install`` a provider of their own.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Awaitable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from contextvars import ContextVar
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any, TypeVar

from bot.redact import redact
from bot.text import clip

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Span as OtelSpan
    from opentelemetry.trace import Tracer

T = TypeVar("T")
Value = str | bool | int | float | Sequence[str] | Sequence[int] | Sequence[float]
Attributes = Mapping[str, Value | None]
Carrier = Mapping[str, str]

TRACEPARENT = "traceparent"
_TRACEPARENT = re.compile(r"^[0-9a-f]{2}-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$")
TEXT_CHARS = 1000  # arguments, commands and captured content, per attribute


class Kind(Enum):
    INTERNAL = "internal"
    SERVER = "server"
    CLIENT = "client"


class Span:
    """A span as the bot's code sees it. This one records nothing: traces are off, or
    the span was not sampled."""

    __slots__ = ()

    @property
    def recording(self) -> bool:
        return False

    @property
    def trace_id(self) -> str:
        return ""

    def set(self, key: str, value: Value | None) -> None:
        """Set one attribute (None: leave it out)."""

    def update(self, attributes: Mapping[str, Value | None]) -> None:
        """Set several attributes (None values are left out)."""

    def fail(self, error_type: str) -> None:
        """Mark the span failed with a short, low-cardinality ``error.type``."""

    def rename(self, name: str) -> None:
        """Name the span by what it turned out to be (a forge call's route)."""


class _Live(Span):
    __slots__ = ("_span",)

    def __init__(self, span: OtelSpan) -> None:
        self._span = span

    @property
    def recording(self) -> bool:
        return self._span.is_recording()

    @property
    def trace_id(self) -> str:
        return f"{self._span.get_span_context().trace_id:032x}"

    def set(self, key: str, value: Value | None) -> None:
        if value is not None:
            self._span.set_attribute(key, _plain(value))

    def update(self, attributes: Mapping[str, Value | None]) -> None:
        self._span.set_attributes(_clean(attributes) or {})

    def fail(self, error_type: str) -> None:
        from opentelemetry.trace import Status, StatusCode

        self._span.set_attribute("error.type", error_type)
        self._span.set_status(Status(StatusCode.ERROR, error_type))

    def rename(self, name: str) -> None:
        self._span.update_name(name)


NOOP = Span()


class _NoSpan(AbstractContextManager[Span]):
    """The one context manager ``span`` hands out while traces are off."""

    def __enter__(self) -> Span:
        return NOOP

    def __exit__(self, *exc: object) -> None:
        return None


_NO_SPAN = _NoSpan()


@dataclass(frozen=True)
class On:
    tracer: Tracer
    provider: TracerProvider
    capture_content: bool
    secrets: tuple[str, ...]
    owned: bool  # started by ``switch.start`` (``stop`` shuts it down), not ``install``ed
    # Webhook deliveries' lean spans (bot.tracing.deliveries); None: SDK spans (tests).
    deliveries: Any = None
    ratio: float = 1.0  # the sampling ratio (the worker's parent of a delivery's row)


_on: On | None = None
# The spans of the current run that end when the run does (``until_run_ends``).
_pending: ContextVar[list[OtelSpan] | None] = ContextVar("bot_trace_pending", default=None)


def active() -> On | None:
    """What traces with (None: off)."""
    return _on


def enabled() -> bool:
    return _on is not None


def capture_content() -> bool:
    """Whether prompt and completion text go into spans (``observability.capture_content``)."""
    return _on is not None and _on.capture_content


def span(
    name: str,
    attributes: Mapping[str, Value | None] | None = None,
    *,
    kind: Kind = Kind.INTERNAL,
    parent: Carrier | None = None,
    links: Sequence[Carrier] = (),
    expected: tuple[type[BaseException], ...] = (),
) -> AbstractContextManager[Span]:
    """A span around the ``with`` block, the child of the current one (or of ``parent``, a
    carrier from ``inject``; an empty one starts a new trace). An exception leaving the
    block marks it failed by its type alone (never its message), unless it is
    ``expected`` (the agent's typed exits) or a cancellation."""
    if _on is None:
        return _NO_SPAN
    return _live(_on, name, attributes, kind, parent, links, expected, run=False)


def run(
    name: str,
    attributes: Mapping[str, Value | None] | None = None,
    *,
    parent: Carrier | None = None,
    links: Sequence[Carrier] = (),
) -> AbstractContextManager[Span]:
    """``span`` around a task's run: the spans ``until_run_ends`` opens inside it end
    when it ends."""
    if _on is None:
        return _NO_SPAN
    return _live(_on, name, attributes, Kind.INTERNAL, parent, links, (), run=True)


async def stage(name: str, work: Awaitable[T], *expected: type[BaseException]) -> T:
    """Await ``work`` (one turn of the agent's stage ``name``) in a span ``stage <name>``."""
    if _on is None:
        return await work
    with span(f"stage {name}", {"bot.stage": str(name)}, expected=expected):
        return await work


def until_run_ends(name: str, attributes: Mapping[str, Value | None] | None = None) -> None:
    """Open a span now (a wait for people) that ends with the current run."""
    on = _on
    if on is None:
        return
    started = on.tracer.start_span(name, attributes=_clean(attributes))
    pending = _pending.get()
    if pending is None:  # not inside a run: a moment
        started.end()
    else:
        pending.append(started)


@contextlib.contextmanager
def _live(
    on: On,
    name: str,
    attributes: Mapping[str, Value | None] | None,
    kind: Kind,
    parent: Carrier | None,
    links: Sequence[Carrier],
    expected: tuple[type[BaseException], ...],
    *,
    run: bool,
) -> Iterator[Span]:
    from opentelemetry import context as otel_context
    from opentelemetry import trace

    context = _extract(parent) if parent is not None else None
    started = on.tracer.start_span(
        name, context=context, kind=_kind(kind), attributes=_clean(attributes),
        links=_links(links),
    )  # fmt: skip
    token = otel_context.attach(trace.set_span_in_context(started))
    pending_token = _pending.set([]) if run else None
    try:
        yield _Live(started)
    except BaseException as exc:
        if not isinstance(exc, expected):
            _failed(started, exc)
        raise
    finally:
        if pending_token is not None:
            for waiting in _pending.get() or []:
                waiting.end()
            _pending.reset(pending_token)
        otel_context.detach(token)
        started.end()


def _failed(started: OtelSpan, exc: BaseException) -> None:
    if isinstance(exc, asyncio.CancelledError | GeneratorExit | KeyboardInterrupt):
        started.set_attribute("bot.cancelled", True)
        return
    _Live(started).fail(type(exc).__qualname__)


def _kind(kind: Kind) -> Any:
    from opentelemetry.trace import SpanKind

    return {
        Kind.INTERNAL: SpanKind.INTERNAL,
        Kind.SERVER: SpanKind.SERVER,
        Kind.CLIENT: SpanKind.CLIENT,
    }[kind]


def _clean(attributes: Mapping[str, Value | None] | None) -> dict[str, Value] | None:
    """The attributes with a value, the bot's enums as their plain strings."""
    if not attributes:
        return None
    return {k: _plain(v) for k, v in attributes.items() if v is not None}


def _plain(value: Value) -> Value:
    return value.value if isinstance(value, Enum) else value


# --- context kept in stored payloads -----------------------------------------------------


def inject() -> dict[str, str]:
    """The current span's context as a carrier (``{"traceparent": ...}``), to keep with
    what another process picks up; ``{}`` while traces are off or outside a span."""
    if _on is None:
        return {}
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    carrier: dict[str, str] = {}
    TraceContextTextMapPropagator().inject(carrier)
    return carrier


def traceparent() -> str:
    """The current span's ``traceparent`` ("" while off or outside a span)."""
    return inject().get(TRACEPARENT, "")


def trace_id_of(traceparent: str) -> str:
    """The trace id (32 hex digits) in a ``traceparent``, "" when it is not one. Works
    with traces off: the web process shows the ids its workers recorded."""
    found = _TRACEPARENT.match(traceparent.strip())
    if found is None or found[1] == "0" * 32:
        return ""
    return found[1]


def carrier(value: object) -> dict[str, str]:
    """A stored carrier read back, with nothing but string values kept ({} for anything
    else: a payload from before traces, or one written by hand)."""
    if not isinstance(value, Mapping):
        return {}
    return {k: v for k, v in value.items() if isinstance(k, str) and isinstance(v, str)}


def _extract(carrier: Carrier) -> Any:
    from opentelemetry.context import Context
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    return TraceContextTextMapPropagator().extract(carrier, context=Context())


def _links(carriers: Sequence[Carrier]) -> list[Any] | None:
    if not carriers:
        return None
    from opentelemetry import trace

    found = []
    for item in carriers:
        context = trace.get_current_span(_extract(item)).get_span_context()
        if context.is_valid:
            found.append(trace.Link(context))
    return found or None


def note(attributes: Mapping[str, Value | None]) -> None:
    """Set attributes on the current span (nothing while traces are off)."""
    if _on is None:
        return
    from opentelemetry import trace

    trace.get_current_span().set_attributes(_clean(attributes) or {})


# --- text that may go into a span ----------------------------------------------------------


def clean_text(text: str, *, known: Sequence[str] = (), limit: int = TEXT_CHARS) -> str:
    """``text`` redacted (the configured secrets, ``known`` and every pattern of
    ``bot.redact``) and cut to ``limit`` characters. It is cut to twice that first, so a
    large text costs little: a secret cut there lies past ``limit`` and is cut away."""
    secrets = (*known, *(_on.secrets if _on is not None else ()))
    return clip(redact(text[: 2 * limit], known=secrets), limit)


@dataclass(frozen=True)
class TraceOptions:
    """What ``observability`` says, with the secrets spans must never show."""

    endpoint: str = ""  # the OTLP base URL ("": the environment's, else localhost)
    protocol: str = ""  # http/protobuf or grpc ("": OTEL_EXPORTER_OTLP_PROTOCOL, else http)
    service_name: str = "coding-agent-bot"
    sample_ratio: float = 1.0
    capture_content: bool = False
    secrets: tuple[str, ...] = ()


def activate(on: On | None) -> On | None:
    """Trace with ``on`` (None: off); returns what was active (``bot.tracing.switch``)."""
    global _on
    previous, _on = _on, on
    return previous
