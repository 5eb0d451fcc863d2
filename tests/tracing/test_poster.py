"""The export process's POST of delivery spans: one kept connection (a new one, at once,
when the receiver closed it), the headers and path OTLP/HTTP expects, and a proxy named by
the environment honoured."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from bot.tracing.otlp import Encoder, Poster
from tests.tracing.conftest import Receiver

BODY = Encoder({"service.name": "bot-web"}).request(b"")


def test_batches_reach_the_receiver_with_the_collectors_headers(receiver: Receiver) -> None:
    poster = Poster(f"{receiver.url}/v1/traces", {"authorization": "Bearer k"}, timeout=5,
                    compression="none")  # fmt: skip
    try:
        assert poster.post(BODY) and poster.post(BODY)  # the receiver closes after each
    finally:
        poster.close()
    assert receiver.paths == ["/v1/traces"] * 2
    assert {h["authorization"] for h in receiver.headers} == {"Bearer k"}
    assert {h["content-type"] for h in receiver.headers} == {"application/x-protobuf"}


@pytest.fixture
def closes_idle() -> Iterator[tuple[str, list[bytes]]]:
    """A receiver that answers each connection's first request as if it kept it open
    (HTTP/1.1, no ``connection: close``), then closes it."""
    server = socket.create_server(("127.0.0.1", 0))
    seen: list[bytes] = []

    def serve() -> None:
        while True:
            try:
                connection, _ = server.accept()
            except OSError:
                return
            with connection:
                data = b""
                while b"\r\n\r\n" not in data:
                    data += connection.recv(65536)
                head, _, rest = data.partition(b"\r\n\r\n")
                size = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
                while len(rest) < size:
                    rest += connection.recv(65536)
                seen.append(head.split(b"\r\n")[0])
                connection.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
                time.sleep(0.05)  # closed while the client thinks it is kept

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}/v1/traces", seen
    finally:
        server.close()
        thread.join(5)


def test_a_kept_connection_the_receiver_closed_is_opened_again_at_once(
    closes_idle: tuple[str, list[bytes]],
) -> None:
    url, seen = closes_idle
    poster = Poster(url, {}, timeout=5, compression="none")
    try:
        assert poster.post(BODY)
        time.sleep(0.2)
        started = time.monotonic()
        assert poster.post(BODY)
        assert time.monotonic() - started < 0.9  # no back-off: the retry waits a second
    finally:
        poster.close()
    assert seen == [b"POST /v1/traces HTTP/1.1"] * 2


def test_a_proxy_named_by_the_environment_is_used(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("no_proxy", "NO_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", receiver.url)  # the receiver plays the proxy
    poster = Poster("http://collector.invalid:4318/v1/traces", {}, timeout=5,
                    compression="none")  # fmt: skip
    try:
        assert poster.post(BODY)
    finally:
        poster.close()
    assert receiver.paths == ["http://collector.invalid:4318/v1/traces"]
