"""The spans of the bot's paths: a task's run, a model
call and a tool call (the GenAI semantic conventions), a forge request (the HTTP client
conventions: the route's template, never its values' secrets), set-up and gate steps.
The webhook path's spans are in ``webhook_spans``.

Each helper hands back the shared no-op while traces are off, before any attribute is
built; names and attributes are OpenTelemetry's where it has them, ``bot.*`` otherwise.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from bot.tracing import core
from bot.tracing.carriers import TRACEPARENT
from bot.tracing.core import capture_content, clean_text, run, span, until_run_ends
from bot.tracing.handle import _NO_SPAN, Kind, Span, Value

if TYPE_CHECKING:
    from bot.events import IssueRef, TaskRequest

# --- a task's run ---------------------------------------------------------------------------

RUN_SPAN = "task run"


def task_run(
    task_id: str, issue: IssueRef, request: TaskRequest, *, earlier: Sequence[str]
) -> AbstractContextManager[Span]:
    """The span of one run of a task, the parent of everything the run does. The first
    run joins the trace the task was created in (its webhook delivery's); a later run
    (resumed after an approval, retried) starts a trace of its own, linked to the run
    before it (``earlier``: the ``traceparent`` of each earlier run, oldest first)."""
    if not core.enabled():
        return _NO_SPAN
    attributes = {
        "bot.task.id": task_id,
        "bot.forge": issue.repo.forge.value,
        "bot.repository": issue.repo.full_name,
        "bot.issue.number": issue.number,
        "bot.task.mode": request.mode.value,
        "bot.task.runs_before": len(earlier),
    }
    if earlier:
        return run(RUN_SPAN, attributes, parent={}, links=[{TRACEPARENT: earlier[-1]}])
    return run(RUN_SPAN, attributes, parent=dict(request.trace_context))


def ended(span: Span, outcome: str, reason: str, *, failed: bool) -> None:
    """How the run ended (the reason redacted and cut)."""
    if not span.recording:
        return
    span.update({"bot.outcome": outcome, "bot.outcome.reason": clean_text(reason, limit=300)})
    if failed:
        span.fail("task_failed")


# --- model calls and tool calls (the GenAI semantic conventions) ------------------------------


def model_span(
    provider: str,
    model: str,
    *,
    phase: str,
    max_tokens: int,
    temperature: float,
    structured: bool,
    server: str = "",
) -> AbstractContextManager[Span]:
    """The span of one model call: ``chat <model>``, a client span with the GenAI
    attributes of the request (``gen_ai.system`` too, the older name some backends read)."""
    if not core.enabled():
        return _NO_SPAN
    host, port = _server(server)
    attributes: dict[str, Value | None] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": provider,
        "gen_ai.system": provider,
        "gen_ai.request.model": model,
        "gen_ai.request.max_tokens": max_tokens,
        "gen_ai.request.temperature": temperature,
        "gen_ai.output.type": "json" if structured else "text",
        "server.address": host,
        "server.port": port,
        "bot.phase": phase,
    }
    return span(f"chat {model}".strip(), attributes, kind=Kind.CLIENT)


def _server(url: str) -> tuple[str | None, int | None]:
    try:
        parts = urlsplit(url)
        return parts.hostname, parts.port
    except ValueError:
        return None, None


@dataclass(frozen=True, slots=True)
class ModelAnswer:
    """What the model's answer says about the call (plain values: no LLM types here)."""

    model: str
    input_tokens: int
    output_tokens: int
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    finish_reasons: tuple[str, ...] = ()
    cost: float = 0.0  # US dollars at llm.prices


def model_answered(span: Span, answer: ModelAnswer, content: Mapping[str, Any] | None) -> None:
    """The answer's GenAI attributes; with ``observability.capture_content`` on, the
    prompt and the completion (``content``: the run log's entry, already redacted and cut)."""
    if not span.recording:
        return
    span.update(
        {
            "gen_ai.response.model": answer.model or None,
            "gen_ai.usage.input_tokens": answer.input_tokens,
            "gen_ai.usage.output_tokens": answer.output_tokens,
            "gen_ai.usage.cache_read.input_tokens": answer.cached_tokens,
            "gen_ai.usage.cache_creation.input_tokens": answer.cache_write_tokens or None,
            "gen_ai.response.finish_reasons": list(answer.finish_reasons) or None,
            "bot.gen_ai.cost_usd": round(answer.cost, 8),
        }
    )
    if content is not None and capture_content():
        span.update(_content(content))


def _content(entry: Mapping[str, Any]) -> dict[str, Value | None]:
    """``gen_ai.input.messages`` and ``gen_ai.output.messages`` as the conventions shape
    them (JSON: role, parts of type text)."""
    messages = [
        {"role": m["role"], "parts": [{"type": "text", "content": m["content"]}]}
        for m in entry.get("messages", ())
    ]
    output = [{"role": "assistant", "parts": [{"type": "text", "content": entry["answer"]}]}]
    return {
        "gen_ai.input.messages": json.dumps(messages, ensure_ascii=False),
        "gen_ai.output.messages": json.dumps(output, ensure_ascii=False)
        if "answer" in entry
        else None,
    }


def tool_span(
    name: str, arguments: Mapping[str, Any], known: Sequence[str]
) -> AbstractContextManager[Span]:
    """The span of one tool call: ``execute_tool <name>`` with its arguments as JSON,
    redacted (``known`` secrets and every pattern) and cut."""
    if not core.enabled():
        return _NO_SPAN
    return _tool_span(name, arguments, known)


@contextlib.contextmanager
def _tool_span(name: str, arguments: Mapping[str, Any], known: Sequence[str]) -> Iterator[Span]:
    attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name,
                  "gen_ai.tool.type": "function"}  # fmt: skip
    with span(f"execute_tool {name}", attributes) as started:
        if started.recording:
            text = json.dumps(arguments, ensure_ascii=False, default=str)
            started.set("gen_ai.tool.call.arguments", clean_text(text, known=known))
        yield started


