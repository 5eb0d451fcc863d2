"""The OpenTelemetry SDK's side of traces: the provider, its sampler and its exporter.

Imported only when ``observability.traces.enabled`` turns traces on (``bot.tracing.start``);
importing it without the SDK installed raises ``ImportError``, which ``start`` reports.
The exporter speaks OTLP over HTTP/protobuf (gRPC when its package is installed).
Headers come from the environment only (``OTEL_EXPORTER_OTLP_TRACES_HEADERS``, else
``OTEL_EXPORTER_OTLP_HEADERS``): ``config.yaml`` never holds a collector's credentials.
"""

from __future__ import annotations

from collections.abc import Mapping

from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
from opentelemetry.util.re import parse_env_headers

from bot.tracing.core import TraceOptions

HTTP = "http/protobuf"
GRPC = "grpc"
TRACES_PATH = "/v1/traces"
DEFAULT_HTTP = "http://localhost:4318"
DEFAULT_GRPC = "http://localhost:4317"


def protocol_of(options: TraceOptions, environ: Mapping[str, str]) -> str:
    chosen = (
        options.protocol
        or environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        or environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or HTTP
    )
    if chosen not in (HTTP, GRPC):
        raise ValueError(f"OTLP protocol {chosen!r} is not {HTTP} or {GRPC}")
    return chosen


def endpoint_of(options: TraceOptions, environ: Mapping[str, str], protocol: str) -> str:
    """Where spans go: the configured base URL (``/v1/traces`` added for HTTP), else the
    signal's own variable as it is, else the general one (path added), else localhost."""
    grpc = protocol == GRPC
    if options.endpoint:
        return options.endpoint if grpc else _with_path(options.endpoint)
    signal = environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
    if signal:
        return signal
    general = environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
    if general:
        return general if grpc else _with_path(general)
    return DEFAULT_GRPC if grpc else DEFAULT_HTTP + TRACES_PATH


def _with_path(base: str) -> str:
    base = base.rstrip("/")
    return base if base.endswith(TRACES_PATH) else base + TRACES_PATH


def headers_of(environ: Mapping[str, str]) -> dict[str, str]:
    text = environ.get("OTEL_EXPORTER_OTLP_TRACES_HEADERS") or environ.get(
        "OTEL_EXPORTER_OTLP_HEADERS", ""
    )
    return dict(parse_env_headers(text, liberal=True)) if text else {}


def exporter(options: TraceOptions, environ: Mapping[str, str]) -> tuple[SpanExporter, str]:
    """The OTLP exporter and where it sends (for the start-up line; never the headers)."""
    protocol = protocol_of(options, environ)
    endpoint = endpoint_of(options, environ, protocol)
    headers = headers_of(environ)
    if protocol == GRPC:
        try:
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (  # type: ignore[import-not-found]
                OTLPSpanExporter as GrpcExporter,
            )
        except ImportError:
            raise ValueError(
                "observability.traces.protocol is grpc, but the package "
                "opentelemetry-exporter-otlp-proto-grpc is not installed (or use http/protobuf)"
            ) from None
        return GrpcExporter(endpoint=endpoint, headers=headers or None), endpoint
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter(endpoint=endpoint, headers=headers or None), endpoint


def service_name(options: TraceOptions, environ: Mapping[str, str]) -> str:
    return environ.get("OTEL_SERVICE_NAME") or options.service_name


def resource(options: TraceOptions, environ: Mapping[str, str]) -> Resource:
    return Resource.create({SERVICE_NAME: service_name(options, environ)})


def timeout_of(environ: Mapping[str, str]) -> float:
    """Seconds an export may take (``OTEL_EXPORTER_OTLP_(TRACES_)TIMEOUT``; default 10)."""
    text = environ.get("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT") or environ.get(
        "OTEL_EXPORTER_OTLP_TIMEOUT", ""
    )
    try:
        return max(float(text), 0.1) if text else 10.0
    except ValueError:
        return 10.0


def compression_of(environ: Mapping[str, str]) -> str:
    """``gzip`` or "" (``OTEL_EXPORTER_OTLP_(TRACES_)COMPRESSION``)."""
    text = environ.get("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION") or environ.get(
        "OTEL_EXPORTER_OTLP_COMPRESSION", ""
    )
    return "gzip" if text.strip().lower() == "gzip" else ""


def schedule_delay(environ: Mapping[str, str]) -> float:
    """Seconds between exports (``OTEL_BSP_SCHEDULE_DELAY``, milliseconds; default 5 s)."""
    try:
        return max(int(environ.get("OTEL_BSP_SCHEDULE_DELAY", "5000")), 1) / 1000
    except ValueError:
        return 5.0


def provider(options: TraceOptions, environ: Mapping[str, str]) -> tuple[TracerProvider, str]:
    """A provider sampling ``sample_ratio`` of new traces (a trace begun elsewhere keeps
    its parent's decision), exporting in batches off the event loop."""
    name = service_name(options, environ)
    sampler = ParentBased(TraceIdRatioBased(options.sample_ratio))
    made = TracerProvider(resource=resource(options, environ), sampler=sampler)
    sender, endpoint = exporter(options, environ)
    made.add_span_processor(BatchSpanProcessor(sender))
    said = (
        f"traces on: OTLP {protocol_of(options, environ)} to {endpoint} as {name}, "
        f"sampling {options.sample_ratio:g}"
        + (", with prompt and completion text" if options.capture_content else "")
    )
    return made, said
