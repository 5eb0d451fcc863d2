"""``create_app(runtime, worker=...)``: the HTTP surface, one Starlette app with one list of
routes. Routes only; decisions live elsewhere.

    POST /webhooks/github, /webhooks/gitlab   receiver.py (plain ASGI: the hot path)
    GET  /healthz /readyz /health/ai /metrics  below
    /api/...                                   api/ (with server.api_token)
    /mcp                                       api/mcp_server.py (the API's operations
                                               as MCP tools, with server.api_token)
    /dashboard/...                             dashboard/ (with server.api_token)

The API, /mcp and the dashboard see the client's address and scheme as a proxy of
``server.forwarded_allow_ips`` tells them (the login throttle, the cookie's Secure flag);
the webhooks do not need them (signatures and tokens authenticate them).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from typing import Any, Protocol

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.exceptions import ExceptionMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Mount, Route, Router
from starlette.types import ASGIApp, Lifespan, Receive, Scope, Send

from bot import metrics
from bot.config import ConfigError, CurrentSettings
from bot.events import ForgeKind
from bot.llm.base import HealthReport
from bot.receiver import Receiver, WebhookEndpoint
from bot.runtime import Runtime
from bot.storage.base import Lifecycle, Marks, StoreError, Tasks, TaskState
from bot.throttle import FailureThrottle
from bot.worker import Worker
from bot.worker.operator import read_switch

log = logging.getLogger("bot.app")


class HealthStore(Lifecycle, Tasks, Marks, Protocol):
    """What the health routes read: a probe write, the tasks' counts, the switch."""


class Health:
    """``/healthz`` (the process answers), ``/readyz`` (the store takes writes, no run is
    stuck), ``/health/ai`` (the LLM endpoint) and ``/metrics`` (Prometheus)."""

    def __init__(
        self,
        store: HealthStore,
        *,
        worker: Worker | None,
        llm_health: Callable[[], Awaitable[HealthReport]],
    ) -> None:
        self.store = store
        self.worker = worker
        self.llm_health = llm_health

    async def live(self, request: Request) -> Response:
        return PlainTextResponse("ok")

    async def ready(self, request: Request) -> Response:
        try:
            await self.store.ping()
        except StoreError as exc:
            return _refused(503, f"store not writable: {exc}")
        stuck = self.worker.stuck() if self.worker is not None else []
        if stuck:
            return _refused(503, "worker stuck: " + " | ".join(stuck))
        switch = await read_switch(self.store)
        if switch.paused:  # still ready: webhooks are received and stored, tasks wait
            since = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(switch.since))
            return PlainTextResponse(
                f"ready; all tasks paused by {switch.by} since {since} (bot resume-all)"
            )
        return PlainTextResponse("ready")

    async def ai(self, request: Request) -> Response:
        report = await self.llm_health()
        return JSONResponse(report.to_dict(), status_code=200 if report.ready else 503)

    async def metrics(self, request: Request) -> Response:
        try:
            await self._read_gauges()
        except StoreError as exc:  # the counters still answer; the gauges keep their last value
            log.warning("metrics: could not read the store: %s", exc)
        body, content_type = metrics.render()
        return Response(body, media_type=content_type)

    async def _read_gauges(self) -> None:
        """The gauges are the store's state at scrape time (shared by every replica)."""
        store = self.store
        counts = {s: await store.count_tasks(states=frozenset({s})) for s in TaskState}
        for state, count in counts.items():
            metrics.TASKS_BY_STATE.labels(state.value).set(count)
        metrics.QUEUE_DEPTH.set(counts[TaskState.QUEUED])
        metrics.RUNNING.set(counts[TaskState.RUNNING])
        if self.worker is not None:
            metrics.FREE_SLOTS.set(self.worker.free_slots())
        metrics.PAUSED_ALL.set(1 if (await read_switch(store)).paused else 0)


class BotApp(Starlette):
    """Starlette with one list of routes, whose plain-ASGI webhook endpoints are answered
    before the middleware stack: they need neither its error page nor its exception
    handlers (they answer every error themselves), and skipping it keeps their cost to the
    work they do (``bench/webhook_ack.py``). Every other route goes through the router."""

    def __init__(self, routes: list[BaseRoute], lifespan: Lifespan[Starlette]) -> None:
        super().__init__(routes=routes, lifespan=lifespan, exception_handlers={404: _not_found})
        self.direct: dict[str, ASGIApp] = {
            route.path: route.app
            for route in routes
            if isinstance(route, Route) and isinstance(route.endpoint, WebhookEndpoint)
        }

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        endpoint = self.direct.get(scope["path"]) if scope["type"] == "http" else None
        if endpoint is not None:
            await endpoint(scope, receive, send)
        else:
            await super().__call__(scope, receive, send)


async def _not_found(request: Request, exc: Exception) -> Response:
    """No route: under ``/api`` a JSON problem, as the API's own refusals (a path its
    mount does not match, such as one with a line break, ends here), else plain text."""
    if request.url.path.startswith("/api/"):
        return JSONResponse({"detail": "Not Found"}, status_code=404)
    return PlainTextResponse("Not Found", status_code=404)


