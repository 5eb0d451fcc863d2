from __future__ import annotations

import socket
from collections.abc import Awaitable, Callable

import pytest


@pytest.fixture
def waits() -> list[float]:
    return []


@pytest.fixture
def sleep(waits: list[float]) -> Callable[[float], Awaitable[None]]:
    async def record(seconds: float) -> None:
        waits.append(seconds)

    return record


@pytest.fixture
def closed_port() -> int:
    """A loopback port nothing listens on: bound, then closed."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port