def tool_answered(span: Span, outcome: str, output: str, *, ok: bool) -> None:
    """How the call went (ok, failed, refused, ...); the output only with content on."""
    if not span.recording:
        return
    span.set("bot.tool.outcome", outcome)
    if not ok:
        span.fail(outcome)
    if capture_content():
        span.set("gen_ai.tool.call.result", clean_text(output))


def waiting(kind: str, what: str) -> None:
    """The task waits for people (an approval, answers): a span from now to the end of
    the run; the run that goes on after the answer is linked to this one."""
    if not core.enabled():
        return
    attributes = {"bot.wait.kind": kind, "bot.wait.what": clean_text(what, limit=200)}
    until_run_ends(f"wait {kind}", attributes)


# --- forge requests ------------------------------------------------------------------------

Template = Callable[[str], str]


def forge_span(
    forge: str, method: str, url: str, template: Template
) -> AbstractContextManager[Span]:
    """The span of one forge request (its retries included): ``<METHOD> <route template>``,
    a client span with the HTTP conventions' attributes. ``template`` turns the URL into
    its route (the forge's own knowledge); the query is never kept. An empty ``url``:
    the route is learned from the response (``forge_seen``)."""
    if not core.enabled():
        return _NO_SPAN
    attributes: dict[str, Value | None] = {"bot.forge": forge, "http.request.method": method}
    name = f"{forge} {method}"
    if url:
        route = template(url)
        name = f"{method} {route}"
        attributes |= {"url.template": route, "server.address": _server(url)[0]}
    return span(name, attributes, kind=Kind.CLIENT)


def forge_answered(span: Span, status: int) -> None:
    span.set("http.response.status_code", status)
    if status >= 400:
        span.fail(str(status))


def forge_seen(span: Span, method: str, url: str, status: int, template: Template) -> None:
    """A request made under the span (a client library's own): its route and status.
    Called in the library's thread; the last request a call makes names its span."""
    if not span.recording:
        return
    route = template(url)
    span.rename(f"{method} {route}")
    span.update(
        {
            "http.request.method": method,
            "url.template": route,
            "server.address": _server(url)[0],
            "http.response.status_code": status,
        }
    )


# --- set-up and the quality gate ---------------------------------------------------------------


def command_span(
    name: str, command: str, known: Sequence[str] = ()
) -> AbstractContextManager[Span]:
    """A set-up or gate step (``setup step``, ``gate lint``): the command redacted and cut."""
    if not core.enabled():
        return _NO_SPAN
    return span(name, {"bot.command": clean_text(command, known=known, limit=300)})


def command_ended(span: Span, exit_code: int | None, *, timed_out: bool, ok: bool) -> None:
    span.update({"process.exit.code": exit_code, "bot.timed_out": timed_out or None})
    if not ok:
        span.fail("timed_out" if timed_out else "exit_code")
