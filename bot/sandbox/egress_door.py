"""The egress "door" of one sandboxed command with network: the egress proxy served on a
Unix socket in a private folder for the length of the command, the forwarder that relays
the sandbox's loopback to it, and what the proxy refused added to the command's stderr.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import os
import shutil
import sys
import tempfile
from pathlib import Path

from bot.sandbox.bwrap import DEFAULT_PATH
from bot.sandbox.egress import EgressProxy, Resolve
from bot.sandbox.egress_policy import EgressPolicy
from bot.sandbox.process import CommandResult


async def open_door(policy: EgressPolicy, resolve: Resolve | None) -> Door:
    """The egress proxy on a Unix socket in a private folder, for the length of the
    command (``close_door``)."""
    folder = Path(tempfile.mkdtemp(prefix="agent-egress-"))
    proxy = EgressProxy(policy, resolve=resolve)
    stack = contextlib.AsyncExitStack()
    stack.callback(shutil.rmtree, folder, ignore_errors=True)
    try:
        socket_path = await stack.enter_async_context(proxy.serving(folder / "proxy.sock"))
    except BaseException:
        await stack.aclose()
        raise
    return Door(proxy, socket_path, stack)


async def forwarder_argv(egress_socket: Path) -> list[str]:
    """The forwarder that relays the sandbox's loopback to the proxy at ``egress_socket``
    and then starts the command (the command's argv follows)."""
    source = await asyncio.to_thread(forwarder_source)
    return [forwarder_python(), "-I", "-S", "-c", source, str(egress_socket), "--"]


@dataclasses.dataclass(frozen=True, slots=True)
class Door:
    """The egress proxy of one command, its socket, and what closes both."""

    proxy: EgressProxy
    socket: Path
    stack: contextlib.AsyncExitStack


async def close_door(door: Door | None) -> None:
    if door is not None:
        await door.stack.aclose()


def with_refusals(result: CommandResult, door: Door | None) -> CommandResult:
    """What the egress proxy refused, at the end of the command's stderr."""
    if door is None or not door.proxy.refusals:
        return result
    refused = "".join(f"egress proxy: {line}\n" for line in door.proxy.refusals)
    sep = "\n" if result.stderr and not result.stderr.endswith("\n") else ""
    return dataclasses.replace(result, stderr=result.stderr + sep + refused)


@functools.cache
def forwarder_source() -> str:
    from bot.sandbox import egress_forwarder

    return Path(egress_forwarder.__file__).read_text("utf-8")


def forwarder_python() -> str:
    """The interpreter that runs the forwarder inside the sandbox: the system's python3
    (the bot's own may live in a hidden folder), else the bot's."""
    return shutil.which("python3", path=DEFAULT_PATH) or os.path.realpath(sys.executable)
