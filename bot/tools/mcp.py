"""MCP servers as tools: one session per configured server per task.

``McpToolset`` is an async context manager. Entering it starts every server in
``mcp_servers`` (a stdio process or a streamable HTTP connection), lists its tools
and turns each into a ``Tool`` named ``<server>_<tool>``; leaving it closes the
sessions. Each session lives in its own asyncio task, so a server that dies cannot
cancel the task that runs the agent. Handlers never raise: a crash, a timeout or an
``isError`` result comes back as ``ToolResult.fail``. A server that cannot start is
left out and named in ``unavailable``.

A stdio server gets only the ``env`` of its configuration plus ``PATH``: none of
the bot's own environment (tokens, keys) reaches it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import shutil
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import Any, TextIO

import httpx2
import jsonschema
import mcp_types
from mcp import Client, StdioServerParameters
from mcp.client.stdio import DEFAULT_INHERITED_ENV_VARS, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from bot import __version__
from bot.config import McpServer
from bot.text import clip
from bot.tools.registry import Tool, ToolResult

log = logging.getLogger(__name__)

_CLOSE_TIMEOUT = 10.0
_MAX_PAGES = 50
_FALLBACK_SCHEMA: dict[str, Any] = {"type": "object"}


class McpUnavailable(Exception):
    """An MCP server could not be started or listed."""


# --- pure helpers --------------------------------------------------------------------------


def exposed_name(server: str, tool: str) -> str:
    """``<server>_<tool>``, with characters an LLM function name cannot hold replaced."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", f"{server}_{tool}")


def stdio_parameters(server: McpServer, *, path: str) -> StdioServerParameters:
    """Launch parameters giving the server only its configured ``env`` plus ``PATH``.

    The SDK adds a few variables of its own (HOME, USER, ...) to every server it
    spawns; ``env -u`` removes those the configuration did not ask for.
    """
    if server.command is None:
        raise McpUnavailable(f"MCP server {server.name!r} has no command")
    env = {"PATH": path, **server.env}
    drop = [name for name in DEFAULT_INHERITED_ENV_VARS if name not in env]
    unset = [arg for name in drop for arg in ("-u", name)]
    return StdioServerParameters(
        command="env", args=[*unset, server.command, *server.args], env=env
    )


def usable_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The server's input schema when it is a valid JSON schema, else a plain object."""
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError:
        return dict(_FALLBACK_SCHEMA)
    return schema


def render_content(result: mcp_types.CallToolResult, *, max_chars: int) -> str:
    """The text an agent reads from a tool result, cut to ``max_chars``."""
    parts = [_render_block(block) for block in result.content]
    if not any(parts) and result.structured_content is not None:
        parts = [json.dumps(result.structured_content, ensure_ascii=False)]
    text = "\n".join(part for part in parts if part)
    return clip(text, max_chars)


def _render_block(block: mcp_types.ContentBlock) -> str:
    if isinstance(block, mcp_types.TextContent):
        return block.text
    if isinstance(block, mcp_types.ImageContent | mcp_types.AudioContent):
        return f"[{block.type}: {block.mime_type}, {len(block.data) * 3 // 4} bytes]"
    if isinstance(block, mcp_types.EmbeddedResource):
        resource = block.resource
        if isinstance(resource, mcp_types.TextResourceContents):
            return resource.text
        return f"[binary resource {resource.uri}]"
    return f"[resource link {block.uri}]"


def describe_error(exc: BaseException) -> str:
    """One line naming the innermost failures, also inside exception groups."""
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(describe_error(inner) for inner in exc.exceptions)
    text = str(exc) or "no details"
    return f"{type(exc).__name__}: {text}"


# --- one session -----------------------------------------------------------------------------


