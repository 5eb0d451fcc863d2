"""Scale-out on PostgreSQL: a web replica queues, two worker replicas share the queue and never
run a task twice."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import httpx
import pytest

from bot.agent.session import TaskContext
from bot.app import create_app
from bot.config import load_settings
from bot.events import ForgeKind
from bot.llm.scripted import ScriptedLLM
from bot.run_events import Outcome
from bot.runtime import Runtime
from bot.storage.base import TaskState
from bot.storage.postgres import PostgresStore
from bot.worker import Worker
from tests.fakes import FakeForge
from tests.harness import ROOT, bot_environment, fixture, github_signature

pytestmark = pytest.mark.postgres

OWNER = "Codertocat"
ISSUES = range(1, 7)


class Recording:
    """Stands in for the agent: records which replica ran which task."""

    def __init__(self, runs: list[tuple[str, str]], owner: str) -> None:
        self.runs = runs
        self.owner = owner

    async def run(self, ctx: TaskContext) -> Outcome:
        self.runs.append((ctx.task.id, self.owner))
        await asyncio.sleep(0.05)
        return Outcome(TaskState.DONE)


def replica(tmp_path: Path, dsn: str, role: str, forge: FakeForge) -> Runtime:
    (tmp_path / role).mkdir()
    settings = load_settings(bot_environment(tmp_path / role), ROOT / "config.yaml")
    worker = settings.worker.model_copy(update={"poll_interval": 0.05, "max_workers": 2})
    settings = settings.model_copy(update={"worker": worker})
    return Runtime(
        settings,
        store=PostgresStore(dsn=dsn),
        forges={ForgeKind.GITHUB: forge},
        llm=ScriptedLLM([]),
    )


def labeled(number: int) -> bytes:
    payload = fixture("github", "issues.labeled.json")
    payload["label"]["name"] = "coding agent"
    payload["issue"]["number"] = number
    return json.dumps(payload).encode()


async def test_two_worker_replicas_share_the_queue_and_run_each_task_once(
    tmp_path: Path, pg_test_dsn: str
) -> None:
    forge = FakeForge(ForgeKind.GITHUB)
    repo = forge.add_repo("Codertocat/Hello-World", writers=(OWNER,))
    for number in ISSUES:
        forge.add_issue(repo, number, title=f"issue {number}")
    web = replica(tmp_path, pg_test_dsn, "web", forge)
    workers = [replica(tmp_path, pg_test_dsn, f"worker{n}", forge) for n in (1, 2)]
    runs: list[tuple[str, str]] = []
    await web.store.open()
    for runtime in workers:
        await runtime.store.open()
    app = create_app(web, manage_runtime=False)
    loops = [
        Worker(rt, coordinator_factory=lambda n=n: Recording(runs, f"w{n}"), owner=f"w{n}")
        for n, rt in enumerate(workers, 1)
    ]
    try:
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://web"
        ) as client:
            for number in ISSUES:
                body = labeled(number)
                for _ in range(2):  # every delivery arrives twice
                    response = await client.post(
                        "/webhooks/github",
                        content=body,
                        headers={
                            "X-GitHub-Event": "issues",
                            "X-GitHub-Delivery": f"d-{number}",
                            "X-Hub-Signature-256": github_signature(body),
                        },
                    )
                    assert response.status_code == 202
        for loop in loops:
            await loop.start()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            tasks = await web.store.list_tasks()
            if len(tasks) == len(ISSUES) and all(t.state is TaskState.DONE for t in tasks):
                break
            await asyncio.sleep(0.1)
    finally:
        for loop in loops:
            await loop.stop()
        for runtime in (web, *workers):
            await runtime.store.close()
    assert len(tasks) == len(ISSUES) and all(t.state is TaskState.DONE for t in tasks)
    assert sorted(task_id for task_id, _ in runs) == sorted(t.id for t in tasks)  # once each
    assert {owner for _, owner in runs} == {"w1", "w2"}  # both replicas took work
    for number in ISSUES:
        assert forge.issues[("Codertocat/Hello-World", number)].reactions == [(None, "eyes")]
