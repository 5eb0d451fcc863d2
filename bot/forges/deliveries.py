"""The optional interface of a forge that can list its past webhook deliveries and
send a failed one again (GitHub App mode: ``/app/hook/deliveries``).

When the bot was down, the forge does not redeliver by itself; the worker's
maintenance asks for the failed deliveries it never received (bot/worker/redelivery.py).
A forge without such a log (a GitHub token, GitLab) simply does not offer one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@dataclass(frozen=True, slots=True)
class Delivery:
    """One attempt to deliver a webhook, as the forge recorded it."""

    id: int  # this attempt
    guid: str  # the delivery (the X-GitHub-Delivery header), shared by its redeliveries
    delivered_at: float  # epoch seconds
    status_code: int  # 0 when nothing answered
    redelivery: bool = False
    event: str = ""
    action: str = ""

    @property
    def failed(self) -> bool:
        return not 200 <= self.status_code < 300


class DeliveryLog(Protocol):
    async def deliveries_since(self, since: float, *, limit: int) -> list[Delivery]:
        """Attempts delivered at or after ``since``, newest first, at most ``limit``."""
        ...

    async def redeliver(self, delivery_id: int) -> None:
        """Ask the forge to send the attempt ``delivery_id``'s delivery again."""
        ...


@runtime_checkable
class HasDeliveryLog(Protocol):
    def delivery_log(self) -> DeliveryLog | None:
        """The forge's delivery log, or None when its credentials have none."""
        ...
