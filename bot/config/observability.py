"""The ``observability:`` section: OpenTelemetry traces of every run (docs/traces.md).

Off by default. ``traces`` names where spans go over OTLP; the collector's credentials
(headers) are read from the environment only (``OTEL_EXPORTER_OTLP_HEADERS``), never from
this file. ``capture_content`` puts prompt and completion text, redacted, into the model
calls' spans; ``trace_url`` turns a trace id into a link (the API, the dashboard).
Pure: nothing here reads the environment or opens a connection.
"""

from __future__ import annotations

from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

TRACE_ID = "{trace_id}"


class _Section(BaseModel):
    # Errors never carry the input: by validation, secrets are merged into it.
    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)


def _http_url(value: str, what: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{what} must be an http(s) URL, got {value!r}")
    if parts.username or parts.password:
        raise ValueError(
            f"{what} must not hold credentials: give them in OTEL_EXPORTER_OTLP_HEADERS"
        )
    return value


class TracesSettings(_Section):
    enabled: bool = False
    # The OTLP base URL, e.g. http://localhost:4318 (/v1/traces is added for HTTP).
    # Empty: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT, else localhost.
    endpoint: str = ""
    # Empty: OTEL_EXPORTER_OTLP_PROTOCOL, else http/protobuf. grpc needs the package
    # opentelemetry-exporter-otlp-proto-grpc.
    protocol: Literal["", "http/protobuf", "grpc"] = ""
    service_name: str = Field("coding-agent-bot", min_length=1, max_length=200)
    # The share of new traces kept (a delivery's trace is kept or not as a whole).
    sample_ratio: float = Field(1.0, ge=0.0, le=1.0)

    @model_validator(mode="before")
    @classmethod
    def _no_headers_here(cls, data: Any) -> Any:
        if isinstance(data, dict) and "headers" in data:
            raise ValueError(
                "headers are not read from the configuration file: set "
                "OTEL_EXPORTER_OTLP_HEADERS (or OTEL_EXPORTER_OTLP_TRACES_HEADERS)"
            )
        return data

    @field_validator("endpoint")
    @classmethod
    def _endpoint(cls, value: str) -> str:
        return _http_url(value, "observability.traces.endpoint") if value else value


class ObservabilitySettings(_Section):
    traces: TracesSettings = TracesSettings()
    # Prompt and completion text (redacted, cut) in the model calls' spans.
    capture_content: bool = False
    # A link to a trace, with {trace_id}: e.g. http://localhost:16686/trace/{trace_id}.
    trace_url: str = ""

    @field_validator("trace_url")
    @classmethod
    def _trace_url(cls, value: str) -> str:
        if not value:
            return value
        if TRACE_ID not in value:
            raise ValueError(f"observability.trace_url must contain {TRACE_ID}, got {value!r}")
        return _http_url(value.replace(TRACE_ID, "0"), "observability.trace_url") and value

    def trace_link(self, trace_id: str) -> str | None:
        """The link to ``trace_id`` (None without ``trace_url`` or an id)."""
        if not self.trace_url or not trace_id:
            return None
        return self.trace_url.replace(TRACE_ID, trace_id)
