"""Turning traces on and off: ``start`` from the settings (the SDK, an OTLP exporter),
``install`` a provider of one's own (tests: the SDK's in-memory exporter), ``stop``."""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from bot.tracing import core
from bot.tracing.core import TraceOptions
from bot.tracing.deliveries import DeliverySpans, ExportProcess

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider


def install(
    provider: TracerProvider,
    *,
    capture_content: bool = False,
    secrets: Sequence[str] = (),
    sample_ratio: float = 1.0,
) -> None:
    """Trace into ``provider`` (its sampler's ratio ``sample_ratio``); ``uninstall``
    forgets it without shutting it down."""
    _set(provider, capture_content=capture_content, secrets=secrets, owned=False,
         ratio=sample_ratio)  # fmt: skip


def uninstall() -> None:
    core.activate(None)


def _set(
    provider: TracerProvider,
    *,
    capture_content: bool,
    secrets: Sequence[str],
    owned: bool,
    deliveries: DeliverySpans | None = None,
    ratio: float = 1.0,
) -> None:
    tracer = provider.get_tracer("bot")
    kept = tuple(s for s in secrets if s)
    core.activate(core.On(tracer, provider, capture_content, kept, owned, deliveries, ratio))


def start(options: TraceOptions, environ: Mapping[str, str]) -> str:
    """Turn traces on with ``options``; returns the line to log. Without the SDK
    installed (or with a setting it cannot use) traces stay off, and the line says so."""
    try:  # from sys.modules, or imported now: fails without the SDK
        sdk = importlib.import_module("bot.tracing.sdk")
    except ImportError as exc:
        return (
            f"observability.traces.enabled is on, but the OpenTelemetry SDK is not installed "
            f"(no module {exc.name or exc}): running WITHOUT traces; install the traces "
            "extra: pip install -e '.[traces]'"
        )
    try:
        provider, said = sdk.provider(options, environ)
    except ValueError as exc:
        return f"traces could not start: {exc}: running WITHOUT traces"
    lean = _delivery_spans(options, environ, delay=sdk.schedule_delay(environ))
    _set(provider, capture_content=options.capture_content, secrets=options.secrets,
         owned=True, deliveries=lean, ratio=options.sample_ratio)  # fmt: skip
    return str(said)


def _delivery_spans(
    options: TraceOptions, environ: Mapping[str, str], *, delay: float
) -> DeliverySpans | None:
    """The lean recorder of webhook deliveries' spans, exported over OTLP/HTTP by a process
    of its own like the SDK's exporter would (None with gRPC: deliveries get SDK spans)."""
    from bot.tracing import sdk

    protocol = sdk.protocol_of(options, environ)
    if protocol != sdk.HTTP:
        return None
    resource = sdk.resource(options, environ).attributes
    config = {
        "endpoint": sdk.endpoint_of(options, environ, protocol),
        "headers": sdk.headers_of(environ),
        "timeout": sdk.timeout_of(environ),
        "compression": sdk.compression_of(environ),
        "ratio": options.sample_ratio,
        "resource": {k: v for k, v in resource.items() if isinstance(v, str | bool | int | float)},
    }
    process = ExportProcess(config)
    return DeliverySpans(options.sample_ratio, process.send, delay=delay, on_close=process.close)


def stop() -> None:
    """Export what is left and turn traces off (blocks up to the exporter's timeout: call
    it in a thread from the event loop)."""
    on = core.activate(None)
    if on is not None and on.owned:
        if on.deliveries is not None:
            on.deliveries.close()
        on.provider.shutdown()
