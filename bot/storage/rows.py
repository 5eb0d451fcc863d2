"""Rows to records and back: JSON documents as stored (SQLite's text, PostgreSQL's
JSONB) and a row of each table as the record the store's methods give."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import msgspec
import orjson

from bot.events import IssueRef, TaskRequest, TaskState
from bot.storage.records import InboxEvent, StoreError, Task, TaskMessage, Watch


def dump_json(value: dict[str, Any]) -> str:
    try:
        return orjson.dumps(value).decode("utf-8")
    except (TypeError, ValueError) as exc:
        raise StoreError(f"value is not JSON-serialisable: {exc}") from exc


def load_json(value: Any) -> dict[str, Any]:
    """A stored JSON document (SQLite gives text, psycopg gives the decoded JSONB)."""
    data = json.loads(value) if isinstance(value, str | bytes) else value
    if not isinstance(data, dict):
        raise StoreError(f"stored JSON is not an object: {type(data).__name__}")
    return data


def _opt_float(value: Any) -> float | None:
    return None if value is None else float(value)


def task_from_row(row: Mapping[str, Any]) -> Task:
    try:
        request = TaskRequest.from_dict(load_json(row["request"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise StoreError(f"task {row['id']}: the stored request is unreadable: {exc}") from exc
    return Task(
        id=row["id"],
        issue_key=row["issue_key"],
        repo_key=row["repo_key"],
        request=request,
        state=TaskState(row["state"]),
        phase=row["phase"],
        created_at=float(row["created_at"]),
        updated_at=float(row["updated_at"]),
        lease_owner=row["lease_owner"],
        lease_expires=_opt_float(row["lease_expires"]),
        wake_at=_opt_float(row["wake_at"]),
        attempts=int(row["attempts"]),
        error=row["error"],
    )


def event_from_row(row: Mapping[str, Any]) -> InboxEvent:
    return InboxEvent(
        id=int(row["id"]),
        delivery_key=row["delivery_key"],
        forge=row["forge"],
        payload=load_json(row["payload"]),
        received_at=float(row["received_at"]),
        attempts=int(row["attempts"]),
    )


def message_from_row(row: Mapping[str, Any]) -> TaskMessage:
    return TaskMessage(
        seq=int(row["seq"]),
        task_id=row["task_id"],
        kind=row["kind"],
        payload=load_json(row["payload"]),
        created_at=float(row["created_at"]),
    )


def watch_from_row(row: Mapping[str, Any]) -> Watch:
    try:
        issue = msgspec.convert(load_json(row["issue"]), IssueRef)
    except (TypeError, ValueError, msgspec.ValidationError) as exc:
        raise StoreError(f"watch {row['key']}: the stored change request is unreadable") from exc
    return Watch(
        key=row["key"],
        repo_key=row["repo_key"],
        branch=row["branch"],
        task_id=row["task_id"],
        issue=issue,
        autofix=bool(row["autofix"]),
        is_open=bool(row["is_open"]),
        data=load_json(row["data"]),
        version=int(row["version"]),
        created_at=float(row["created_at"]),
        updated_at=float(row["updated_at"]),
    )
