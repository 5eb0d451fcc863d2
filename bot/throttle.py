"""Failed logins and wrong bearer tokens, counted per client (``server.auth_max_failures``
within ``server.auth_failure_window``). Pure: the clock is passed in.

A client that has failed ``limit`` times within the window is refused (429 with
Retry-After) until the window that began with its first failure ends, whatever it sends
then, the right token included: a guesser learns nothing while it waits. Only failures
count; a success forgets the client's failures. The table holds at most ``max_clients``
clients (the oldest are forgotten first), so a flood of addresses costs bounded memory.
An IPv6 client counts by its /64 network, which one host usually holds whole.
"""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Callable
from dataclasses import dataclass

from cachetools import TTLCache

MAX_CLIENTS = 10_000


@dataclass(slots=True)
class _Failures:
    since: float
    count: int


def client_key(host: str | None) -> str:
    """The key a client's failures count under: its address, an IPv6 address's /64."""
    if not host:
        return "unknown"
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host[:100]
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.ip_network(f"{address}/64", strict=False))
    return str(address)


class FailureThrottle:
    def __init__(
        self,
        *,
        limit: int,
        window: float,
        clock: Callable[[], float],
        max_clients: int = MAX_CLIENTS,
    ) -> None:
        self.limit = limit
        self.window = window
        self._clock = clock
        self._failures: TTLCache[str, _Failures] = TTLCache(
            maxsize=max_clients, ttl=window, timer=clock
        )

    def retry_after(self, host: str | None) -> int | None:
        """Whole seconds until ``host`` may try again (None: it may now)."""
        entry = self._failures.get(client_key(host))
        if entry is None or entry.count < self.limit:
            return None
        left = entry.since + self.window - self._clock()
        return max(1, math.ceil(left)) if left > 0 else None

    def failed(self, host: str | None) -> None:
        key = client_key(host)
        entry = self._failures.get(key)
        if entry is None:
            self._failures[key] = _Failures(self._clock(), 1)
        else:
            entry.count += 1

    def succeeded(self, host: str | None) -> None:
        self._failures.pop(client_key(host), None)

    def __len__(self) -> int:
        return len(self._failures)
