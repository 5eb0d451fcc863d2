"""The spans of the webhook path: one delivery in the web process (a lean span of
``bot.tracing.deliveries``, or an SDK span), the context it leaves in the stored event,
and the worker's dispatch of that event, the child of the delivery's span across
processes (its parent derived from the delivery's key: ``bot.tracing.ids``)."""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import Any

from bot.tracing import core, deliveries, ids
from bot.tracing.carriers import TRACEPARENT, carrier
from bot.tracing.core import inject, span
from bot.tracing.deliveries import Delivery
from bot.tracing.handle import _NO_SPAN, Kind, Span, Value

# Where a stored payload (an inbox event, a task request) keeps the context it was made in.
CONTEXT_KEY = "trace_context"


def webhook_span(forge: str, route: str) -> AbstractContextManager[Span]:
    """The span of one webhook delivery in the web process (HTTP server conventions): a
    lean one when traces were started from the settings (``bot.tracing.deliveries``)."""
    on = core._on  # the ack path: no call more than needed
    if on is None:
        return _NO_SPAN
    if on.deliveries is not None:
        return Delivery(on.deliveries, route, forge)
    attributes = {"http.request.method": "POST", "http.route": route, "bot.forge": forge}
    return span(f"POST {route}", attributes, kind=Kind.SERVER)


def answered(span: Span, status: int, outcome: str) -> None:
    """What the delivery got: the status and the bot's word for it (queued, ignored...)."""
    if type(span) is Delivery:
        span.answered(status, outcome)
    else:
        span.set("http.response.status_code", status)
        span.set("bot.webhook.outcome", outcome)
    if status >= 500:
        span.fail(str(status))


def stamp_event(
    payload: dict[str, Any], name: str, action: str, delivery: str, key: str
) -> dict[str, Any]:
    """``payload`` (an event about to be stored under ``key``, the caller's own dict), the
    delivery's span told what it carries. A lean span leaves the payload as it is (the
    worker derives the context from ``key``: ``bot.tracing.ids``); an SDK span adds its
    context; untouched while off."""
    lean = deliveries.current()
    if lean is not None:
        lean.delivered(name, action, delivery, key)
        return payload
    if not core.enabled():
        return payload
    core.note(
        {"bot.webhook.event": name, "bot.webhook.action": action, "bot.webhook.delivery": delivery}
    )
    context = inject()
    if context:
        payload[CONTEXT_KEY] = context
    return payload


def dispatch_span(
    payload: Mapping[str, Any], event_id: int, attempts: int, key: str = ""
) -> AbstractContextManager[Span]:
    """The worker's span for one inbox event: the child of its delivery's span, so one
    trace follows it across processes. The parent is the context kept in the event (an
    SDK span's, or a row written before the ids were derived), else the one derived from
    the delivery's ``key`` (a webhook's row; "" for the bot's own rows)."""
    on = core._on
    if on is None:
        return _NO_SPAN
    name = str(payload.get("name") or "event")
    attributes: dict[str, Value | None] = {
        "bot.inbox.event": event_id,
        "bot.inbox.attempts": attempts,
        "bot.webhook.event": name,
        "bot.forge": str(payload.get("forge") or ""),
    }
    parent = stored_context(payload)
    if not parent and key:
        parent = {TRACEPARENT: ids.traceparent(key, on.ratio)}
    return span(f"dispatch {name}", attributes, parent=parent)


def stored_context(payload: Mapping[str, Any]) -> dict[str, str]:
    """The context a stored payload was made in ({} when none was kept)."""
    return carrier(payload.get(CONTEXT_KEY))
