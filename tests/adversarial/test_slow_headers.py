"""Slow headers against a real ``bot serve`` (uvicorn) on loopback, with raw sockets.

300 clients each send a request line and then one header line every half second, never
finishing their headers. The server closes each one within ``server.header_timeout``
(with 408, as they sent something), answers ``/healthz`` meanwhile, and, with an
open-file limit too low for them all, turns the surplus away at once instead of running
out of files: ``/healthz`` answers within the header deadline there too.
"""

from __future__ import annotations

import contextlib
import resource
import selectors
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx

from tests.harness import GITHUB_SECRET, ROOT
from tests.test_cli import base_env, free_port, wait_ready

CLIENTS = 300
HEADER_TIMEOUT = 2.0
LINE_EVERY = 0.5  # seconds between one client's header lines
SLACK = 3.0  # a shared, loaded machine: scheduling delay on top of the deadline


@contextlib.contextmanager
def bot_serve(tmp_path: Path, *, files: int | None = None) -> Iterator[int]:
    """``bot serve --role web`` with ``header_timeout`` 2 s; ``files``: its open-file limit."""
    config = tmp_path / "config.yaml"
    config.write_text(f"server:\n  header_timeout: {HEADER_TIMEOUT}\n", encoding="utf-8")
    port = free_port()
    env = base_env(
        tmp_path, BOT_CONFIG=str(config), GITHUB_WEBHOOK_SECRET=GITHUB_SECRET, GITHUB_TOKEN="t"
    )
    limit: Callable[[], None] | None = None
    if files is not None:

        def limit() -> None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (files, files))

    proc = subprocess.Popen(
        [sys.executable, "-m", "bot", "serve", "--role", "web", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=limit,  # a plain setrlimit in the child, before it starts threads
    )
    try:
        wait_ready(port)
        yield port
        assert proc.poll() is None, "the server died"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class SlowClients:
    """``CLIENTS`` raw sockets that send headers slowly and note when they are closed."""

    def __init__(self, port: int) -> None:
        self.selector = selectors.DefaultSelector()
        self.opened: dict[socket.socket, float] = {}
        self.closed: dict[socket.socket, float] = {}
        self.answers: dict[socket.socket, bytes] = {}
        for _ in range(CLIENTS):
            sock = socket.create_connection(("127.0.0.1", port), timeout=5)
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: bot\r\n")
            sock.setblocking(False)
            self.opened[sock] = time.monotonic()
            self.answers[sock] = b""
            self.selector.register(sock, selectors.EVENT_READ)
        self.next_line = time.monotonic() + LINE_EVERY
        self.lines = 0

    def open(self) -> list[socket.socket]:
        return [s for s in self.opened if s not in self.closed]

    def step(self, until: float) -> None:
        """Read what the server sends and send the next header lines, until ``until``."""
        while (now := time.monotonic()) < until:
            for key, _ in self.selector.select(timeout=max(0.0, min(until, self.next_line) - now)):
                self._read(key.fileobj)  # type: ignore[arg-type]
            if time.monotonic() >= self.next_line:
                self.lines += 1
                for sock in self.open():
                    with contextlib.suppress(OSError):  # closed meanwhile: read says so
                        sock.send(b"X-Slow-%d: still coming\r\n" % self.lines)
                self.next_line += LINE_EVERY

    def _read(self, sock: socket.socket) -> None:
        try:
            data = sock.recv(4096)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        self.answers[sock] += data
        if not data:
            self.closed[sock] = time.monotonic()
            self.selector.unregister(sock)

    def close(self) -> None:
        for sock in self.opened:
            sock.close()
        self.selector.close()


def healthz(port: int, *, within: float) -> tuple[int, float]:
    """The first 200 of /healthz within ``within`` seconds (new connections; a 503 or a
    refused connection is tried again): (status, seconds it took)."""
    start = time.monotonic()
    status = 0
    while time.monotonic() - start < within:
        try:
            status = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code
        except httpx.HTTPError:
            status = 0
        if status == 200:
            break
        time.sleep(0.1)
    return status, time.monotonic() - start


def test_slow_headers_are_closed_within_the_header_timeout(tmp_path: Path) -> None:
    with bot_serve(tmp_path) as port:
        clients = SlowClients(port)
        try:
            clients.step(time.monotonic() + 1.0)
            assert len(clients.open()) == CLIENTS, "closed before the deadline"
            status, took = healthz(port, within=HEADER_TIMEOUT)
            assert status == 200 and took < 1.5, (status, took)
            clients.step(time.monotonic() + HEADER_TIMEOUT + SLACK)
        finally:
            clients.close()
        assert clients.open() == [], f"{len(clients.open())} slow clients still held"
        held = [clients.closed[s] - clients.opened[s] for s in clients.opened]
        assert min(held) >= HEADER_TIMEOUT - 0.1, min(held)
        assert max(held) <= HEADER_TIMEOUT + SLACK, max(held)
        assert clients.lines >= 3  # they kept sending lines all along
        answers = {bytes(a.split(b"\r\n", 1)[0]) for a in clients.answers.values()}
        assert answers == {b"HTTP/1.1 408 Request Timeout"}, answers
        assert healthz(port, within=5)[0] == 200


def test_with_too_few_open_files_the_surplus_is_turned_away_and_healthz_answers(
    tmp_path: Path,
) -> None:
    # 256 files leave room for 128 connections beside what the process itself holds.
    with bot_serve(tmp_path, files=256) as port:
        clients = SlowClients(port)
        try:
            clients.step(time.monotonic() + 0.5)
            status, took = healthz(port, within=HEADER_TIMEOUT + SLACK)
            assert status == 200, f"/healthz did not answer within {took:.1f} s"
            clients.step(time.monotonic() + HEADER_TIMEOUT + SLACK)
        finally:
            clients.close()
        assert clients.open() == []
        firsts = [bytes(a.split(b"\r\n", 1)[0]) for a in clients.answers.values()]
        assert b"HTTP/1.1 503 Service Unavailable" in firsts  # beyond the cap: at once
        assert b"HTTP/1.1 408 Request Timeout" in firsts  # the ones held: at the deadline


def read_until_closed(sock: socket.socket, within: float) -> tuple[bytes, float]:
    """Everything the server sends until it closes, and when it closed (monotonic)."""
    sock.settimeout(within)
    data = b""
    with contextlib.suppress(OSError):
        while chunk := sock.recv(65536):
            data += chunk
    return data, time.monotonic()


def test_a_kept_alive_connection_gets_the_deadline_again_and_huge_headers_get_431(
    tmp_path: Path,
) -> None:
    with bot_serve(tmp_path) as port:
        # One answer, then the next request's headers a line at a time: each byte would
        # reset uvicorn's keep-alive timer, but the header deadline runs from the answer.
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: bot\r\n\r\n")
            first = b""
            while not first.endswith(b"\r\n\r\nok"):  # the whole answer, however it arrives
                chunk = sock.recv(4096)
                assert chunk, first
                first += chunk
            assert first.startswith(b"HTTP/1.1 200")
            answered = time.monotonic()
            sock.sendall(b"GET /healthz HTTP/1.1\r\n")
            for n in range(int((HEADER_TIMEOUT + SLACK) / LINE_EVERY)):
                time.sleep(LINE_EVERY)
                try:
                    sock.sendall(b"X-Slow-%d: y\r\n" % n)
                except OSError:
                    break
            data, closed = read_until_closed(sock, 1.0)
        assert data.startswith(b"HTTP/1.1 408"), data[:80]
        assert HEADER_TIMEOUT - 0.1 <= closed - answered <= HEADER_TIMEOUT + SLACK

        # Headers larger than 64 KiB, sent at once: refused without waiting for the rest.
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: bot\r\n")
            with contextlib.suppress(OSError):
                for n in range(100):
                    sock.sendall(b"X-Big-%d: %s\r\n" % (n, b"a" * 1000))
            data, _ = read_until_closed(sock, 5.0)
        assert data.startswith(b"HTTP/1.1 431"), data[:80]
        assert healthz(port, within=5)[0] == 200
