"""The configured MCP servers as the operator sees them (``GET /api/extensions``, the
settings page): each started as a task would start it, its tools listed, then closed.
A probe starts processes, so its answer is kept ``KEEP_SECONDS`` (one probe at a time)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from bot.config import McpServer
from bot.tools.mcp import McpToolset

KEEP_SECONDS = 60.0
START_SECONDS = 20.0


class ExtensionState(StrEnum):
    READY = "ready"  # started and listed its tools
    UNAVAILABLE = "unavailable"  # did not start, or did not list its tools


@dataclass(frozen=True, slots=True)
class ExtensionTool:
    name: str  # as the agent sees it: <server>_<tool>
    description: str


@dataclass(frozen=True, slots=True)
class Extension:
    name: str
    transport: str  # stdio | http
    target: str  # the command, or the URL without its query
    state: ExtensionState
    error: str
    tools: tuple[ExtensionTool, ...]


async def probe(servers: tuple[McpServer, ...]) -> list[Extension]:
    """Start every server, list its tools, close them all."""
    if not servers:
        return []
    async with McpToolset(servers, start_timeout=START_SECONDS) as toolset:
        found = []
        for server in servers:
            prefix = f"[MCP {server.name}] "
            tools = tuple(
                ExtensionTool(tool.name, tool.purpose.removeprefix(prefix))
                for tool in toolset.tools
                if tool.purpose.startswith(prefix)
            )
            error = toolset.unavailable.get(server.name, "")
            found.append(
                Extension(
                    name=server.name,
                    transport="http" if server.url else "stdio",
                    target=(server.url or "").split("?")[0] or (server.command or ""),
                    state=ExtensionState.UNAVAILABLE if error else ExtensionState.READY,
                    error=error,
                    tools=tools,
                )
            )
        return found


class Extensions:
    """The last probe of ``servers()`` (the settings now), kept ``KEEP_SECONDS`` while
    the servers' configuration stays the same."""

    def __init__(
        self,
        servers: Callable[[], tuple[McpServer, ...]],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._servers = servers
        self._clock = clock
        self._kept: tuple[float, tuple[McpServer, ...], list[Extension]] | None = None
        self._lock = asyncio.Lock()

    async def __call__(self) -> list[Extension]:
        async with self._lock:
            servers = self._servers()
            kept = self._kept
            if kept is not None and kept[1] == servers and self._clock() - kept[0] < KEEP_SECONDS:
                return kept[2]
            found = await probe(servers)
            self._kept = (self._clock(), servers, found)
            return found
