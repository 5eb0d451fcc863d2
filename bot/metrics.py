"""Prometheus metrics (prometheus-client), in a registry of our own."""

from __future__ import annotations

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, generate_latest

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


def render() -> tuple[bytes, str]:
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST
