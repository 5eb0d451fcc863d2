"""The tracing core: spans, the run's span, the current context as a carrier.

While traces are off nothing here imports OpenTelemetry: ``span`` hands back one shared
no-op context manager whose span records nothing, and callers do costly attribute work
(redaction, content) only when ``Span.recording``. ``start`` turns traces on with the
SDK (``bot.tracing.sdk``); tests ``install`` a provider of their own.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from bot.redact import redact
from bot.text import clip
from bot.tracing.carriers import TRACEPARENT, Carrier, context_of, links_of
from bot.tracing.handle import _NO_SPAN, Kind, LiveSpan, Span, Value, plain_attributes

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Span as OtelSpan
    from opentelemetry.trace import Tracer

T = TypeVar("T")

TEXT_CHARS = 1000  # arguments, commands and captured content, per attribute


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
    started = on.tracer.start_span(name, attributes=plain_attributes(attributes))
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

    context = context_of(parent) if parent is not None else None
    started = on.tracer.start_span(
        name, context=context, kind=_kind(kind), attributes=plain_attributes(attributes),
        links=links_of(links),
    )  # fmt: skip
    token = otel_context.attach(trace.set_span_in_context(started))
    pending_token = _pending.set([]) if run else None
    try:
        yield LiveSpan(started)
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
    LiveSpan(started).fail(type(exc).__qualname__)


def _kind(kind: Kind) -> Any:
    from opentelemetry.trace import SpanKind

    return {
        Kind.INTERNAL: SpanKind.INTERNAL,
        Kind.SERVER: SpanKind.SERVER,
        Kind.CLIENT: SpanKind.CLIENT,
    }[kind]


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


def note(attributes: Mapping[str, Value | None]) -> None:
    """Set attributes on the current span (nothing while traces are off)."""
    if _on is None:
        return
    from opentelemetry import trace

    trace.get_current_span().set_attributes(plain_attributes(attributes) or {})


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
