"""What the dashboard's refresh reads: the rates at most once a minute, the ETag's 304."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from starlette.requests import Request

from bot.dashboard.live import RATES_SECONDS, RatesCache, conditional_json
from bot.storage.base import TaskState
from bot.storage.sqlite import SqliteStore
from tests.storage.store_support import request_for


class Counting:
    """The real store, with its ended-task listings counted."""

    def __init__(self, store: SqliteStore) -> None:
        self.store = store
        self.listed = 0

    async def list_tasks(self, **kwargs: Any) -> Any:
        self.listed += 1
        return await self.store.list_tasks(**kwargs)


async def test_the_rates_are_read_at_most_once_a_minute(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "bot.sqlite3")
    await store.open()
    try:
        task, _ = await store.create_task(request_for(1))
        await store.set_state(task.id, TaskState.DONE)
        now = [1000.0]
        cache, counting = RatesCache(clock=lambda: now[0]), Counting(store)
        day, week = await cache.get(counting)  # type: ignore[arg-type]
        assert (day.ended, day.done, week.ended) == (1, 1, 1)
        now[0] += RATES_SECONDS - 1
        await cache.get(counting)  # type: ignore[arg-type]
        assert counting.listed == 1
        now[0] += 2
        await cache.get(counting)  # type: ignore[arg-type]
        assert counting.listed == 2
    finally:
        await store.close()


def request(if_none_match: str | None) -> Request:
    headers = [(b"if-none-match", if_none_match.encode())] if if_none_match else []
    return Request({"type": "http", "method": "GET", "path": "/", "headers": headers})


def test_an_unchanged_answer_is_a_bodiless_304() -> None:
    first = conditional_json(request(None), {"queued": 1})
    etag = first.headers["etag"]
    assert first.status_code == 200 and first.body == b'{"queued":1}'
    again = conditional_json(request(f'"other", {etag}'), {"queued": 1})
    assert again.status_code == 304 and again.body == b"" and again.headers["etag"] == etag
    changed = conditional_json(request(etag), {"queued": 2})
    assert changed.status_code == 200 and changed.headers["etag"] != etag


async def test_the_live_answer_is_for_the_logged_in_browser_only(tmp_path: Path) -> None:
    """Through the app: no shared cache may keep it (private), the browser asks again."""
    from tests.e2e.test_api import TOKEN, WITH_API
    from tests.harness import Harness

    async with Harness(tmp_path, overrides=WITH_API) as bot:
        login = await bot.client.post("/dashboard/login", data={"token": TOKEN})
        assert login.status_code == 303
        answer = await bot.client.get("/dashboard/live.json")
        assert answer.status_code == 200, answer.text
        again = await bot.client.get(
            "/dashboard/live.json", headers={"If-None-Match": answer.headers["etag"]}
        )
        assert again.status_code == 304
    for reply in (answer, again):
        parts = {p.strip() for p in reply.headers["cache-control"].split(",")}
        assert parts == {"private", "no-cache"}, reply.headers
