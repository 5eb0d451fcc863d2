"""Rows to records and back: JSON documents as stored (SQLite's text, PostgreSQL's
JSONB) and a row of each table as the record the store's methods give."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, TypeVar

import msgspec
import orjson

from bot.events import TaskRequest
from bot.storage.records import InboxEvent, StoreError, Task, TaskMessage, Watch

R = TypeVar("R")


def dump_json(value: dict[str, Any]) -> str:
    try:
        return orjson.dumps(value).decode("utf-8")
    except (TypeError, ValueError) as exc:
        raise StoreError(f"value is not JSON-serialisable: {exc}") from exc


def load_json(value: Any) -> dict[str, Any]:
    """A stored JSON document (SQLite gives text, psycopg gives the decoded JSONB)."""
    try:
        data = json.loads(value) if isinstance(value, str | bytes) else value
    except ValueError as exc:
        raise StoreError(f"stored JSON is unreadable: {exc}") from exc
    if not isinstance(data, dict):
        raise StoreError(f"stored JSON is not an object: {type(data).__name__}")
    return data


def _record(cls: type[R], row: Mapping[str, Any], what: str, **decoded: Any) -> R:
    """The record ``cls`` of ``row`` (its JSON columns ``decoded``); columns the record
    does not have are left out, and numbers come as the record's types."""
    try:
        return msgspec.convert({**row, **decoded}, cls, strict=False)
    except msgspec.ValidationError as exc:
        raise StoreError(f"{what}: the stored row is unreadable: {exc}") from exc


def task_from_row(row: Mapping[str, Any]) -> Task:
    try:
        request = TaskRequest.from_dict(load_json(row["request"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise StoreError(f"task {row['id']}: the stored request is unreadable: {exc}") from exc
    return _record(Task, row, f"task {row['id']}", request=request)


def event_from_row(row: Mapping[str, Any]) -> InboxEvent:
    return _record(InboxEvent, row, f"inbox event {row['id']}", payload=load_json(row["payload"]))


def message_from_row(row: Mapping[str, Any]) -> TaskMessage:
    return _record(TaskMessage, row, "a task's message", payload=load_json(row["payload"]))


def watch_from_row(row: Mapping[str, Any]) -> Watch:
    """A watch; its change request (``issue``) is read into an ``IssueRef``."""
    issue, data = load_json(row["issue"]), load_json(row["data"])
    return _record(Watch, row, f"watch {row['key']}", issue=issue, data=data)
