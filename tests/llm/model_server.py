"""A local HTTP server playing a model endpoint, for tests through the real httpx client.

``ModelServer`` listens on a loopback port in a thread of its own and answers every
request with ``answer(request)``: a test says how the server behaves (which dialect
it refuses and how, when it is down) and reads back what the bot sent
(``requests``). Response bodies come from ``tests/llm/payloads.py`` (documented
shapes).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Sent:
    method: str
    path: str
    body: Any


@dataclass(frozen=True)
class Reply:
    status: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)


Answer = Callable[[Sent], Reply]


class ModelServer:
    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.requests: list[Sent] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def of(self, path: str) -> list[Sent]:
        return [r for r in self.requests if r.path == path]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # quiet
                return None

            def _serve(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                sent = Sent(self.command, self.path, json.loads(raw) if raw else None)
                with server._lock:
                    server.requests.append(sent)
                reply = server.answer(sent)
                data = json.dumps(reply.body).encode()
                self.send_response(reply.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            do_GET = _serve
            do_POST = _serve

        return Handler

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@contextmanager
def model_server(answer: Answer) -> Iterator[ModelServer]:
    server = ModelServer(answer)
    server.start()
    try:
        yield server
    finally:
        server.stop()
