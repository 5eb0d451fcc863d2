"""Inside a sandbox with network: the one door out, to the bot's egress proxy.

The sandbox has a network namespace of its own, with nothing but its own loopback.
This program, started in it as ``python3 -I -S -c <this source> SOCKET -- ARGV...``,
listens on 127.0.0.1 (a free port of that namespace), forks a relay that copies each
connection to the proxy's Unix socket ``SOCKET`` (bound into the sandbox), points the
proxy variables of pip, npm, git, curl and the rest at the port, and replaces itself
with the command (whose exit status is the command's own). The relay ends with the
sandbox's PID namespace when the command ends.

Standard library only, one process (no threads: the process limit counts them), and
nothing of the bot is imported: the sandbox may not see the bot's installation.
"""

from __future__ import annotations

import os
import selectors
import socket
import sys

PROXY_VARIABLES = (
    "http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "all_proxy",
    "npm_config_proxy", "npm_config_https_proxy", "PIP_PROXY",
)  # fmt: skip
NO_PROXY = "localhost,127.0.0.1,::1"
MAX_CONNECTIONS = 64
CHUNK = 65536


class Pair:
    """One relayed connection: the client's socket and the proxy's, with what each side
    sent that the other has not taken yet."""

    def __init__(self, client: socket.socket, proxy: socket.socket) -> None:
        self.ends = (client, proxy)
        self.pending = {client: b"", proxy: b""}  # bytes waiting to be written TO the key
        self.finished: set[socket.socket] = set()  # sides that sent EOF

    def other(self, end: socket.socket) -> socket.socket:
        return self.ends[1] if end is self.ends[0] else self.ends[0]


def interest(pair: Pair, end: socket.socket) -> int:
    other = pair.other(end)
    events = 0
    if end not in pair.finished and not pair.pending[other]:
        events |= selectors.EVENT_READ  # read only when the last chunk was passed on
    if pair.pending[end]:
        events |= selectors.EVENT_WRITE
    return events


def update(selector: selectors.BaseSelector, pair: Pair) -> None:
    for end in pair.ends:
        events = interest(pair, end)
        registered = end in selector.get_map()
        if events and registered:
            selector.modify(end, events, pair)
        elif events:
            selector.register(end, events, pair)
        elif registered:
            selector.unregister(end)


def close(selector: selectors.BaseSelector, pair: Pair, pairs: set[Pair]) -> None:
    for end in pair.ends:
        if end in selector.get_map():
            selector.unregister(end)
        end.close()
    pairs.discard(pair)


def step(pair: Pair, end: socket.socket, events: int) -> bool:
    """Move bytes for ``end``; False when the pair is done (both sides ended, or an error)."""
    other = pair.other(end)
    if events & selectors.EVENT_WRITE and pair.pending[end]:
        sent = end.send(pair.pending[end])
        pair.pending[end] = pair.pending[end][sent:]
        if not pair.pending[end] and other in pair.finished:
            end.shutdown(socket.SHUT_WR)
    if events & selectors.EVENT_READ:
        data = end.recv(CHUNK)
        if data:
            pair.pending[other] += data
        else:
            pair.finished.add(end)
            if not pair.pending[other]:
                other.shutdown(socket.SHUT_WR)
    done = all(e in pair.finished for e in pair.ends)
    return not (done and not any(pair.pending.values()))


def serve(listener: socket.socket, path: str) -> None:
    selector = selectors.DefaultSelector()
    listener.setblocking(False)
    selector.register(listener, selectors.EVENT_READ, None)
    pairs: set[Pair] = set()
    while True:
        for key, events in selector.select():
            if key.data is None:
                accept(listener, path, selector, pairs)
                continue
            pair: Pair = key.data
            end = key.fileobj
            assert isinstance(end, socket.socket)
            try:
                going = step(pair, end, events)
            except (BlockingIOError, InterruptedError):
                going = True  # nothing moved this time; the selector asks again
            except OSError:
                going = False
            if going:
                update(selector, pair)
            else:
                close(selector, pair, pairs)


def accept(
    listener: socket.socket, path: str, selector: selectors.BaseSelector, pairs: set[Pair]
) -> None:
    try:
        client, _ = listener.accept()
    except OSError:
        return
    if len(pairs) >= MAX_CONNECTIONS:
        client.close()
        return
    proxy = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        proxy.connect(path)
    except OSError:
        client.close()
        proxy.close()
        return
    client.setblocking(False)
    proxy.setblocking(False)
    pair = Pair(client, proxy)
    pairs.add(pair)
    update(selector, pair)


def main(argv: list[str]) -> None:
    if len(argv) < 4 or argv[2] != "--":
        sys.exit("usage: egress_forwarder SOCKET -- ARGV...")
    path, command = argv[1], argv[3:]
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(MAX_CONNECTIONS)
    port = listener.getsockname()[1]
    if os.fork() == 0:
        quiet = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):  # the command's output pipes must close when it ends
            os.dup2(quiet, fd)
        try:
            serve(listener, path)
        finally:
            os._exit(0)
    listener.close()
    url = f"http://127.0.0.1:{port}"
    for name in PROXY_VARIABLES:
        os.environ[name] = url
    for name in ("no_proxy", "NO_PROXY", "npm_config_noproxy"):
        os.environ[name] = NO_PROXY
    try:
        os.execvp(command[0], command)  # noqa: S606 (the command, as an argv list)
    except OSError as exc:
        print(f"{command[0]}: {exc.strerror}", file=sys.stderr)
        sys.exit(127)


if __name__ == "__main__":
    main(sys.argv)
