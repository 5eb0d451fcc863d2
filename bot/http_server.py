"""How ``bot serve`` runs uvicorn: limits on the connections it holds.

uvicorn's HTTP protocol closes an idle kept-alive connection after ``timeout_keep_alive``,
but puts no deadline on a request's headers: a client that connects and sends one header
line every few seconds holds its connection (and an open file) for as long as it likes.
``header_deadline_protocol`` is uvicorn's own httptools protocol with that deadline
(``server.header_timeout``) and a bound on the bytes a request's headers may take, and it
turns away at once a connection beyond ``server.limit_concurrency``, so slow clients can
never use up the open files the rest of the process needs. ``connection_cap`` fits that
limit to the process's open-file limit. Nothing here touches the webhook path itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import resource
from typing import Any

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from bot.config import Settings

log = logging.getLogger("bot.http_server")

MAX_HEADER_BYTES = 64 * 1024  # a request's line and headers; more: 431 and closed
RESERVED_FILES = 128  # open files kept for the store, git and sandbox pipes, HTTP clients


def _answer(status: bytes, text: bytes) -> bytes:
    return b"".join(
        [
            b"HTTP/1.1 ",
            status,
            b"\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: ",
            str(len(text)).encode(),
            b"\r\nconnection: close\r\n\r\n",
            text,
        ]
    )


TOO_SLOW = _answer(b"408 Request Timeout", b"the request headers did not arrive in time")
TOO_LARGE = _answer(b"431 Request Header Fields Too Large", b"the request headers are too large")
TOO_MANY = _answer(b"503 Service Unavailable", b"too many connections")


class HeaderDeadlineProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a deadline and a size bound on request headers,
    and a cap on the connections held at once (the class attributes, set by
    ``header_deadline_protocol``).

    The deadline runs from the connection's start, and again from each answer on a
    kept-alive connection, until a request's headers are complete; it never runs while
    a request is being handled or its body read (``server.body_timeout`` bounds that)."""

    header_timeout: float = 10.0
    max_connections: int = 1000
    max_header_bytes: int = MAX_HEADER_BYTES

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None
        self._header_bytes = 0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.max_connections:
            transport.write(TOO_MANY)
            transport.close()
            return
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        waiting = self._deadline is not None
        super().data_received(data)
        if not waiting or self._deadline is None:
            return  # handling a request, or its headers are complete now
        self._header_bytes += len(data)
        if self._header_bytes > self.max_header_bytes and not self.transport.is_closing():
            self._refuse(TOO_LARGE)

    def on_headers_complete(self) -> None:
        self._disarm()
        super().on_headers_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        idle = self.cycle is None or self.cycle.response_complete
        if idle and not self.transport.is_closing():
            self._arm()

    def _arm(self) -> None:
        self._disarm()
        self._header_bytes = 0
        self._deadline = self.loop.call_later(self.header_timeout, self._too_slow)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _too_slow(self) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        # A client that sent nothing since its last answer is only idle: close quietly.
        self._refuse(TOO_SLOW if self._header_bytes else b"")

    def _refuse(self, answer: bytes) -> None:
        self._disarm()
        if answer:
            self.transport.write(answer)
        self.transport.close()


def header_deadline_protocol(
    *, header_timeout: float, max_connections: int
) -> type[HeaderDeadlineProtocol]:
    """The protocol class for one server's settings."""
    return type(
        "BotHttpProtocol",
        (HeaderDeadlineProtocol,),
        {"header_timeout": header_timeout, "max_connections": max_connections},
    )


def fit_to_file_limit(wanted: int, soft: int, hard: int) -> tuple[int, int]:
    """(the soft open-file limit to ask for, the connections to allow). Pure.

    The soft limit is raised toward the hard one to fit ``wanted`` connections and
    ``RESERVED_FILES``; when the hard limit is too low, the connections are lowered to
    what it leaves (at least half of it)."""
    unlimited = resource.RLIM_INFINITY
    need = wanted + RESERVED_FILES
    if soft == unlimited or soft >= need:
        return soft, wanted
    raised = need if hard == unlimited else min(need, hard)
    return raised, min(wanted, max(raised - RESERVED_FILES, raised // 2))


def connection_cap(wanted: int) -> int:
    """The connections this process can hold: ``wanted`` when the open-file limit allows
    it (raising the soft limit if need be), else fewer, with a warning."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    raised, cap = fit_to_file_limit(wanted, soft, hard)
    if raised != soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
        except (ValueError, OSError) as exc:
            log.warning("could not raise the open-file limit to %d: %s", raised, exc)
            _, cap = fit_to_file_limit(wanted, soft, soft)
    if cap < wanted:
        log.warning(
            "server.limit_concurrency is %d, but the open-file limit (%d) leaves room for "
            "%d connections: using %d (raise LimitNOFILE= or ulimit -n)",
            wanted, min(raised, hard), cap, cap,
        )  # fmt: skip
    return cap


def server_config(app: Any, settings: Settings, *, max_connections: int) -> uvicorn.Config:
    """The uvicorn configuration ``bot serve`` runs ``app`` with."""
    server = settings.server
    protocol = header_deadline_protocol(
        header_timeout=server.header_timeout, max_connections=max_connections
    )
    return uvicorn.Config(
        app,
        host=server.host,
        port=server.port,
        http=protocol,
        ws="none",
        log_config=None,
        access_log=False,
        # X-Forwarded-* are read by the app itself, from server.forwarded_allow_ips only
        # (bot.app); uvicorn's own reading would believe loopback by default.
        proxy_headers=False,
        server_header=False,
        limit_concurrency=max_connections,
        timeout_keep_alive=server.keep_alive_timeout,
    )


def run(app: Any, settings: Settings) -> None:
    """Serve ``app`` until SIGINT/SIGTERM (as ``uvicorn.run`` does)."""
    config = server_config(
        app, settings, max_connections=connection_cap(settings.server.limit_concurrency)
    )
    server = uvicorn.Server(config)
    with contextlib.suppress(KeyboardInterrupt):  # a second Ctrl-C during shutdown
        server.run()
    if not server.started:
        raise SystemExit(3)  # uvicorn's start-up failure (the port taken, the app refused)