class McpSession:
    """One server's session, owned by a task of its own from start to close."""

    def __init__(
        self,
        server: McpServer,
        *,
        path: str,
        errlog: TextIO,
        max_output_chars: int,
        start_timeout: float | None = None,
    ) -> None:
        self.server = server
        self.start_timeout = start_timeout or server.timeout
        self.error: str | None = None
        self._path = path
        self._errlog = errlog
        self._max_chars = max_output_chars
        self._client: Client | None = None
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def _transport(self) -> AbstractAsyncContextManager[Any]:
        server = self.server
        if server.url is not None:
            return _http_transport(server, server.url)
        params = stdio_parameters(server, path=self._path)
        if shutil.which(server.command or "", path=self._path) is None:
            raise McpUnavailable(f"command {server.command!r} not found on PATH")
        return stdio_client(params, errlog=self._errlog)

    async def _run(self) -> None:
        try:
            transport = self._transport()
            client = Client(
                transport,
                read_timeout_seconds=self.start_timeout,
                cache=None,
                client_info=mcp_types.Implementation(name="coding-agent-bot", version=__version__),
            )
            async with client:
                self._client = client
                self._ready.set()
                await self._stop.wait()
        except McpUnavailable as exc:
            self.error = str(exc)
        except Exception as exc:  # the server's failure must not end the agent's task
            self.error = describe_error(exc)
            log.warning("MCP server %s stopped: %s", self.server.name, self.error)
        finally:
            self._client = None
            self._ready.set()

    async def start(self) -> list[mcp_types.Tool]:
        """Start the session and list the server's tools, within the server's timeout."""
        self._task = asyncio.create_task(self._run(), name=f"mcp-{self.server.name}")
        try:
            await asyncio.wait_for(self._ready.wait(), timeout=self.start_timeout)
        except TimeoutError:
            await self.close()
            raise McpUnavailable(f"did not start within {self.start_timeout:g} s") from None
        if self._client is None:
            raise McpUnavailable(self.error or "stopped while starting")
        try:
            return await self._list_tools(self._client)
        except Exception as exc:  # whatever the server answered, it has no usable tools
            await self.close()
            raise McpUnavailable(f"cannot list its tools: {describe_error(exc)}") from None

    @staticmethod
    async def _list_tools(client: Client) -> list[mcp_types.Tool]:
        tools: list[mcp_types.Tool] = []
        cursor: str | None = None
        for _ in range(_MAX_PAGES):
            page = await client.list_tools(cursor=cursor)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        return tools

    async def close(self) -> None:
        """End the session; a server still starting is given up at once."""
        self._stop.set()
        task = self._task
        if task is None or task.done():
            return
        if self._client is None:
            task.cancel()
        done, _ = await asyncio.wait({task}, timeout=_CLOSE_TIMEOUT)
        if not done:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def call(self, tool: str, arguments: dict[str, Any], *, exposed: str) -> ToolResult:
        """Call one tool; every failure is a failed result naming the server."""
        name = self.server.name
        client = self._client
        if client is None or self.error is not None:
            return ToolResult.fail(f"MCP server {name!r} is not running: {self.error or 'closed'}")
        try:
            result = await client.call_tool(
                tool, arguments, read_timeout_seconds=self.server.timeout
            )
        except MCPError as exc:
            return ToolResult.fail(self._protocol_failure(exc, exposed))
        except Exception as exc:  # a malformed answer is the server's fault, not the agent's
            return ToolResult.fail(f"MCP server {name!r} failed on {tool}: {describe_error(exc)}")
        text = render_content(result, max_chars=self._max_chars)
        if result.is_error:
            return ToolResult.fail(f"{exposed} returned an error: {text or 'no details'}")
        structured = result.structured_content
        return ToolResult.success(text, **({"structured": structured} if structured else {}))

    def _protocol_failure(self, exc: MCPError, exposed: str) -> str:
        name = self.server.name
        if exc.code == mcp_types.REQUEST_TIMEOUT:
            return f"{exposed} timed out after {self.server.timeout:g} s (MCP server {name!r})"
        if exc.code == mcp_types.CONNECTION_CLOSED:
            self.error = self.error or "the connection closed (the server may have crashed)"
            return f"MCP server {name!r} closed the connection during {exposed} (crashed?)"
        return f"MCP server {name!r} refused {exposed}: {exc.message}"


