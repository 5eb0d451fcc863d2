"""A small, real MCP server for the tests, built with the MCP SDK's server API.

Run it as a program:

    python mcp_server_fixture.py stdio
    python mcp_server_fixture.py http          # prints "PORT <n>" once it listens

Over HTTP it binds a free loopback port itself and prints it, so tests never race
for a port. Tools: ``echo``, ``add``, ``fail`` (returns an error result), ``crash``
(kills the process), ``slow`` (sleeps), ``pid`` (the server's process id, to prove
one process serves a whole session), ``getenv`` (what the server's environment
holds) and ``header`` (a request header, HTTP only).
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys

import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("fixture", log_level="WARNING")


@server.tool(description="Return the text unchanged.")
def echo(text: str) -> str:
    return text


@server.tool(description="Add two integers.")
def add(a: int, b: int) -> int:
    return a + b


@server.tool(description="Always fails with the given reason.")
def fail(reason: str = "it went wrong") -> str:
    raise ToolError(f"fail: {reason}")


@server.tool(description="Kill the server process at once.")
def crash() -> str:
    os._exit(3)


@server.tool(description="Sleep for the given number of seconds, then answer.")
async def slow(seconds: float) -> str:
    await asyncio.sleep(seconds)
    return f"slept {seconds}"


@server.tool(description="The server's process id.")
def pid() -> int:
    return os.getpid()


@server.tool(description="The value of an environment variable in the server, or <unset>.")
def getenv(name: str) -> str:
    return os.environ.get(name, "<unset>")


@server.tool(description="The value of a request header (HTTP only), or <unset>.")
def header(name: str, ctx: Context) -> str:
    headers = ctx.headers or {}
    return str(headers.get(name.lower(), "<unset>"))


def _serve_http() -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)  # connections queue from now on, before uvicorn accepts them
    port = sock.getsockname()[1]
    app = server.streamable_http_app(host="127.0.0.1")
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    print(f"PORT {port}", flush=True)
    asyncio.run(uvicorn.Server(config).serve(sockets=[sock]))


def main(argv: list[str]) -> int:
    mode = argv[1] if len(argv) > 1 else "stdio"
    if mode == "stdio":
        server.run("stdio")
    elif mode == "http":
        _serve_http()
    else:
        print(f"unknown mode {mode!r}: use stdio or http", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
