"""``create_app(runtime, worker=...)``: the HTTP surface. Routes only; decisions live elsewhere.

POST /webhooks/github and /webhooks/gitlab: size limit, in-flight budget and read
deadline -> verify -> parse ->
classify (pure) -> one store transaction (an inbox row; its unique delivery key is the
dedup record) -> 202. The worker's dispatcher does the rest, so no forge or LLM call ever
happens here.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any, cast

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from bot import metrics, tracing
from bot.config import ConfigError
from bot.events import EventKind, ForgeEvent, ForgeKind
from bot.runtime import Runtime
from bot.storage.base import StoreError, TaskState
from bot.throttle import FailureThrottle
from bot.triggers import Ignore, classify
from bot.webhooks import github as github_hooks
from bot.webhooks import gitlab as gitlab_hooks
from bot.webhooks.errors import PayloadError
from bot.worker import Worker
from bot.worker.operator import read_switch

log = logging.getLogger("bot.app")


class _TooLarge(Exception):
    pass


Answer = tuple[int, dict[str, Any]]
Wake = Callable[[], None]


def _answer(status: int, message: str, **extra: Any) -> Answer:
    return status, {"status": status, "message": message, **extra}


def _json(status: int, message: str, **extra: Any) -> JSONResponse:
    return JSONResponse(_answer(status, message, **extra)[1], status_code=status)


async def _accept(runtime: Runtime, wake: Wake, key: str, event: ForgeEvent) -> Answer:
    """Classify; queue what could matter in one transaction; answer at once."""
    verdict = classify(event, runtime.settings)
    if isinstance(verdict, Ignore):
        metrics.webhook(event.forge.value, "ignored")
        log.info("ignored %s %s/%s: %s", key, event.name, event.action, verdict.reason)
        return _answer(202, "ignored", reason=verdict.reason)
    payload = tracing.stamp_event(event.to_dict(), event.name, event.action, event.delivery_id)
    try:
        fresh = await runtime.store.record_delivery(key, event.forge.value, payload)
    except StoreError as exc:
        log.error("could not queue delivery %s: %s", key, exc)
        return _answer(503, "the bot could not store this delivery; please redeliver it")
    if not fresh:
        metrics.webhook(event.forge.value, "duplicate")
        return _answer(202, "duplicate delivery: already queued")
    metrics.webhook(event.forge.value, "queued")
    wake()  # a worker in this process looks at the inbox now
    return _answer(202, "queued")


async def _github(headers: Mapping[str, str], runtime: Runtime, wake: Wake, body: bytes) -> Answer:
    settings = runtime.settings.github
    if settings.webhook_secret is None:
        return _answer(404, "GitHub is not configured on this bot (set GITHUB_WEBHOOK_SECRET)")
    signature = headers.get("x-hub-signature-256")
    if not github_hooks.verify_signature(
        body, signature, secret=settings.webhook_secret.get_secret_value()
    ):
        metrics.webhook("github", "bad_signature")
        return _answer(401, "missing or wrong X-Hub-Signature-256")
    name = headers.get("x-github-event", "")
    delivery = headers.get("x-github-delivery", "")
    if not name:
        raise PayloadError("no X-GitHub-Event header")
    event = github_hooks.parse_event(name, delivery, body)
    if event.kind is EventKind.PING:
        return _answer(200, "pong")
    key = github_hooks.delivery_key(delivery, settings.app_id, body)
    return await _accept(runtime, wake, key, event)


async def _gitlab(headers: Mapping[str, str], runtime: Runtime, wake: Wake, body: bytes) -> Answer:
    settings = runtime.settings.gitlab
    if settings.webhook_secret is None and not settings.webhook_secrets:
        return _answer(404, "GitLab is not configured on this bot (set GITLAB_WEBHOOK_SECRET)")
    token = headers.get("x-gitlab-token")
    shared = settings.webhook_secret.get_secret_value() if settings.webhook_secret else None
    scoped = settings.scoped_webhook_secrets()
    if not gitlab_hooks.verify_delivery(token, body, shared=shared, scoped=scoped):
        metrics.webhook("gitlab", "bad_token")
        return _answer(401, "missing or wrong X-Gitlab-Token")
    name = headers.get("x-gitlab-event", "")
    if not name:
        raise PayloadError("no X-Gitlab-Event header")
    delivery = headers.get("x-gitlab-event-uuid", "")
    event = gitlab_hooks.parse_event(name, delivery, body)
    key = gitlab_hooks.delivery_key(headers, body)
    return await _accept(runtime, wake, key, event)


Handler = Callable[[Mapping[str, str], Runtime, Wake, bytes], Awaitable[Answer]]
WEBHOOKS: dict[str, tuple[ForgeKind, Handler]] = {
    "/webhooks/github": (ForgeKind.GITHUB, _github),
    "/webhooks/gitlab": (ForgeKind.GITLAB, _gitlab),
}


async def _read_body(receive: Receive, limit: int) -> bytes:
    body = bytearray()
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise _TooLarge if len(body) > limit else ConnectionError("client went away")
        body += message.get("body", b"")
        if len(body) > limit:
            raise _TooLarge
        if not message.get("more_body", False):
            return bytes(body)


def _declared_length(headers: Mapping[str, str]) -> int | None:
    declared = headers.get("content-length", "")
    return int(declared) if declared.isdigit() else None


class BodyBudget:
    """The bytes of webhook bodies being read at once (``server.max_body_bytes_in_flight``).

    A request reserves its declared length before its body is read and gives it back
    when it is answered, on every path (cancellation included: see ``WebhookApp._read``).
    One event loop touches it, and nothing awaits between the check and the reservation."""

    def __init__(self) -> None:
        self.in_flight = 0

    def take(self, size: int, limit: int) -> bool:
        if self.in_flight + size > limit:
            return False
        self.in_flight += size
        return True

    def give_back(self, size: int) -> None:
        self.in_flight -= size


class WebhookApp:
    """The two webhook routes as plain ASGI, in front of the Starlette app.

    The webhook path is the hot path (every comment on every installed repository comes
    through it); answering it without the framework's request and response objects and
    middleware keeps its cost to the verification, parsing and durable write it needs.
    Everything else goes to the Starlette app."""

    def __init__(self, app: ASGIApp, runtime: Runtime, wake: Wake) -> None:
        self.app = app
        self.runtime = runtime
        self.wake = wake
        self.budget = BodyBudget()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        route = WEBHOOKS.get(scope.get("path", "")) if scope["type"] == "http" else None
        if route is None:
            await self.app(scope, receive, send)
            return
        extra: list[tuple[bytes, bytes]] = []
        if scope["method"] != "POST":
            status, body = _answer(405, "webhooks are POSTed")
            extra = [(b"allow", b"POST")]
        else:
            forge, handler = route
            headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
            with tracing.webhook_span(forge.value, scope["path"]) as span:
                status, body = await self._read(forge, handler, headers, receive)
                tracing.answered(span, status, body["message"])
            extra = _REFUSAL_HEADERS.get(status, [])
            if status == 503 and "retry_after" in body:
                extra = [*extra, (b"retry-after", str(body["retry_after"]).encode())]
        content = orjson.dumps(body)
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(content)).encode()),
                    *extra,
                ],
            }
        )
        await send({"type": "http.response.body", "body": content})

    async def _read(
        self, forge: ForgeKind, handler: Handler, headers: dict[str, str], receive: Receive
    ) -> Answer:
        """Reserve the body's bytes, read it within the deadline, handle it, give them back."""
        server = self.runtime.settings.server
        declared = _declared_length(headers)
        if declared is not None and declared > server.max_body_bytes:
            metrics.webhook(forge.value, "too_large")
            return _answer(413, "the body is larger than server.max_body_bytes")
        size = server.max_body_bytes if declared is None else declared
        if not self.budget.take(size, server.max_body_bytes_in_flight):
            metrics.webhook(forge.value, "busy")
            retry = math.ceil(server.body_timeout)
            return _answer(503, "too many webhook bodies in flight", retry_after=retry)
        try:
            try:
                async with asyncio.timeout(server.body_timeout):
                    body = await _read_body(receive, server.max_body_bytes)
            except TimeoutError:
                metrics.webhook(forge.value, "too_slow")
                return _answer(408, "the body did not arrive within server.body_timeout")
            except _TooLarge:
                metrics.webhook(forge.value, "too_large")
                return _answer(413, "the body is larger than server.max_body_bytes")
            except ConnectionError:
                return _answer(400, "the request body did not arrive")
            return await self._handle(forge, handler, headers, body)
        finally:
            self.budget.give_back(size)

    async def _handle(
        self, forge: ForgeKind, handler: Handler, headers: dict[str, str], body: bytes
    ) -> Answer:
        try:
            return await handler(headers, self.runtime, self.wake, body)
        except PayloadError as exc:
            metrics.webhook(forge.value, "bad_payload")
            log.warning("%s webhook rejected: %s", forge.value, exc)
            return _answer(400, f"malformed payload: {exc}")


