"""OTLP/HTTP for webhook deliveries' lean spans: the protobuf encoding and the POST.

The messages are OpenTelemetry's (``opentelemetry/proto/trace/v1/trace.proto`` and the
collector's ``ExportTraceServiceRequest``), written field by field: a delivery's span is
mostly the same bytes every time (its name, kind, the route's attributes, the event's
and outcome's few values), so those are encoded once and kept, and only the ids, the
times and the delivery's own id are encoded per span. That keeps a span's encoding a
small part of a delivery's cost (``bench/trace_overhead.py``), where the SDK's generic
encoder costs more than the delivery itself. The POST is the exporter's: the headers from
the environment, a timeout, and a few retries on 429 and 502-504.
"""

from __future__ import annotations

import gzip
import logging
import struct
import time
from collections.abc import Iterable, Mapping
from typing import Any

import httpx

from bot.tracing.core import Value

log = logging.getLogger("bot.tracing")

_KINDS = {"internal": 1, "server": 2, "client": 3}
_SAMPLED_LOCAL = 0x101  # Span.flags: W3C sampled, "is_remote" known and false
_ERROR = 2  # Status.code
_CACHED = 4096
_RETRY = frozenset({429, 502, 503, 504})
_COMMON = ("bot.webhook.event", "bot.webhook.action", "http.response.status_code",
           "bot.webhook.outcome")  # fmt: skip
_TIMES = struct.Struct("<BQBQ")  # start_time_unix_nano (7) and end_time_unix_nano (8), fixed64
_FLAGS = b"\x85\x01" + struct.pack("<I", _SAMPLED_LOCAL)  # Span.flags (16), fixed32


def _varint(number: int) -> bytes:
    out = bytearray()
    while number > 0x7F:
        out.append((number & 0x7F) | 0x80)
        number >>= 7
    out.append(number)
    return bytes(out)


def _field(number: int, data: bytes) -> bytes:
    """A length-delimited field."""
    size = len(data)
    if number < 16 and size < 128:  # one byte each for the tag and the length
        return bytes((number << 3 | 2, size)) + data
    return _varint(number << 3 | 2) + _varint(size) + data


def _any_value(value: Value) -> bytes:
    if isinstance(value, bool):
        return _varint(2 << 3) + (b"\x01" if value else b"\x00")
    if isinstance(value, int):
        return _varint(3 << 3) + _varint(value & 0xFFFFFFFFFFFFFFFF)
    if isinstance(value, float):
        return _varint(4 << 3 | 1) + struct.pack("<d", value)
    if isinstance(value, str):
        return _field(1, value.encode("utf-8"))
    items = b"".join(_field(1, _any_value(item)) for item in value)  # ArrayValue.values
    return _field(5, items)


def key_value(key: str, value: Value) -> bytes:
    """A ``KeyValue`` message."""
    return _field(1, key.encode("utf-8")) + _field(2, _any_value(value))


_DELIVERY_KEY = b"\x0a\x14bot.webhook.delivery"  # KeyValue.key of the delivery's id


def _delivery(value: bytes) -> bytes:
    """The delivery's id as a ``Span.attributes`` field (one of its own per span)."""
    size = len(value)
    if size < 100:  # every length fits one byte
        return (
            bytes((0x4A, size + 26)) + _DELIVERY_KEY + bytes((0x12, size + 2, 0x0A, size)) + value
        )
    return _field(9, _DELIVERY_KEY + _field(2, _field(1, value)))


class Encoder:
    """Recorded spans -> an ``ExportTraceServiceRequest``, for one resource and scope."""

    def __init__(self, resource: Mapping[str, Value], scope: str = "bot") -> None:
        attributes = b"".join(_field(1, key_value(k, v)) for k, v in resource.items())
        self._resource = _field(1, attributes)  # ResourceSpans.resource
        self._scope = _field(1, _field(1, scope.encode("utf-8")))  # ScopeSpans.scope
        self._attributes: dict[tuple[str, Any], bytes] = {}
        self._heads: dict[tuple[str, str, Any], bytes] = {}
        self._common: dict[tuple[Any, ...], bytes] = {}

    def _attribute(self, key: str, value: Value) -> bytes:
        cache_key = (key, value if not isinstance(value, list) else tuple(value))
        found = self._attributes.get(cache_key)
        if found is None:
            if len(self._attributes) >= _CACHED:
                self._attributes.clear()
            found = self._attributes[cache_key] = _field(9, key_value(key, value))
        return found

    def span(self, recorded: tuple[Any, ...]) -> bytes:
        """One span as a ``ScopeSpans.spans`` field, from a recorded span
        (``bot.tracing.deliveries``): its name, kind and the route's attributes are encoded
        once per route, the event, action, status and outcome once per combination."""
        trace, span, name, kind, start, end, base, common, delivery, extra, error = recorded
        head = self._heads.get((name, kind, base))
        if head is None:
            head = _field(5, name.encode("utf-8")) + _varint(6 << 3) + _varint(_KINDS[kind])
            head += _FLAGS + b"".join(_field(9, key_value(k, v)) for k, v in base)
            self._heads[(name, kind, base)] = head
        shared = self._common.get(common)
        if shared is None:
            if len(self._common) >= _CACHED:
                self._common.clear()
            shared = self._common[common] = b"".join(
                _field(9, key_value(k, v)) for k, v in zip(_COMMON, common, strict=True) if v
            )
        parts = [b"\x0a\x10", trace.to_bytes(16, "big"), b"\x12\x08", span.to_bytes(8, "big"),
                 head, _TIMES.pack(0x39, start, 0x41, end), shared]  # fmt: skip
        if delivery:
            parts.append(_delivery(delivery.encode("utf-8")))
        parts += [self._attribute(k, v) for k, v in extra.items()]
        if error:
            parts.append(self._attribute("error.type", error))
            status = _field(2, error.encode("utf-8")) + _varint(3 << 3) + _varint(_ERROR)
            parts.append(_field(15, status))
        body = b"".join(parts)
        size = len(body)
        if 128 <= size < 16384:  # the usual: a two-byte length
            return bytes((0x12, (size & 0x7F) | 0x80, size >> 7)) + body
        return _field(2, body)

    def request(self, spans: Iterable[bytes]) -> bytes:
        """An ``ExportTraceServiceRequest`` of spans made by ``span``."""
        scope_spans = self._scope + b"".join(spans)
        return _field(1, self._resource + _field(2, scope_spans))


class Poster:
    """POSTs encoded requests to an OTLP/HTTP traces endpoint (from a thread)."""

    def __init__(
        self, endpoint: str, headers: Mapping[str, str], *, timeout: float, compression: str
    ) -> None:
        self.endpoint = endpoint
        self._headers = {**headers, "content-type": "application/x-protobuf"}
        self._gzip = compression == "gzip"
        if self._gzip:
            self._headers["content-encoding"] = "gzip"
        self._client = httpx.Client(timeout=timeout)

    def post(self, body: bytes, *, tries: int = 3) -> bool:
        data = gzip.compress(body) if self._gzip else body
        for attempt in range(tries):
            try:
                response = self._client.post(self.endpoint, content=data, headers=self._headers)
            except httpx.HTTPError as exc:
                failure = type(exc).__name__
            else:
                if response.is_success:
                    return True
                failure = f"HTTP {response.status_code}"
                if response.status_code not in _RETRY:
                    break
            if attempt + 1 < tries:
                time.sleep(2**attempt)
        log.warning("traces: a batch of delivery spans could not be exported: %s", failure)
        return False

    def close(self) -> None:
        self._client.close()
