"""/metrics through the real app: gauges read from the store at scrape time, histograms
of task duration, model latency and tokens, and labels from fixed sets only."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from bot.metrics import REGISTRY
from bot.storage.base import TaskState
from bot.worker import operator
from tests.e2e.support import gh_labeled, github_repo, settle
from tests.e2e.test_success import readme_script
from tests.harness import Harness
from tests.tools.conftest import Remote

pytestmark = pytest.mark.sandbox

# Every label of the bot's metrics takes its values from a fixed set: no issue number,
# repository, person or task id can make a new series.
BOUNDED_LABELS = {"forge", "outcome", "state", "result", "phase", "kind", "reason"}


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


async def test_metrics_show_the_queue_the_tasks_and_the_emergency_stop(
    tmp_path: Path, remote: Remote
) -> None:
    async with Harness(tmp_path, script=readme_script()) as bot:
        github_repo(bot, remote, labels=("bug", "coding agent"))
        ended = sample("bot_task_duration_seconds_count", state="done")
        planned = sample("bot_llm_request_seconds_count", phase="planning")
        await bot.send_github("issues", gh_labeled())
        await bot.dispatch_all()

        scraped = await bot.client.get("/metrics")
        assert scraped.status_code == 200
        assert sample("bot_queue_depth") == 1 and sample("bot_tasks", state="queued") == 1
        assert sample("bot_emergency_stop") == 0
        assert sample("bot_worker_free_slots") == bot.settings.worker.max_workers

        await settle(bot)
        [task] = await bot.tasks()
        assert task.state is TaskState.DONE
        await operator.pause_all(bot.store, by="ops")
        text = (await bot.client.get("/metrics")).text
        assert sample("bot_queue_depth") == 0 and sample("bot_tasks", state="done") == 1
        assert sample("bot_emergency_stop") == 1
        assert sample("bot_task_duration_seconds_count", state="done") == ended + 1
        assert sample("bot_llm_request_seconds_count", phase="planning") == planned + 1
        assert sample("bot_llm_tokens_count", phase="planning", kind="prompt") >= 1

        names = set()
        for family in text_string_to_metric_families(text):
            if family.name.startswith("bot_"):
                for metric in family.samples:
                    names |= set(metric.labels) - {"le"}
        assert names <= BOUNDED_LABELS, names - BOUNDED_LABELS
        assert str(task.request.issue.number) + '"' not in text  # no issue number as a label
