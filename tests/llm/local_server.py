"""A model endpoint on loopback for tests that go through the real HTTP client and
sockets: a stdlib HTTP server in a thread that answers each request with what its
``answer`` function returns for it, and records every request.

``answer(path, body) -> (status, json)`` (``body`` None for a GET, e.g. the model list);
``Queue`` answers a fixed list in order; ``model_server.py`` answers by a function of the
whole request. The bodies are the providers' documented shapes (``tests/llm/payloads.py``).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Answer = Callable[[str, Any], tuple[int, Any]]


@dataclass(frozen=True, slots=True)
class Recorded:
    path: str
    headers: dict[str, str]
    body: Any
    method: str = "POST"


class ModelServer:
    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.requests: list[Recorded] = []
        self.url = ""

    def bodies(self) -> list[Any]:
        return [r.body for r in self.requests]

    def of(self, path: str) -> list[Recorded]:
        return [r for r in self.requests if r.path == path]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"null")
                headers = {k.lower(): v for k, v in self.headers.items()}
                server.requests.append(Recorded(self.path, headers, body, self.command))
                try:
                    code, reply = server.answer(self.path, body)
                except Exception as exc:  # a failing script shows as a 599, not a hang
                    code, reply = 599, {"error": {"message": f"test server: {exc!r}"}}
                data = json.dumps(reply).encode()
                self.send_response(code)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST  # a GET has no body: ``answer`` gets None

            def log_message(self, format: str, *args: Any) -> None:
                return None

        return Handler

    @contextmanager
    def running(self) -> Iterator[ModelServer]:
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{httpd.server_address[1]}"
        thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
        thread.start()
        try:
            yield self
        finally:
            httpd.shutdown()
            httpd.server_close()
            thread.join(5)


class Queue:
    """Answers in the order given; a request past the end is a test failure (599)."""

    def __init__(self, *answers: tuple[int, Any]) -> None:
        self.answers = list(answers)

    def __call__(self, path: str, body: Any) -> tuple[int, Any]:
        if not self.answers:
            raise AssertionError(f"unexpected request to {path}")
        return self.answers.pop(0)
