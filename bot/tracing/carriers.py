"""W3C trace-context carriers: what a stored payload keeps of the context it was made
in, read back (``carrier``, ``trace_id_of``) and turned into the parent or the links of
a span in another process. Reading works with traces off; OpenTelemetry is imported
only when a span is started from a carrier."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

Carrier = Mapping[str, str]

TRACEPARENT = "traceparent"
_TRACEPARENT = re.compile(r"^[0-9a-f]{2}-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$")


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


def context_of(carrier: Carrier) -> Any:
    from opentelemetry.context import Context
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    return TraceContextTextMapPropagator().extract(carrier, context=Context())


def links_of(carriers: Sequence[Carrier]) -> list[Any] | None:
    if not carriers:
        return None
    from opentelemetry import trace

    found = []
    for item in carriers:
        context = trace.get_current_span(context_of(item)).get_span_context()
        if context.is_valid:
            found.append(trace.Link(context))
    return found or None