# A body refused before it was read whole leaves bytes on the connection: close it.
_CLOSE = [(b"connection", b"close")]
_REFUSAL_HEADERS: dict[int, list[tuple[bytes, bytes]]] = {408: _CLOSE, 413: _CLOSE, 503: _CLOSE}


async def healthz(request: Request) -> Response:
    return PlainTextResponse("ok")


async def readyz(request: Request) -> Response:
    runtime: Runtime = request.app.state.runtime
    try:
        await runtime.store.ping()
    except StoreError as exc:
        return _json(503, f"store not writable: {exc}")
    worker: Worker | None = request.app.state.worker
    stuck = worker.stuck() if worker is not None else []
    if stuck:
        return _json(503, "worker stuck: " + " | ".join(stuck))
    switch = await read_switch(runtime.store)
    if switch.paused:  # still ready: webhooks are received and stored, tasks wait
        since = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(switch.since))
        return PlainTextResponse(
            f"ready; all tasks paused by {switch.by} since {since} (bot resume-all)"
        )
    return PlainTextResponse("ready")


async def health_ai(request: Request) -> Response:
    runtime: Runtime = request.app.state.runtime
    report = await runtime.llm_health()
    return JSONResponse(report.to_dict(), status_code=200 if report.ready else 503)


async def metrics_endpoint(request: Request) -> Response:
    runtime: Runtime = request.app.state.runtime
    worker: Worker | None = request.app.state.worker
    try:
        await _read_gauges(runtime, worker)
    except StoreError as exc:  # the counters still answer; the gauges keep their last value
        log.warning("metrics: could not read the store: %s", exc)
    body, content_type = metrics.render()
    return Response(body, media_type=content_type)


async def _read_gauges(runtime: Runtime, worker: Worker | None) -> None:
    """The gauges are the store's state at scrape time (shared by every replica)."""
    store = runtime.store
    counts = {state: await store.count_tasks(states=frozenset({state})) for state in TaskState}
    for state, count in counts.items():
        metrics.TASKS_BY_STATE.labels(state.value).set(count)
    metrics.QUEUE_DEPTH.set(counts[TaskState.QUEUED])
    metrics.RUNNING.set(counts[TaskState.RUNNING])
    if worker is not None:
        metrics.FREE_SLOTS.set(worker.free_slots())
    metrics.PAUSED_ALL.set(1 if (await read_switch(store)).paused else 0)


def create_app(
    runtime: Runtime,
    *,
    worker: Worker | None = None,
    webhooks: bool = True,
    manage_runtime: bool = True,
) -> ASGIApp:
    """The ASGI app. With ``manage_runtime`` the app starts and stops the runtime and
    the ``worker`` (when this process runs one); webhooks wake that worker.

    Without ``webhooks`` (a worker replica) the app has the health and metrics routes
    alone: webhooks go to the web replicas."""

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if manage_runtime:
            await runtime.start()
            if worker is not None:
                await worker.start()
            runtime.watch_reload_signal(os.environ)
        try:
            yield
        finally:
            if manage_runtime:
                if worker is not None:
                    await worker.stop()
                await runtime.stop()

    routes: list[BaseRoute] = [
        Route("/healthz", healthz),
        Route("/readyz", readyz),
        Route("/health/ai", health_ai),
        Route("/metrics", metrics_endpoint),
    ]
    server = runtime.settings.server
    token = server.api_token
    if token is not None and token.get_secret_value():
        problem = server.api_token_problem()
        if problem is not None:
            raise ConfigError(problem)
        # FastAPI and the dashboard are imported only when the token turns them on.
        from bot.api import create_api
        from bot.dashboard.views import dashboard_routes

        # One count of failures per client for the API's bearer token and the login form.
        throttle = FailureThrottle(
            limit=server.auth_max_failures, window=server.auth_failure_window, clock=time.monotonic
        )
        secret = token.get_secret_value()
        routes.append(Mount("/api", app=create_api(runtime, secret, throttle=throttle)))
        slots = runtime.settings.worker.max_workers if worker is not None else 0
        routes += dashboard_routes(runtime, secret, slots=slots, throttle=throttle)
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.runtime = runtime
    app.state.worker = worker
    inner = _behind_proxies(app, server.forwarded_allow_ips)
    if not webhooks:
        return inner
    return WebhookApp(inner, runtime, worker.poke if worker is not None else _no_worker)


def _behind_proxies(app: ASGIApp, proxies: tuple[str, ...]) -> ASGIApp:
    """``app`` believing X-Forwarded-For and X-Forwarded-Proto from ``proxies`` only:
    the client address (the login throttle) and the scheme (the cookie's Secure flag)
    are then the ones the proxy saw. Webhooks do not need them (signatures and tokens
    authenticate them), so their path stays without this step."""
    if not proxies:
        return app
    from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

    return cast(ASGIApp, ProxyHeadersMiddleware(cast(Any, app), trusted_hosts=list(proxies)))


def _no_worker() -> None:
    """A web replica: the worker processes poll the shared queue."""
