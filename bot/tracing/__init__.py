"""Traces (OpenTelemetry), off by default and free when off (docs/traces.md).

The rest of the bot calls this package only, one line per call site: ``span(name,
attributes)`` is a context manager around one step; the helpers of ``spans`` name the
bot's own paths (a webhook delivery, its dispatch, a task's run, a stage, a model call in
the GenAI conventions, a tool call, a forge request, a set-up or gate step, a wait for
people); ``inject`` gives the current context as a W3C ``traceparent`` carrier to keep in
a stored payload (the task request; a webhook's inbox row gets its context derived from
its key: ``ids``), and ``parent=`` / ``links=`` take it back in another process
(``carriers``). ``core`` holds the machinery, ``spans`` and ``webhook_spans`` the paths'
spans, and ``sdk`` the OpenTelemetry SDK's provider and exporter, imported only when
``start`` turns traces on.
"""

from __future__ import annotations

from bot.tracing.carriers import TRACEPARENT, carrier, trace_id_of
from bot.tracing.core import (
    TraceOptions,
    capture_content,
    clean_text,
    enabled,
    inject,
    note,
    run,
    span,
    stage,
    traceparent,
    until_run_ends,
)
from bot.tracing.handle import NOOP, Kind, Span
from bot.tracing.ids import QUEUED
from bot.tracing.spans import (
    RUN_SPAN,
    ModelAnswer,
    command_ended,
    command_span,
    ended,
    forge_answered,
    forge_seen,
    forge_span,
    model_answered,
    model_span,
    task_run,
    tool_answered,
    tool_span,
    waiting,
)
from bot.tracing.switch import install, start, stop, uninstall
from bot.tracing.webhook_spans import (
    CONTEXT_KEY,
    answered,
    dispatch_span,
    stamp_event,
    stored_context,
    webhook_span,
)

__all__ = [
    "CONTEXT_KEY",
    "NOOP",
    "QUEUED",
    "RUN_SPAN",
    "TRACEPARENT",
    "Kind",
    "ModelAnswer",
    "Span",
    "TraceOptions",
    "answered",
    "capture_content",
    "carrier",
    "clean_text",
    "command_ended",
    "command_span",
    "dispatch_span",
    "enabled",
    "ended",
    "forge_answered",
    "forge_seen",
    "forge_span",
    "inject",
    "install",
    "model_answered",
    "model_span",
    "note",
    "run",
    "span",
    "stage",
    "stamp_event",
    "start",
    "stop",
    "stored_context",
    "task_run",
    "tool_answered",
    "tool_span",
    "trace_id_of",
    "traceparent",
    "uninstall",
    "until_run_ends",
    "waiting",
    "webhook_span",
]
