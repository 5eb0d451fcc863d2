"""What the dashboard's pages read again every ``REFRESH`` seconds: only what they show.

The overview's script asks ``/dashboard/live.json`` for its figures and visible rows (the
newest ``SHOWN_TASKS`` tasks, two counts, the switch, the model's cached health; the 24 h
and 7 day rates at most once per ``RATES_SECONDS``, shared by every viewer) and updates
the page in place. A task's page asks ``/dashboard/tasks/{id}/live.json`` for its row and
checkpoint's version and reloads itself only when that changed. Each answer carries an
``ETag``: a poll that finds nothing new gets a bodiless 304.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from starlette.requests import Request
from starlette.responses import Response

from bot.dashboard.stats import ENDED, Rates, percent, rates
from bot.record.snapshot import checklist, status_snapshot
from bot.storage.base import Task, Tasks

REFRESH = 5  # seconds, as the specification asks
SHOWN_TASKS = 50
MAX_RATED = 10_000  # ended tasks read for the 24 h and 7 day rates (newest first)
RATES_SECONDS = 60.0


def when(epoch: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(epoch)) if epoch else "–"


def task_rows(tasks: list[Task]) -> list[dict[str, Any]]:
    """The overview's rows: what its table shows of each task, and no more."""
    return [
        {
            "id": t.id,
            "repository": t.request.issue.repo.full_name,
            "issue": t.request.issue.number,
            "state": t.state.value,
            "updated": when(t.updated_at),
        }
        for t in tasks
    ]


def llm_line(report: dict[str, Any]) -> str:
    """The overview's line about the model, from its health report."""
    parts = ["reachable" if report.get("reachable") else "not reachable"]
    parts += [str(report.get("provider", "")), str(report.get("model", ""))]
    if report.get("dialect"):
        parts.append(f"structured output: {report['dialect']}")
    if report.get("error"):
        parts.append(str(report["error"]))
    return " · ".join(parts)


class Counted(Protocol):
    """A window's counts of ended tasks (``Rates``, or ``GET /api/status``'s)."""

    @property
    def window(self) -> str: ...
    @property
    def ended(self) -> int: ...
    @property
    def done(self) -> int: ...
    @property
    def help_needed(self) -> int: ...


def rates_view(found: Iterable[Counted]) -> list[dict[str, Any]]:
    return [
        {
            "window": r.window,
            "ended": r.ended,
            "success": percent(r.done, r.ended),
            "help": percent(r.help_needed, r.ended),
        }
        for r in found
    ]


class RatesCache:
    """The ended tasks' rates, read from the store at most once per ``RATES_SECONDS``."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._kept: tuple[float, tuple[Rates, ...]] | None = None

    async def get(self, store: Tasks) -> tuple[Rates, ...]:
        now = self._clock()
        if self._kept is not None and now - self._kept[0] < RATES_SECONDS:
            return self._kept[1]
        ended = await store.list_tasks(states=ENDED, limit=MAX_RATED)
        wall = time.time()
        found = (rates(ended, wall, "24 h", 86_400), rates(ended, wall, "7 days", 7 * 86_400))
        self._kept = (now, found)
        return found


def task_version(task: Task, checkpoint: dict[str, Any] | None) -> str:
    """Changes whenever what a task's page shows from its row or checkpoint changes."""
    snapshot = status_snapshot(checkpoint) or {}
    seen = [
        task.state.value,
        task.phase,
        task.updated_at,
        task.error,
        [(item["id"], item["status"]) for item in checklist(snapshot)],
        snapshot.get("phase"),
        snapshot.get("total_tokens"),
        snapshot.get("revisions"),
    ]
    return hashlib.sha256(json.dumps(seen, default=str).encode()).hexdigest()[:16]


def conditional_json(request: Request, data: dict[str, Any]) -> Response:
    """``data`` as JSON with its ETag, or a bodiless 304 when the client has it already."""
    body = json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode()
    etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
    # private: the figures are the logged-in person's, for no shared cache to keep
    headers = {"ETag": etag, "Cache-Control": "private, no-cache"}
    sent = {tag.strip() for tag in request.headers.get("if-none-match", "").split(",")}
    if etag in sent:
        return Response(status_code=304, headers=headers)
    return Response(body, media_type="application/json", headers=headers)
