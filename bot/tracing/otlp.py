"""OTLP/HTTP for webhook deliveries' lean spans: the protobuf encoding and the POST.

The messages are OpenTelemetry's (``opentelemetry/proto/trace/v1/trace.proto`` and the
collector's ``ExportTraceServiceRequest``), written field by field. A delivery's span is
mostly the same bytes every time: its name, kind, the route's attributes, the event's,
status's and outcome's few values. So a span is a template of those bytes (made once per
combination) with room for the fixed-size fields, its ids and its times, written in place
(``struct.pack_into``), and its delivery's id appended; the ids are derived from the
delivery's key here (``bot.tracing.ids``), and the unsampled left out. The rare span with
other attributes or an error is written from its parts. The POST is the exporter's: the
headers from the environment, a timeout, and a few retries on 429 and 502-504.
"""

from __future__ import annotations

import gzip
import http.client
import logging
import os
import ssl
import struct
import time
import urllib.request
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import SplitResult, urlsplit

import httpx

from bot.tracing import ids
from bot.tracing.handle import Value

log = logging.getLogger("bot.tracing")

_KINDS = {"internal": 1, "server": 2, "client": 3}
_SAMPLED_LOCAL = 0x101  # Span.flags: W3C sampled, "is_remote" known and false
_ERROR = 2  # Status.code
_CACHED = 4096
_MASK = (1 << 64) - 1
_RETRY = frozenset({429, 502, 503, 504})
_COMMON = ("bot.webhook.event", "bot.webhook.action", "http.response.status_code",
           "bot.webhook.outcome")  # fmt: skip
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


def _delivery_head(size: int) -> bytes:
    """The bytes before a delivery's id (``size`` < 100 bytes) in its ``Span.attributes``
    field: the field's tag and length, the key, the value's tags and lengths."""
    return bytes((0x4A, size + 26)) + _DELIVERY_KEY + bytes((0x12, size + 2, 0x0A, size))


# The ids and times at the start of a span: trace_id (1) and span_id (2), then
# start_time_unix_nano (7) and end_time_unix_nano (8) as fixed64; the tags are constants.
_FIXED = struct.Struct("<H16sH8sBQBQ")
_TAGS = (0x100A, 0x0812)  # "0a 10", "12 08" little-endian
_SHORT = 100  # a delivery id shorter than this fits a template


class Encoder:
    """Recorded spans -> an ``ExportTraceServiceRequest``, for one resource and scope.

    A span that is what most are (no other attribute, no error, a short delivery id) is
    a template copied whole, one per route, event, action, status, outcome and length of
    the delivery id, in which only the ids and times are written (``struct.pack_into``)
    and the delivery's id appended; any other span is written from its parts."""

    def __init__(self, resource: Mapping[str, Value], scope: str = "bot", *,
                 ratio: float = 1.0) -> None:  # fmt: skip
        attributes = b"".join(_field(1, key_value(k, v)) for k, v in resource.items())
        self._resource = _field(1, attributes)  # ResourceSpans.resource
        self._scope = _field(1, _field(1, scope.encode("utf-8")))  # ScopeSpans.scope
        self._bound = ids.bound(ratio)
        self._salt = int.from_bytes(os.urandom(8))  # for ids of row-less spans, counted up
        self._attributes: dict[tuple[str, Any], bytes] = {}
        self._heads: dict[tuple[str, str], bytes] = {}
        self._templates: dict[tuple[Any, ...], tuple[bytes, int]] = {}

    def _attribute(self, key: str, value: Value) -> bytes:
        cache_key = (key, value if not isinstance(value, list) else tuple(value))
        found = self._attributes.get(cache_key)
        if found is None:
            if len(self._attributes) >= _CACHED:
                self._attributes.clear()
            found = self._attributes[cache_key] = _field(9, key_value(key, value))
        return found

    def _head(self, route: str, forge: str) -> bytes:
        """The name, kind, flags and the route's attributes (once per route)."""
        head = self._heads.get((route, forge))
        if head is None:
            base = (("http.request.method", "POST"), ("http.route", route), ("bot.forge", forge))
            head = _field(5, f"POST {route}".encode()) + _varint(6 << 3) + _varint(_KINDS["server"])
            head += _FLAGS + b"".join(_field(9, key_value(k, v)) for k, v in base)
            self._heads[(route, forge)] = head
        return head

    def _template(self, key: tuple[Any, ...]) -> tuple[bytes, int]:
        """The span's bytes with zeroes for its ids and times, up to its delivery's id;
        where the ids start."""
        route, forge, event, action, status, outcome, size = key
        body = bytes(_FIXED.size) + self._head(route, forge)
        body += b"".join(_field(9, key_value(k, v))
                         for k, v in zip(_COMMON, (event, action, status, outcome), strict=True)
                         if v)  # fmt: skip
        if size:
            body += _delivery_head(size)
        head = _varint(2 << 3 | 2) + _varint(len(body) + size)  # ScopeSpans.spans
        if len(self._templates) >= _CACHED:
            self._templates.clear()
        made = self._templates[key] = (head + body, len(head))
        return made

    def spans(self, batch: Iterable[tuple[Any, ...]]) -> bytes:
        """Recorded spans (``bot.tracing.deliveries``) as ``ScopeSpans.spans`` fields: ids
        derived from each one's key (``bot.tracing.ids``), the unsampled left out."""
        out = bytearray()
        templates, bound = self._templates, self._bound
        derived, salted, sampled = ids.derived, ids.salted, ids.sampled
        pack_into, queued = _FIXED.pack_into, ids.QUEUED
        for recorded in batch:
            route, forge, start, end, event, action, status, outcome = recorded[:8]
            delivery, key, extra, error = recorded[8:]
            key_bytes = key.encode()
            if status == 202 and outcome == queued and key:  # it made the inbox row
                made = derived(key_bytes)
            else:
                self._salt += 1
                made = salted(key_bytes, start, self._salt)
            if bound <= _MASK and not sampled(made, bound):
                continue
            value = delivery.encode()
            size = len(value)
            if extra or error or size >= _SHORT:
                out += self._span(made, recorded, value)
                continue
            shape = (route, forge, event, action, status, outcome, size)
            template = templates.get(shape) or self._template(shape)
            at = len(out) + template[1]
            out += template[0]
            pack_into(out, at, 0x100A, made[:16], 0x0812, made[16:], 0x39, start, 0x41, end)
            out += value
        return bytes(out)

    def _span(self, made: bytes, recorded: tuple[Any, ...], delivery: bytes) -> bytes:
        """One span written from its parts (other attributes, an error, a long id)."""
        route, forge, start, end, event, action, status, outcome, _, _, extra, error = recorded
        parts = [_FIXED.pack(*_TAGS[:1], made[:16], _TAGS[1], made[16:], 0x39, start, 0x41, end),
                 self._head(route, forge)]  # fmt: skip
        common = (event, action, status, outcome)
        parts += [self._attribute(k, v) for k, v in zip(_COMMON, common, strict=True) if v]
        if delivery:
            parts.append(_field(9, _DELIVERY_KEY + _field(2, _field(1, delivery))))
        parts += [self._attribute(k, v) for k, v in extra.items()]
        if error:
            parts.append(self._attribute("error.type", error))
            status_field = _field(2, error.encode("utf-8")) + _varint(3 << 3) + _varint(_ERROR)
            parts.append(_field(15, status_field))
        return _field(2, b"".join(parts))

    def request(self, spans: bytes) -> bytes:
        """An ``ExportTraceServiceRequest`` of the spans made by ``spans``."""
        return _field(1, self._resource + _field(2, self._scope + spans))


