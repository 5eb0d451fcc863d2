"""One offload worker process (``bot/offload.py`` decides who uses it and when).

The process is spawned (a fresh interpreter, not a fork of a process with an event
loop, threads and open connections: a fork copies locks other threads hold), runs at
a lower scheduling priority than the server, ignores Ctrl-C (the server stops it) and
leaves when the server that started it is gone. It serves one call at a time over a
socket pair: a request is the pickled ``(fn, args, kwargs)``, a reply the pickled
``(True, result)`` or ``(False, exception)``, each behind its length. The server side
reads and writes with the event loop's own socket calls, so no thread waits for a
worker, and a worker can be killed in the middle of a call without harm to the pool.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import pickle
import signal
import socket
import struct
import threading
import time
from multiprocessing.process import BaseProcess
from typing import Any

# How much lower than the server's the workers' scheduling priority is (nice(1) steps).
NICENESS = 10
# Seconds between a worker's checks that the server that started it still runs.
PARENT_POLL = 1.0
# How long a killed process is waited for before it is left to multiprocessing's reaper.
REAP_SECONDS = 5.0

_HEADER = struct.Struct("!Q")


class WorkerDied(RuntimeError):
    """The worker process running a call ended before it answered (killed, out of memory)."""


class Worker:
    """The server's handle of one worker process."""

    def __init__(self, process: BaseProcess, sock: socket.socket) -> None:
        self.process = process
        self.sock = sock

    @classmethod
    def start(cls) -> Worker:
        ours, theirs = socket.socketpair()
        context = multiprocessing.get_context("spawn")
        process = context.Process(target=serve, args=(theirs,), name="bot-offload", daemon=True)
        try:
            process.start()
        finally:
            theirs.close()
        ours.setblocking(False)
        return cls(process, ours)

    def alive(self) -> bool:
        return self.sock.fileno() >= 0 and self.process.is_alive()

    async def call(self, request: bytes) -> bytes:
        """Send one pickled request; its pickled reply (``answer`` reads it)."""
        loop = asyncio.get_running_loop()
        try:
            await loop.sock_sendall(self.sock, _HEADER.pack(len(request)) + request)
            size = _HEADER.unpack(await _receive(loop, self.sock, _HEADER.size))[0]
            return await _receive(loop, self.sock, size)
        except (ConnectionError, EOFError) as exc:
            self.process.join(0)  # collects its exit code when it has ended
            code = self.process.exitcode
            how = f" (exit code {code})" if code is not None else ""
            raise WorkerDied(f"the offload worker process ended before it answered{how}") from exc

    def kill(self) -> None:
        """End the process at once (mid-call or not) and close its socket."""
        self.sock.close()
        if self.process.is_alive():
            self.process.kill()
        # Its exit status is collected without blocking the caller (the event loop); at
        # interpreter exit no thread can start, and multiprocessing collects it.
        with contextlib.suppress(RuntimeError):
            threading.Thread(target=_reap, args=(self.process,), daemon=True).start()


async def _receive(loop: asyncio.AbstractEventLoop, sock: socket.socket, size: int) -> bytes:
    buffer = bytearray(size)
    view = memoryview(buffer)
    got = 0
    while got < size:
        n = await loop.sock_recv_into(sock, view[got:])
        if n == 0:
            raise EOFError("the worker closed its end")
        got += n
    return bytes(buffer)


def answer(reply: bytes) -> Any:
    """The result a reply carries, or the exception raised in the worker, raised here."""
    # Between the server and the worker it started, over their own socket pair.
    ok, value = pickle.loads(reply)  # noqa: S301
    if ok:
        return value
    raise value


def _reap(process: BaseProcess) -> None:
    process.join(REAP_SECONDS)


# --- inside the worker process ------------------------------------------------------------------


def serve(sock: socket.socket) -> None:
    """The worker's life: answer requests one after another until the server closes."""
    _start()
    sock.setblocking(True)
    while True:
        try:
            header = _read(sock, _HEADER.size)
            request = _read(sock, _HEADER.unpack(header)[0])
        except (EOFError, OSError):
            return  # the server closed its end, or is gone
        try:
            fn, args, kwargs = pickle.loads(request)  # noqa: S301 (from the server only)
            reply = _dumps((True, fn(*args, **kwargs)))
        except BaseException as exc:  # the caller gets it, whatever it is
            reply = _dumps((False, exc))
        sock.sendall(_HEADER.pack(len(reply)) + reply)


def _dumps(reply: tuple[bool, object]) -> bytes:
    try:
        return pickle.dumps(reply)
    except Exception as exc:  # a result or an exception that cannot be pickled
        what = "result" if reply[0] else f"exception ({type(reply[1]).__name__}: {reply[1]})"
        error = RuntimeError(f"the offload worker could not send its {what} back: {exc}")
        return pickle.dumps((False, error))


def _read(sock: socket.socket, size: int) -> bytes:
    buffer = bytearray()
    while len(buffer) < size:
        chunk = sock.recv(min(size - len(buffer), 1 << 20))
        if not chunk:
            raise EOFError
        buffer += chunk
    return bytes(buffer)


def _start() -> None:
    # Ctrl-C reaches the whole process group: the server stops its workers itself (at
    # exit), so a worker ignores it instead of printing a KeyboardInterrupt of its own.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # Tool work can wait a few milliseconds; a webhook's answer should not. When both want
    # a core, the scheduler gives it to the server's event loop first.
    os.nice(NICENESS)
    # A server that is killed (SIGKILL, the OOM killer, an unhandled SIGTERM) cannot stop
    # its workers: each one leaves when its parent is gone instead of living on.
    parent = os.getppid()
    threading.Thread(target=_follow, args=(parent,), name="parent-watch", daemon=True).start()


def _follow(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(PARENT_POLL)
    os._exit(0)
