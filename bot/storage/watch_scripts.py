"""Watches: the bot's change requests after they were opened (sans-I/O).

One row per change request the bot opened: the task that opened it, the
``/agent autofix`` switch, whether it is still open, and the after-PR record (its
rounds and checks) as one JSON document saved with a version check, so two workers
never lose each other's update.
"""

from __future__ import annotations

from typing import Any

import msgspec

from bot.storage.base import Watch
from bot.storage.rows import dump_json, watch_from_row
from bot.storage.scripts import Query, Script


def add_watch(watch: Watch, now: float) -> Script[bool]:
    rows = yield Query(
        """INSERT INTO watches (key, repo_key, branch, task_id, issue, autofix, is_open, data,
            version, created_at, updated_at)
        VALUES (%(key)s, %(repo_key)s, %(branch)s, %(task_id)s, %(issue)s, %(autofix)s,
            %(is_open)s, %(data)s, 0, %(now)s, %(now)s)
        ON CONFLICT (key) DO NOTHING RETURNING key""",
        {
            "key": watch.key,
            "repo_key": watch.repo_key,
            "branch": watch.branch,
            "task_id": watch.task_id,
            "issue": dump_json(msgspec.to_builtins(watch.issue)),
            "autofix": int(watch.autofix),
            "is_open": int(watch.is_open),
            "data": dump_json(watch.data),
            "now": now,
        },
    )
    return bool(rows)


def get_watch(key: str) -> Script[Watch | None]:
    rows = yield Query("SELECT * FROM watches WHERE key = %(key)s", {"key": key})
    return watch_from_row(rows[0]) if rows else None


def find_watch(repo_key: str, branch: str) -> Script[Watch | None]:
    rows = yield Query(
        """SELECT * FROM watches WHERE repo_key = %(repo_key)s AND branch = %(branch)s
        ORDER BY is_open DESC, created_at DESC LIMIT 1""",
        {"repo_key": repo_key, "branch": branch},
    )
    return watch_from_row(rows[0]) if rows else None


def save_watch(
    key: str, data: dict[str, Any], version: int, is_open: bool | None, now: float
) -> Script[bool]:
    rows = yield Query(
        """UPDATE watches SET data = %(data)s, version = version + 1, updated_at = %(now)s,
            is_open = COALESCE(%(is_open)s, is_open)
        WHERE key = %(key)s AND version = %(version)s RETURNING key""",
        {
            "key": key,
            "data": dump_json(data),
            "version": version,
            "is_open": None if is_open is None else int(is_open),
            "now": now,
        },
    )
    return bool(rows)


def set_autofix(key: str, enabled: bool, now: float) -> Script[bool]:
    rows = yield Query(
        """UPDATE watches SET autofix = %(enabled)s, updated_at = %(now)s
        WHERE key = %(key)s RETURNING key""",
        {"key": key, "enabled": int(enabled), "now": now},
    )
    return bool(rows)


def open_watches(limit: int) -> Script[list[Watch]]:
    rows = yield Query(
        "SELECT * FROM watches WHERE is_open = 1 ORDER BY updated_at LIMIT %(limit)s",
        {"limit": limit},
    )
    return [watch_from_row(row) for row in rows]
