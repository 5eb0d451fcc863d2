"""A model server that answers its health probe but fails every task request (it runs
out of memory on a real prompt): the task pauses once, and each resume that fails the
same way waits twice as long and touches nothing on the issue. Ten simulated minutes of
this cost at most five forge writes on the issue; when the server heals, the task
finishes and the labels move on.

Through the real httpx client against a local HTTP server playing the model endpoint,
with the bot's maintenance driven on a fake clock (no real minutes pass).
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from bot.agent.loop import AgentLoop
from bot.llm.openai import OpenAICompatibleLLM
from bot.storage.base import TaskState
from tests.agent import docs
from tests.agent.conftest import Clock
from tests.e2e.support import gh_comment, github_repo, of_kind, settle, two_writes
from tests.harness import Harness
from tests.llm.model_server import Reply, Sent, model_server
from tests.llm.payloads import chat_completion, model_list_owned
from tests.tools.conftest import Remote

pytestmark = pytest.mark.sandbox

WRITES = ("create_comment", "edit_comment", "add_labels", "remove_label", "ensure_label")
MAINTENANCE_STEP = 10.0  # seconds between the worker's maintenance passes


class FlakyServer:
    """Answers the model list and the one-line health probe; fails (503) every task
    request while ``sick``, else answers the task's documents in order."""

    def __init__(self, documents: list[Any]) -> None:
        self.sick = True
        self.failed = 0
        self.first_failure_writes: int | None = None  # forge calls made before it
        self.forge_calls: list[Any] = []
        self._documents = list(documents)
        self._lock = threading.Lock()

    def __call__(self, sent: Sent) -> Reply:
        if sent.method == "GET":
            return Reply(200, model_list_owned("vllm", "qwen2.5-coder"))
        if sent.body["messages"][-1]["content"] == "Are you there?":
            return Reply(200, chat_completion('{"ok": true}'))
        with self._lock:
            if self.sick:
                self.failed += 1
                if self.first_failure_writes is None:
                    self.first_failure_writes = len(self.forge_calls)
                return Reply(503, {"error": {"message": "CUDA out of memory", "code": 503}})
            return Reply(200, chat_completion(json.dumps(self._documents.pop(0))))


async def test_ten_minutes_of_flapping_cost_at_most_five_forge_writes(
    tmp_path: Path, remote: Remote
) -> None:
    clock = Clock(time.time())
    flaky = FlakyServer([*two_writes(), docs.completion()])
    waited: list[float] = []

    async def sleep(seconds: float) -> None:  # the provider's retry waits, not real ones
        waited.append(seconds)

    with model_server(flaky) as server:
        loop = lambda: AgentLoop(clock=clock)  # noqa: E731 - the run's clock is the fake one
        async with Harness(tmp_path, clock=clock, coordinator_factory=loop) as bot:
            flaky.forge_calls = bot.github.calls
            llm = OpenAICompatibleLLM(
                base_url=server.url + "/v1", model="qwen2.5-coder", sleep=sleep
            )
            bot.runtime.llm = llm
            try:
                issue = github_repo(bot, remote)
                await bot.send_github("issue_comment", gh_comment("/agent run"))
                await settle(bot)
                [task] = await bot.tasks()
                assert task.state is TaskState.PAUSED

                started, resumes, wakes = clock.now, 0, [task.wake_at]
                while clock.now < started + 600:
                    clock.advance(MAINTENANCE_STEP)
                    await bot.worker.maintain()
                    resumes += len(await bot.run_queued())
                    [task] = await bot.tasks()
                    if task.wake_at != wakes[-1]:
                        wakes.append(task.wake_at)

                assert flaky.first_failure_writes is not None
                writes = [
                    name
                    for name, _ in bot.github.calls[flaky.first_failure_writes :]
                    if name in WRITES
                ]
                print(f"flapping: {resumes} resumes, {len(writes)} forge writes: {writes}")
                assert len(writes) <= 5, writes
                assert task.state is TaskState.PAUSED
                assert issue.labels == ["coding agent paused"]
                assert len(of_kind(issue, "paused")) == 1  # one pause comment per outage
                # resumed, failed the same way, and waited twice as long each time
                interval = bot.settings.llm.health_interval
                assert 2 <= resumes <= 5, resumes
                gaps = [b - a for a, b in itertools.pairwise(wakes) if a and b]
                assert gaps and all(later > earlier for earlier, later in itertools.pairwise(gaps))
                assert wakes[-1] is not None and wakes[-1] - clock.now > interval

                # the server heals: the next resume finishes the task and the labels move on
                flaky.sick = False
                clock.advance(wakes[-1] - clock.now + 1)
                await bot.worker.maintain()
                await settle(bot)
                [task] = await bot.tasks()
            finally:
                await llm.aclose()

    assert task.state is TaskState.DONE, task.error
    assert issue.labels == ["coding agent done"]
    assert len(of_kind(issue, "paused")) == 1 and len(of_kind(issue, "completion")) == 1
