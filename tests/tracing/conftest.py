"""Traces under test: the SDK's in-memory exporter, a local OTLP/HTTP receiver, and the
span tree read back (by name, parent, trace)."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from bot import tracing
from tests.e2e.support import origin
from tests.tools.conftest import Remote


@pytest.fixture(autouse=True)
def traces_end_with_the_test() -> Iterator[None]:
    """No test leaves traces on for the next."""
    yield
    tracing.stop()


@pytest.fixture
def remote(tmp_path: Path) -> Remote:
    return origin(tmp_path)


class Spans:
    """What the in-memory exporter holds, as a tree."""

    def __init__(self, exporter: InMemorySpanExporter) -> None:
        self.exporter = exporter

    @property
    def all(self) -> Sequence[ReadableSpan]:
        return self.exporter.get_finished_spans()

    def named(self, name: str) -> list[ReadableSpan]:
        return [s for s in self.all if s.name == name]

    def one(self, name: str) -> ReadableSpan:
        found = self.named(name)
        assert len(found) == 1, (name, [s.name for s in self.all])
        return found[0]

    def parent(self, span: ReadableSpan) -> ReadableSpan | None:
        if span.parent is None:
            return None
        found = [s for s in self.all if s.context.span_id == span.parent.span_id]
        return found[0] if found else None

    def ancestors(self, span: ReadableSpan) -> list[str]:
        names = []
        current = self.parent(span)
        while current is not None:
            names.append(current.name)
            current = self.parent(current)
        return names

    def values(self) -> list[str]:
        """Every attribute value of every span, as text."""
        return [str(v) for s in self.all for v in (s.attributes or {}).values()]


def in_memory(*, capture_content: bool = False, secrets: Sequence[str] = ()) -> Iterator[Spans]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.install(provider, capture_content=capture_content, secrets=secrets)
    try:
        yield Spans(exporter)
    finally:
        tracing.uninstall()
        provider.shutdown()


@pytest.fixture
def spans() -> Iterator[Spans]:
    yield from in_memory()


@dataclass
class Receiver:
    """A local OTLP/HTTP receiver: every POST to /v1/traces, decoded with the
    OpenTelemetry proto package."""

    url: str
    requests: list[ExportTraceServiceRequest] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)

    def spans(self) -> list[tuple[str, object]]:
        """(service name, span) for every span received."""
        found = []
        for request in self.requests:
            for resource_spans in request.resource_spans:
                service = next(
                    (a.value.string_value for a in resource_spans.resource.attributes
                     if a.key == "service.name"), "",
                )  # fmt: skip
                for scope in resource_spans.scope_spans:
                    found += [(service, span) for span in scope.spans]
        return found


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            with lock:
                got.requests.append(request)
                got.headers.append({k.lower(): v for k, v in self.headers.items()})
                got.paths.append(self.path)
            self.send_response(200)
            self.send_header("content-type", "application/x-protobuf")
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    got = Receiver(f"http://127.0.0.1:{server.server_address[1]}")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield got
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