def _refused(status: int, message: str) -> Response:
    return JSONResponse({"status": status, "message": message}, status_code=status)


def create_app(
    runtime: Runtime,
    *,
    worker: Worker | None = None,
    webhooks: bool = True,
    manage_runtime: bool = True,
    environ: Mapping[str, str] | None = None,
) -> BotApp:
    """The ASGI app. With ``manage_runtime`` the app starts and stops the runtime and
    the ``worker`` (when this process runs one); webhooks wake that worker.
    ``environ``: the environment the settings were loaded with (the process's by
    default), which a reload (SIGHUP, ``PUT /api/config``) reads again.

    Without ``webhooks`` (a worker replica) the app has the health and metrics routes
    alone: webhooks go to the web replicas."""

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if manage_runtime:
            await runtime.start()
            if worker is not None:
                await worker.start()
            runtime.watch_reload_signal(env)
        try:
            async with mcp_running():
                yield
        finally:
            if manage_runtime:
                if worker is not None:
                    await worker.stop()
                await runtime.stop()

    env = os.environ if environ is None else environ
    settings, store = runtime.current_settings, runtime.store
    wake = worker.poke if worker else _no_worker
    receiver = Receiver(store, settings=settings, wake=wake)
    health = Health(store, worker=worker, llm_health=runtime.llm_health)
    routes: list[BaseRoute] = []
    if webhooks:
        routes += [
            Route("/webhooks/github", receiver.endpoint(ForgeKind.GITHUB)),
            Route("/webhooks/gitlab", receiver.endpoint(ForgeKind.GITLAB)),
        ]
    operator_routes, mcp_running = _operator_routes(
        runtime, settings, slots=_slots(runtime, worker), wake=wake, env=env
    )
    routes += [
        Route("/healthz", health.live),
        Route("/readyz", health.ready),
        Route("/health/ai", health.ai),
        Route("/metrics", health.metrics),
        *operator_routes,
    ]
    app = BotApp(routes, lifespan)
    app.state.receiver = receiver
    return app


Running = Callable[[], AbstractAsyncContextManager[None]]


def _operator_routes(
    runtime: Runtime,
    settings: CurrentSettings,
    *,
    slots: int,
    wake: Callable[[], None],
    env: Mapping[str, str],
) -> tuple[list[BaseRoute], Running]:
    """``/api``, ``/mcp`` and ``/dashboard``, when ``server.api_token`` is set (none
    otherwise), and what the app's lifespan runs for them (the MCP session manager)."""
    server = settings().server
    token = server.api_token.get_secret_value() if server.api_token is not None else ""
    if not token:
        return [], nullcontext
    problem = server.api_token_problem()
    if problem is not None:
        raise ConfigError(problem)
    # The API's models and the dashboard's templates load only when the token turns them on.
    from bot.api.config_file import ConfigApi
    from bot.api.mcp_server import BotMcpServer, McpEndpoint
    from bot.api.mcp_tools import task_tools
    from bot.api.operations import Guard, http_problem
    from bot.api.routes import TaskApi, api_routes
    from bot.dashboard.views import Dashboard
    from bot.worker.extensions import Extensions

    # One count of failures per client for the API's bearer token and the login form.
    throttle = FailureThrottle(
        limit=server.auth_max_failures, window=server.auth_failure_window, clock=time.monotonic
    )
    proxies = _behind_proxies(server.forwarded_allow_ips)
    config = ConfigApi(settings=settings, environ=env, reload=lambda: _reload(runtime, env))
    api = TaskApi(
        runtime.store,
        settings=settings,
        forges=runtime.forge,
        user_config=runtime.user_config,
        llm_health=runtime.llm_health,
        wake=wake,
        config=config,
        slots=slots,
        extensions=Extensions(lambda: settings().mcp_servers),
    )
    problems = Middleware(ExceptionMiddleware, handlers={HTTPException: http_problem})
    guard = Guard(token, throttle)
    api_router = Router(api_routes(api, guard))
    mcp = McpEndpoint(BotMcpServer(task_tools(api)), guard)
    dashboard = Dashboard(api, token=token, throttle=throttle)
    return [
        Mount("/api", app=api_router, middleware=[*proxies, problems]),
        Route("/mcp", mcp, middleware=proxies),
        *dashboard.routes(middleware=proxies),
    ], mcp.running


def _reload(runtime: Runtime, env: Mapping[str, str]) -> list[str]:
    lines = runtime.reload(env)
    for line in lines:
        log.warning("reload (PUT /api/config): %s", line)
    return lines


def _slots(runtime: Runtime, worker: Worker | None) -> int:
    return runtime.settings.worker.max_workers if worker is not None else 0


def _behind_proxies(proxies: tuple[str, ...]) -> list[Middleware]:
    """Believing X-Forwarded-For and X-Forwarded-Proto from ``proxies`` only: the client
    address (the login throttle) and the scheme (the cookie's Secure flag) are then the
    ones the proxy saw."""
    if not proxies:
        return []
    from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

    trusted: Any = list(proxies)
    return [Middleware(ProxyHeadersMiddleware, trusted_hosts=trusted)]


def _no_worker() -> None:
    """A web replica: the worker processes poll the shared queue."""
