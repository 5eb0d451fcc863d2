"""A real HTTP server on 127.0.0.1 playing the user-config service of the planning
specification (9.3): ``GET /users/{forge}/{user}`` answers that person's document.

Runs in a thread (``http.server``); tests set what each person gets, can hold a
person's answer until an event is set, and read the paths that were asked for.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import unquote

from tests.loopback import serving


@dataclass
class Answer:
    status: int = 200
    body: bytes = b""
    delay: float = 0.0  # seconds before the answer is sent
    hold: threading.Event | None = None  # the answer waits for this event
    release: threading.Event | None = None  # set once the answer is sent


def document(planning: dict[str, Any]) -> Answer:
    """An answer shaped like the specification's example."""
    body = {"status": "success", "data": {"llm": {"model": "x"}, "planning": planning}}
    return Answer(body=json.dumps(body).encode())


@dataclass
class UserConfigServer:
    url: str = ""  # the template for planning.user_config_api.url
    answers: dict[str, Answer] = field(default_factory=dict)  # person -> answer (else 404)
    asked: list[str] = field(default_factory=list)  # "forge/person" in arrival order
    answered: list[str] = field(default_factory=list)  # in the order answers were sent
    authorization: list[str] = field(default_factory=list)  # each request's header ("": none)

    def count(self, person: str) -> int:
        return sum(1 for entry in self.asked if entry.endswith(f"/{person}"))


def _handler(state: UserConfigServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            del format, args

        def do_GET(self) -> None:
            parts = self.path.strip("/").split("/")
            if len(parts) != 3 or parts[0] != "users":
                self.send_error(400)
                return
            person = unquote(parts[2])
            state.asked.append(f"{parts[1]}/{person}")
            state.authorization.append(self.headers.get("Authorization", ""))
            answer = state.answers.get(person)
            if answer is None:
                self.send_error(404)
                return
            if answer.hold is not None:
                answer.hold.wait(10)
            if answer.delay:
                threading.Event().wait(answer.delay)
            try:
                self.send_response(answer.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer.body)))
                self.end_headers()
                self.wfile.write(answer.body)
            except OSError:  # the client gave up (its timeout)
                return
            state.answered.append(person)
            if answer.release is not None:
                answer.release.set()

    return Handler


@contextmanager
def user_config_server() -> Iterator[UserConfigServer]:
    state = UserConfigServer()
    with serving(_handler(state)) as server:
        host, port = server.server_address[:2]
        state.url = f"http://{host!s}:{port}/users/{{forge}}/{{user}}"
        yield state
