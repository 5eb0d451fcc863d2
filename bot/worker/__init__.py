"""The worker: the dispatcher (inbox events -> tasks, replies, messages), task slots that
lease and run tasks, maintenance, and the pure decisions about outcomes and retries.

- ``loop``: ``Worker``, its loops, leases, lease renewal and the watchdog;
- ``run``: one run of one leased task (``TaskRunner``) and storing its outcome;
- ``dispatcher``: what each stored webhook event leads to;
- ``maintenance``: re-queueing expired leases and due tasks, pruning;
- ``redelivery``: asking the forge again for webhook deliveries missed while down;
- ``outcomes``: pure decisions (retry limits, backoff, the Outcome of each way out).
"""

from __future__ import annotations

from bot.worker.loop import EVENT_LEASE_SECONDS, Worker
from bot.worker.run import Coordinator, TaskRunner, default_coordinator

__all__ = ["EVENT_LEASE_SECONDS", "Coordinator", "TaskRunner", "Worker", "default_coordinator"]
