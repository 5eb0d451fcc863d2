"""Marks: small dated records that say something was done once (sans-I/O).

A mark is a unique key with an owner and a date. ``claim`` takes a key for an owner:
a comment's own forge id (so a replay under a new delivery id is handled once), one
denial per person and issue in a window, a redelivery asked for once, and the time
of the last look at a forge's deliveries. Marks older than the dedup window are
pruned with the handled inbox events.
"""

from __future__ import annotations

from bot.storage.scripts import Query, Script


def claim(key: str, owner: str, since: float | None, now: float) -> Script[bool]:
    """Take ``key`` for ``owner``: True when it was free, is ``owner``'s already, or was
    dated before ``since`` (then it becomes ``owner``'s, dated ``now``)."""
    rows = yield Query(
        """INSERT INTO marks (key, owner, created_at) VALUES (%(key)s, %(owner)s, %(now)s)
        ON CONFLICT (key) DO NOTHING RETURNING key""",
        {"key": key, "owner": owner, "now": now},
    )
    if rows:
        return True
    rows = yield Query(
        """UPDATE marks SET owner = %(owner)s, created_at = %(now)s
        WHERE key = %(key)s AND (owner = %(owner)s OR created_at < %(since)s) RETURNING key""",
        {"key": key, "owner": owner, "now": now, "since": since},
    )
    return bool(rows)


def get_mark(key: str) -> Script[tuple[str, float] | None]:
    rows = yield Query("SELECT owner, created_at FROM marks WHERE key = %(key)s", {"key": key})
    return (str(rows[0]["owner"]), float(rows[0]["created_at"])) if rows else None


def put_mark(key: str, owner: str, now: float) -> Script[None]:
    yield Query(
        """INSERT INTO marks (key, owner, created_at) VALUES (%(key)s, %(owner)s, %(now)s)
        ON CONFLICT (key) DO UPDATE SET owner = excluded.owner,
            created_at = excluded.created_at""",
        {"key": key, "owner": owner, "now": now},
    )


def prune_marks(before: float) -> Script[int]:
    rows = yield Query(
        "DELETE FROM marks WHERE created_at < %(before)s RETURNING key", {"before": before}
    )
    return len(rows)


# --- the LLM endpoint's structured-output dialect (kept apart from the pruned marks) ------


def get_llm_dialect(endpoint: str, model: str) -> Script[tuple[str, str, float] | None]:
    rows = yield Query(
        """SELECT dialect, server, found_at FROM llm_dialects
        WHERE endpoint = %(endpoint)s AND model = %(model)s""",
        {"endpoint": endpoint, "model": model},
    )
    if not rows:
        return None
    return str(rows[0]["dialect"]), str(rows[0]["server"]), float(rows[0]["found_at"])


def put_llm_dialect(
    endpoint: str, model: str, dialect: str, server: str, now: float
) -> Script[None]:
    yield Query(
        """INSERT INTO llm_dialects (endpoint, model, dialect, server, found_at)
        VALUES (%(endpoint)s, %(model)s, %(dialect)s, %(server)s, %(now)s)
        ON CONFLICT (endpoint, model) DO UPDATE SET dialect = excluded.dialect,
            server = excluded.server, found_at = excluded.found_at""",
        {"endpoint": endpoint, "model": model, "dialect": dialect, "server": server, "now": now},
    )
