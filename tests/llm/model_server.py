"""``local_server.ModelServer`` (the tests' one model endpoint on loopback) answered by a
function of the whole request: ``answer(Sent) -> Reply``. For tests that tell a GET (the
model list) from a POST and play a server's behaviour (which dialect it refuses and how,
when it is down); ``server.requests`` and ``server.of(path)`` say what the bot sent.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from tests.llm.local_server import ModelServer, Recorded

__all__ = ["Answer", "ModelServer", "Reply", "Sent", "model_server"]

Sent = Recorded  # method, path, headers, body (None for a GET)


@dataclass(frozen=True)
class Reply:
    status: int
    body: Any


Answer = Callable[[Sent], Reply]


@contextmanager
def model_server(answer: Answer) -> Iterator[ModelServer]:
    def by_request(path: str, body: Any) -> tuple[int, Any]:
        reply = answer(Recorded(path, {}, body, "GET" if body is None else "POST"))
        return reply.status, reply.body

    with ModelServer(by_request).running() as server:
        yield server
