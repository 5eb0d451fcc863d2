"""The egress proxy: how a sandboxed command with network reaches the package indexes,
and nothing else.

A sandbox with network has a network namespace of its own (only its own loopback: the
host's loopback, its other addresses and the metadata service are not routed). For
each such command the bot serves this proxy on a Unix socket bound into the sandbox;
``egress_forwarder`` relays a port of the sandbox's loopback to it and points the proxy
variables there. The proxy takes HTTP ``CONNECT`` (HTTPS, tunnelled: the client checks
the certificate) and plain ``http://`` requests, read strictly (``egress_request``:
plain host names and ports, no userinfo, no control character), resolves the name
itself (without blocking the event loop) and connects only when ``egress_policy``
allows the host and every address it resolves to; it connects to the address it
checked, so a second answer cannot point elsewhere. A host proxy is chained to, with
the request line rebuilt from the checked host, port and path, and only for a name that
resolves here to allowed addresses (no name is handed on unchecked). Connections are bounded in
number, in the size and time of the request head, and in idle time. What it refused is
kept in ``refusals`` for the command's output.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

from bot.sandbox.egress_policy import EgressPolicy, Upstream, blocked_reason, is_local_address
from bot.sandbox.egress_request import Request, parse_head

log = logging.getLogger(__name__)

MAX_CONNECTIONS = 32
HEAD_BYTES = 64 * 1024
HEAD_SECONDS = 30.0
CONNECT_SECONDS = 30.0
RESOLVE_SECONDS = 15.0
IDLE_SECONDS = 300.0
CHUNK = 64 * 1024
MAX_REFUSALS = 20
_HOP_HEADERS = frozenset(
    {"connection", "proxy-connection", "proxy-authorization", "keep-alive", "host"}
)

Resolve = Callable[[str, int], Awaitable[list[str]]]
Streams = tuple[asyncio.StreamReader, asyncio.StreamWriter]


class Refused(Exception):
    """The target may not be reached; the message says why."""


async def _resolve(host: str, port: int) -> list[str]:
    loop = asyncio.get_running_loop()
    found = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in found))


class EgressProxy:
    def __init__(
        self,
        policy: EgressPolicy,
        *,
        resolve: Resolve | None = None,
        blocked: Callable[[str], str | None] = blocked_reason,
        local: Callable[[str], bool] = is_local_address,
        max_connections: int = MAX_CONNECTIONS,
    ) -> None:
        self.policy = policy
        self.refusals: list[str] = []
        self._resolve = resolve or _resolve
        self._blocked = blocked
        self._local = local
        self._max = max_connections
        self._open = 0
        self._handlers: set[asyncio.Task[None]] = set()

    @property
    def open_connections(self) -> int:
        return self._open

    @contextlib.asynccontextmanager
    async def serving(self, path: Path) -> AsyncIterator[Path]:
        """Serve on the Unix socket ``path`` until the block ends; every connection
        still open then is closed."""
        server = await asyncio.start_unix_server(self._handle, path=str(path), limit=HEAD_BYTES)
        try:
            yield path
        finally:
            server.close()
            for task in list(self._handlers):
                task.cancel()
            await asyncio.gather(*self._handlers, return_exceptions=True)
            await server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        self._open += 1
        try:
            await self._serve(reader, writer, crowded=self._open > self._max)
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
            pass
        finally:
            self._open -= 1
            self._handlers.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _serve(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, crowded: bool
    ) -> None:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_SECONDS)
        if crowded:  # answered once its head is read: an unread request resets the socket
            await _answer(writer, 503, "too many connections through the egress proxy")
            return
        try:
            request = parse_head(head[:-4])
        except ValueError as exc:
            await _answer(writer, 400, str(exc))
            return
        try:
            upstream = await self._connect(request)
        except Refused as exc:
            self._refuse(request, str(exc))
            await _answer(writer, 403, f"egress refused: {exc}")
            return
        up_reader, up_writer = upstream
        try:
            if request.tls:
                writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            else:
                up_writer.write(self._forward_head(request))
            await _relay(reader, writer, up_reader, up_writer)
        finally:
            up_writer.close()

    def _refuse(self, request: Request, why: str) -> None:
        line = f"{request.method} {request.host}:{request.port} refused: {why}"
        log.warning("egress proxy: %s", line)
        if len(self.refusals) < MAX_REFUSALS:
            self.refusals.append(line)

    async def _connect(self, request: Request) -> Streams:
        host, port = request.host, request.port
        literal = request.address is not None
        if literal and (why := self._address_refusal(host)):
            raise Refused(f"{host} is {why}")
        if not self.policy.allowed(host, port):  # before any look-up: no name leaks out
            raise Refused(
                f"{host}:{port} is not a package index this server allows "
                "(the host's pip and npm configuration and sandbox.egress_allow)"
            )
        upstream = self.policy.upstream(host, tls=request.tls)
        if literal:
            addresses = [host]
        else:
            try:  # through the host's proxy too: no name is handed on unchecked
                addresses = await asyncio.wait_for(self._resolve(host, port), RESOLVE_SECONDS)
            except (OSError, TimeoutError) as exc:
                raise Refused(f"{host} cannot be resolved here ({exc or 'timed out'})") from None
        if not addresses:
            raise Refused(f"{host} has no address")
        for address in addresses:
            if why := self._address_refusal(address):
                raise Refused(f"{host} resolves to {address}: {why}")
        if upstream is not None:
            return await _through(upstream, request)
        return await _first_connection(addresses, port)

    def _address_refusal(self, address: str) -> str | None:
        return self._blocked(address) or (
            "an address of this host" if self._local(address) else None
        )

    def _forward_head(self, request: Request) -> bytes:
        """The request head forwarded, rebuilt from the checked parts: the target (the
        absolute URL for the host's proxy, the path for the index) and ``Host``."""
        upstream = self.policy.upstream(request.host, tls=False)
        extra = [("Host", request.authority.removesuffix(":80"))]
        if upstream is not None:
            target = request.url
            if upstream.authorization:
                extra.append(("Proxy-Authorization", upstream.authorization))
        else:
            target = request.path
        kept = [(k, v) for k, v in request.headers if k.lower() not in _HOP_HEADERS]
        lines = [f"{request.method} {target} {request.version}"]
        lines += [f"{k}: {v}" for k, v in [*kept, *extra, ("Connection", "close")]]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


async def _first_connection(addresses: list[str], port: int) -> Streams:
    errors = []
    for address in addresses:
        try:
            return await asyncio.wait_for(
                asyncio.open_connection(address, port, limit=CHUNK), CONNECT_SECONDS
            )
        except (OSError, TimeoutError) as exc:
            errors.append(f"{address}: {exc or 'timed out'}")
    raise Refused(f"no connection: {'; '.join(errors) or 'no address'}")


async def _through(upstream: Upstream, request: Request) -> Streams:
    """A connection through the host's own proxy (a tunnel for ``CONNECT``)."""
    try:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(upstream.host, upstream.port, limit=HEAD_BYTES),
            CONNECT_SECONDS,
        )
    except (OSError, TimeoutError) as exc:
        raise Refused(f"the host's proxy {upstream.host}:{upstream.port}: {exc}") from None
    if not request.tls:
        return reader, writer
    target = request.authority  # the checked host and port, never the client's text
    lines = [f"CONNECT {target} HTTP/1.1", f"Host: {target}"]
    if upstream.authorization:
        lines.append(f"Proxy-Authorization: {upstream.authorization}")
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
    try:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_SECONDS)
    except (OSError, TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
        writer.close()
        raise Refused(f"the host's proxy {upstream.host}:{upstream.port} did not answer") from None
    status = head.split(b"\r\n", 1)[0].decode("latin-1")
    if len(status.split()) < 2 or status.split()[1] != "200":
        writer.close()
        raise Refused(f"the host's proxy answered {status!r}")
    return reader, writer


async def _answer(writer: asyncio.StreamWriter, status: int, text: str) -> None:
    reason = {400: "Bad Request", 403: "Forbidden", 503: "Service Unavailable"}[status]
    body = (text + "\n").encode()
    head = (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    writer.write(head.encode() + body)
    await writer.drain()


async def _relay(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    up_reader: asyncio.StreamReader,
    up_writer: asyncio.StreamWriter,
) -> None:
    """Copy both ways until both sides end, or nothing moves for ``IDLE_SECONDS``."""
    last = [time.monotonic()]

    async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        while True:
            try:
                data = await asyncio.wait_for(source.read(CHUNK), IDLE_SECONDS)
            except TimeoutError:
                if time.monotonic() - last[0] < IDLE_SECONDS:
                    continue  # the other direction is busy (a long download)
                raise
            if not data:
                if sink.can_write_eof():
                    sink.write_eof()
                return
            last[0] = time.monotonic()
            sink.write(data)
            await sink.drain()

    pipes = [
        asyncio.ensure_future(pipe(reader, up_writer)),
        asyncio.ensure_future(pipe(up_reader, writer)),
    ]
    try:
        done, _ = await asyncio.wait(pipes, return_when=asyncio.FIRST_EXCEPTION)
        for task in done:
            task.result()
    finally:
        for task in pipes:
            task.cancel()
        await asyncio.gather(*pipes, return_exceptions=True)
