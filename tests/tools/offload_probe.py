"""Functions the offload tests run in a worker process (importable by name there)."""

from __future__ import annotations

import os
import time

from bot.paths import TooLarge


def where(seconds: float) -> tuple[int, float, float]:
    """This process's id, and when the call began and ended (wall clock)."""
    began = time.time()
    time.sleep(seconds)
    return os.getpid(), began, time.time()


def too_large() -> None:
    raise TooLarge("big.bin", 2_000_000, 1_000_000)


def die() -> None:
    os._exit(3)  # a worker killed mid-call (out of memory, a signal)


def niceness() -> int:
    return os.nice(0)


def hold(path: str, seconds: float) -> None:
    """Write this process's id to ``path``, then keep the worker busy."""
    with open(path, "w") as out:
        out.write(str(os.getpid()))
    time.sleep(seconds)
