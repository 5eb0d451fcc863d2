"""Prometheus metrics (prometheus-client), in a registry of our own."""

from __future__ import annotations

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

REGISTRY = CollectorRegistry(auto_describe=True)

WEBHOOKS = Counter(
    "bot_webhooks_total",
    "Webhook deliveries by forge and outcome",
    ["forge", "outcome"],
    registry=REGISTRY,
)


def webhook(forge: str, outcome: str) -> None:
    """Count one webhook delivery (the labelled child is looked up once, then reused:
    this runs on every delivery)."""
    child = _WEBHOOK_CHILDREN.get((forge, outcome))
    if child is None:
        child = _WEBHOOK_CHILDREN[(forge, outcome)] = WEBHOOKS.labels(forge, outcome)
    child.inc()


_WEBHOOK_CHILDREN: dict[tuple[str, str], Counter] = {}

TASKS = Counter(
    "bot_tasks_finished_total", "Tasks that ended, by final state", ["state"], registry=REGISTRY
)
EVENTS = Counter(
    "bot_inbox_events_total",
    "Inbox events handled by the dispatcher, by result",
    ["result"],
    registry=REGISTRY,
)


# Every label below takes values from a fixed set (states, phases, forges, read / write):
# no issue numbers, repositories or people, so the number of series stays bounded.
TASKS_BY_STATE = Gauge(
    "bot_tasks", "Tasks in the store by state (read at scrape time)", ["state"], registry=REGISTRY
)
QUEUE_DEPTH = Gauge("bot_queue_depth", "Tasks waiting for a worker slot", registry=REGISTRY)
RUNNING = Gauge("bot_tasks_running", "Tasks running now (all workers)", registry=REGISTRY)
FREE_SLOTS = Gauge(
    "bot_worker_free_slots", "Worker slots of this process not running a task", registry=REGISTRY
)
PAUSED_ALL = Gauge(
    "bot_emergency_stop", "1 while bot pause-all holds every task, else 0", registry=REGISTRY
)
TASK_DURATION = Histogram(
    "bot_task_duration_seconds",
    "From a task's creation to its end, by final state",
    ["state"],
    buckets=(30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 14400, 43200, 86400),
    registry=REGISTRY,
)
LLM_LATENCY = Histogram(
    "bot_llm_request_seconds",
    "Model calls' wall time by planning phase (failed calls too)",
    ["phase"],
    buckets=(0.25, 0.5, 1, 2, 5, 10, 20, 40, 80, 160, 320),
    registry=REGISTRY,
)
LLM_TOKENS = Histogram(
    "bot_llm_tokens",
    "Tokens per model call by planning phase and kind (prompt, completion)",
    ["phase", "kind"],
    buckets=(100, 250, 500, 1000, 2000, 4000, 8000, 16000, 32000, 64000),
    registry=REGISTRY,
)
FORGE_CALLS = Counter(
    "bot_forge_requests_total",
    "HTTP requests to the forges' APIs by forge and kind (read, write)",
    ["forge", "kind"],
    registry=REGISTRY,
)
FORGE_WAITS = Counter(
    "bot_forge_waits_total",
    "Waits before retrying a forge request, by forge and reason (rate_limit, transient)",
    ["forge", "reason"],
    registry=REGISTRY,
)


def forge_request(forge: str, method: str) -> None:
    FORGE_CALLS.labels(forge, "read" if method.upper() in ("GET", "HEAD") else "write").inc()


def forge_wait(forge: str, status: int | None) -> None:
    FORGE_WAITS.labels(forge, "rate_limit" if status in (403, 429) else "transient").inc()


def render() -> tuple[bytes, str]:
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST
