"""The store's task transactions: one active task per issue, the queue and its leases.

Sans-I/O like ``scripts.py``: each function is a generator of ``Query`` objects run
by a driver inside one transaction.
"""

from __future__ import annotations

from bot.events import TaskRequest
from bot.storage.base import StoreError, Task, TaskState
from bot.storage.rows import dump_json, task_from_row
from bot.storage.schema import state_params
from bot.storage.scripts import Query, Script, finish_event

_SELECT_ACTIVE = "SELECT * FROM tasks WHERE issue_key = %(issue_key)s AND state IN /*ACTIVE*/"


def create_task(
    request: TaskRequest, task_id: str, event_id: int | None, now: float
) -> Script[tuple[Task, bool]]:
    if event_id is not None:
        yield from finish_event(event_id, None)
    issue_key = request.issue.key
    params = {
        "id": task_id,
        "issue_key": issue_key,
        "repo_key": request.issue.repo.key,
        "request": dump_json(request.to_dict()),
        "now": now,
    }
    # A concurrent creator may hold the issue's slot: the insert then does nothing (after
    # waiting for it to commit, on PostgreSQL) and the next select sees its task.
    for _ in range(3):
        rows = yield Query(_SELECT_ACTIVE, {"issue_key": issue_key})
        if rows:
            return task_from_row(rows[0]), False
        rows = yield Query(
            """INSERT INTO tasks (id, issue_key, repo_key, request, state, phase,
                created_at, updated_at, attempts)
            VALUES (%(id)s, %(issue_key)s, %(repo_key)s, %(request)s, 'queued', '',
                %(now)s, %(now)s, 0)
            ON CONFLICT DO NOTHING RETURNING *""",
            params,
        )
        if rows:
            return task_from_row(rows[0]), True
    raise StoreError(f"could neither create nor find the active task of {issue_key}")


def get_task(task_id: str) -> Script[Task | None]:
    rows = yield Query("SELECT * FROM tasks WHERE id = %(id)s", {"id": task_id})
    return task_from_row(rows[0]) if rows else None


def active_task_for(issue_key: str) -> Script[Task | None]:
    rows = yield Query(_SELECT_ACTIVE, {"issue_key": issue_key})
    return task_from_row(rows[0]) if rows else None


def latest_task_for(issue_key: str) -> Script[Task | None]:
    rows = yield Query(
        """SELECT * FROM tasks WHERE issue_key = %(issue_key)s
        ORDER BY created_at DESC, seq DESC LIMIT 1""",
        {"issue_key": issue_key},
    )
    return task_from_row(rows[0]) if rows else None


def list_tasks(states: frozenset[TaskState] | None, limit: int) -> Script[list[Task]]:
    rows = yield Query(
        """SELECT * FROM tasks WHERE state IN /*STATE_SLOTS*/
        ORDER BY created_at DESC, seq DESC LIMIT %(limit)s""",
        {**state_params(states), "limit": limit},
    )
    return [task_from_row(row) for row in rows]


def count_tasks(states: frozenset[TaskState] | None) -> Script[int]:
    rows = yield Query(
        "SELECT COUNT(*) AS n FROM tasks WHERE state IN /*STATE_SLOTS*/",
        state_params(states),
    )
    return int(rows[0]["n"])


# --- the queue ---------------------------------------------------------------------------------


def lease_task(owner: str, expires: float, now: float) -> Script[Task | None]:
    rows = yield Query(
        """UPDATE tasks SET state = 'running', lease_owner = %(owner)s,
            lease_expires = %(expires)s, attempts = attempts + 1, wake_at = NULL,
            updated_at = %(now)s
        WHERE id = (SELECT id FROM tasks
            WHERE state = 'queued' AND (wake_at IS NULL OR wake_at <= %(now)s)
            ORDER BY created_at, seq LIMIT 1 /*LOCK*/)
        RETURNING *""",
        {"owner": owner, "expires": expires, "now": now},
    )
    return task_from_row(rows[0]) if rows else None


def renew_lease(task_id: str, owner: str, expires: float) -> Script[bool]:
    rows = yield Query(
        """UPDATE tasks SET lease_expires = %(expires)s
        WHERE id = %(id)s AND state = 'running' AND lease_owner = %(owner)s RETURNING id""",
        {"id": task_id, "owner": owner, "expires": expires},
    )
    return bool(rows)


def set_state(
    task_id: str,
    state: TaskState,
    *,
    phase: str | None,
    error: str | None,
    wake_at: float | None,
    release: bool,
    now: float,
    expect_owner: str | None = None,
    expect_state: TaskState | None = None,
) -> Script[bool]:
    guards = ""
    params: dict[str, object] = {
        "id": task_id,
        "state": state.value,
        "phase": phase,
        "error": error,
        "wake_at": wake_at,
        "release": release,
        "now": now,
    }
    if expect_owner is not None:
        guards += " AND lease_owner = %(owner)s"
        params["owner"] = expect_owner
    if expect_state is not None:
        guards += " AND state = %(expected)s"
        params["expected"] = expect_state.value
    rows = yield Query(
        """UPDATE tasks SET state = %(state)s, phase = COALESCE(%(phase)s, phase),
            error = %(error)s, wake_at = %(wake_at)s, updated_at = %(now)s,
            lease_owner = CASE WHEN %(release)s THEN NULL ELSE lease_owner END,
            lease_expires = CASE WHEN %(release)s THEN NULL ELSE lease_expires END
        WHERE id = %(id)s"""  # noqa: S608 - the guards are fixed text; values are parameters
        + guards
        + " RETURNING id",
        params,
    )
    if not rows and expect_owner is None and expect_state is None:
        raise StoreError(f"no task {task_id}")
    return bool(rows)


def requeue_expired(now: float) -> Script[int]:
    rows = yield Query(
        """UPDATE tasks SET state = 'queued', lease_owner = NULL, lease_expires = NULL,
            updated_at = %(now)s
        WHERE state = 'running' AND lease_expires < %(now)s RETURNING id""",
        {"now": now},
    )
    return len(rows)


def due_tasks(now: float) -> Script[list[Task]]:
    rows = yield Query(
        """SELECT * FROM tasks WHERE wake_at <= %(now)s AND state IN /*WAITING*/
        ORDER BY wake_at, seq""",
        {"now": now},
    )
    return [task_from_row(row) for row in rows]