@contextlib.asynccontextmanager
async def _http_transport(server: McpServer, url: str) -> AsyncIterator[Any]:
    """Streamable HTTP with the configured headers, closing its own HTTP client."""
    timeout = httpx2.Timeout(server.timeout, read=300.0)
    async with (
        httpx2.AsyncClient(headers=server.headers, timeout=timeout) as http,
        streamable_http_client(url, http_client=http) as streams,
    ):
        yield streams


# --- the toolset -----------------------------------------------------------------------------


class McpToolset:
    """Every configured MCP server's tools for one task.

    ``start_timeout`` bounds starting a server and listing its tools (default: the
    server's ``timeout``, which bounds each call); ``environ`` gives ``PATH`` (default:
    the process environment, read when the toolset is built, nothing else of it).
    """

    def __init__(
        self,
        servers: tuple[McpServer, ...],
        *,
        environ: Mapping[str, str] | None = None,
        errlog: TextIO | None = None,
        max_output_chars: int = 20_000,
        start_timeout: float | None = None,
    ) -> None:
        self._servers = servers
        env = os.environ if environ is None else environ
        self._path = env.get("PATH", os.defpath)
        self._errlog = errlog
        self._max_chars = max_output_chars
        self._start_timeout = start_timeout
        self._sessions: list[McpSession] = []
        self.tools: list[Tool] = []
        self.unavailable: dict[str, str] = {}

    async def __aenter__(self) -> McpToolset:
        errlog = self._errlog if self._errlog is not None else sys.stderr
        sessions = [
            McpSession(
                server,
                path=self._path,
                errlog=errlog,
                max_output_chars=self._max_chars,
                start_timeout=self._start_timeout,
            )
            for server in self._servers
        ]
        self._sessions = sessions
        try:
            listings = await asyncio.gather(*(s.start() for s in sessions), return_exceptions=True)
            for session, listing in zip(sessions, listings, strict=True):
                if isinstance(listing, BaseException):
                    self._mark_unavailable(session, listing)
                else:
                    self._add_tools(session, listing)
        except BaseException:  # cancelled while starting: leave no server process behind
            await self.__aexit__(None, None, None)
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await asyncio.gather(*(s.close() for s in self._sessions))
        self._sessions = []

    def _mark_unavailable(self, session: McpSession, error: BaseException) -> None:
        if not isinstance(error, Exception):
            raise error
        reason = str(error) if isinstance(error, McpUnavailable) else describe_error(error)
        self.unavailable[session.server.name] = reason
        log.warning("MCP server %s is unavailable: %s", session.server.name, reason)

    def _add_tools(self, session: McpSession, listing: list[mcp_types.Tool]) -> None:
        taken = {tool.name for tool in self.tools}
        for remote in listing:
            name = exposed_name(session.server.name, remote.name)
            if name in taken:
                log.warning("MCP tool %s of %s skipped: name taken", remote.name, name)
                continue
            taken.add(name)
            self.tools.append(_make_tool(session, remote, name))


def _make_tool(session: McpSession, remote: mcp_types.Tool, name: str) -> Tool:
    async def handler(arguments: dict[str, Any]) -> ToolResult:
        return await session.call(remote.name, arguments, exposed=name)

    annotations = remote.annotations
    read_only = annotations is not None and annotations.read_only_hint is True
    purpose = (remote.description or remote.title or remote.name).strip()
    return Tool(
        name=name,
        purpose=f"[MCP {session.server.name}] {purpose}",
        schema=usable_schema(remote.input_schema),
        handler=handler,
        writes=not read_only,
    )