class Poster:
    """POSTs encoded requests to an OTLP/HTTP traces endpoint, over one kept connection
    (``http.client``: a fraction of a generic client's CPU per request, and the export
    process shares the machine with the server); through ``httpx`` when the environment
    names a proxy for the endpoint, as the SDK's exporter would go."""

    def __init__(
        self, endpoint: str, headers: Mapping[str, str], *, timeout: float, compression: str
    ) -> None:
        self.endpoint = endpoint
        self._headers = {**headers, "content-type": "application/x-protobuf"}
        self._gzip = compression == "gzip"
        if self._gzip:
            self._headers["content-encoding"] = "gzip"
        self._timeout = timeout
        parts = urlsplit(endpoint)
        self._parts = parts
        self._path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self._client = httpx.Client(timeout=timeout) if _proxied(parts) else None
        self._connection: http.client.HTTPConnection | None = None

    def post(self, body: bytes, *, tries: int = 3) -> bool:
        data = gzip.compress(body) if self._gzip else body
        for attempt in range(tries):
            try:
                status = self._send(data)
            except (OSError, http.client.HTTPException, httpx.HTTPError) as exc:
                failure = type(exc).__name__
            else:
                if 200 <= status < 300:
                    return True
                failure = f"HTTP {status}"
                if status not in _RETRY:
                    break
            if attempt + 1 < tries:
                time.sleep(2**attempt)
        log.warning("traces: a batch of delivery spans could not be exported: %s", failure)
        return False

    def _send(self, data: bytes, *, again: bool = True) -> int:
        if self._client is not None:
            return self._client.post(self.endpoint, content=data, headers=self._headers).status_code
        connection = self._connection
        kept = connection is not None
        if connection is None:
            connection = self._connection = self._connect()
        try:
            connection.request("POST", self._path, body=data, headers=self._headers)
            response = connection.getresponse()
            response.read()
        except (OSError, http.client.HTTPException):
            self.close()
            if kept and again:  # the receiver closed the kept connection: a new one
                return self._send(data, again=False)
            raise
        if response.will_close:
            self.close()
        return response.status

    def _connect(self) -> http.client.HTTPConnection:
        host, port = self._parts.hostname or "localhost", self._parts.port
        if self._parts.scheme == "https":
            context = ssl.create_default_context()
            return http.client.HTTPSConnection(host, port, timeout=self._timeout, context=context)
        return http.client.HTTPConnection(host, port, timeout=self._timeout)

    def close(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.close()
        if self._client is not None:
            self._client.close()


def _proxied(parts: SplitResult) -> bool:
    """Whether the environment sends requests to this endpoint through a proxy."""
    proxies = urllib.request.getproxies()
    if parts.scheme not in proxies and "all" not in proxies:
        return False
    return not urllib.request.proxy_bypass(parts.netloc)
