"""The GitHub App's webhook deliveries (``bot.forges.deliveries.DeliveryLog``).

``GET /app/hook/deliveries`` lists attempts newest first, a page of up to 100 at a
time (the next page's ``cursor`` is in the ``Link`` header); ``POST
/app/hook/deliveries/{id}/attempts`` asks GitHub to send one again. Both use the App's
JWT: a personal token has no App hook.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from bot.forges.base import ForgeError
from bot.forges.deliveries import Delivery
from bot.forges.github_auth import GitHubSession

LIST_PATH = "/app/hook/deliveries?per_page=100"


def delivery_from(data: Any) -> Delivery:
    """One item of the list; ``ForgeError`` when it is not shaped as documented."""
    try:
        when = datetime.fromisoformat(str(data["delivered_at"]).replace("Z", "+00:00"))
        return Delivery(
            id=int(data["id"]),
            guid=str(data["guid"]),
            delivered_at=when.timestamp(),
            status_code=int(data.get("status_code") or 0),
            redelivery=bool(data.get("redelivery")),
            event=str(data.get("event") or ""),
            action=str(data.get("action") or ""),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ForgeError(f"GitHub sent an unreadable webhook delivery: {exc}") from exc


class GitHubDeliveries:
    def __init__(self, session: GitHubSession) -> None:
        self._gh = session

    async def deliveries_since(self, since: float, *, limit: int) -> list[Delivery]:
        def recent(item: Any) -> bool:
            return delivery_from(item).delivered_at >= since

        what = "the App's webhook deliveries"
        items = await self._gh.app_items(LIST_PATH, what=what, take=recent, limit=limit)
        return [delivery_from(item) for item in items]

    async def redeliver(self, delivery_id: int) -> None:
        path = f"/app/hook/deliveries/{int(delivery_id)}/attempts"
        await self._gh.app_request("POST", path, what=f"a redelivery of {delivery_id}")
