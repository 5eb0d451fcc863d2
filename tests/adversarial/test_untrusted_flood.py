"""66,000 characters of nested fence tags and HTML comments from a person, through every
path that cleans what people write to the bot (a command's instructions, an answer,
feedback, a review comment), through the real app while ``/healthz`` is asked every
20 ms: the event loop never stalls, and what reaches the model is cleaned and cut.

Cleaning used to repeat its pass until nothing changed, on the event loop, on text nobody
cut: this flood held the loop for 25 s on an idle machine (65 s under load)."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator, Awaitable
from pathlib import Path

import pytest

from bot.events import RoundKind, TaskMode
from bot.storage.base import TaskState
from bot.untrusted import MAX_PERSON_CHARS
from tests.agent import docs
from tests.agent.conftest import script
from tests.e2e.after import bot_with_clock, later, review_comment, review_threads
from tests.e2e.support import (
    GH_REPO,
    OWNER,
    SteeredLLM,
    gh_comment,
    github_repo,
    origin,
    settle,
    two_writes,
    use_llm,
)
from tests.harness import Harness
from tests.test_untrusted import nested

pytestmark = pytest.mark.sandbox

FLOOD = nested(6_000)  # 66,000 characters, nested 6,000 deep
# Seconds without an answer from /healthz that count as a stalled loop (the code before:
# 37-81 s; the first run in a process warms up for 0.3-0.5 s under load, flood or not).
STALL = 2.0


class Pulse:
    """``/healthz`` asked every 20 ms while work runs: the longest time between answers
    (and how many came: a few at least, or the work was too short to say anything)."""

    def __init__(self, bot: Harness) -> None:
        self.bot = bot
        self.longest = 0.0
        self.answers = 0

    async def during(self, work: Awaitable[object]) -> None:
        done = asyncio.Event()

        async def ask() -> None:
            last = time.perf_counter()
            while not done.is_set():
                response = await self.bot.client.get("/healthz")
                assert response.status_code == 200
                now = time.perf_counter()
                self.longest = max(self.longest, now - last)
                self.answers += 1
                last = now
                await asyncio.sleep(0.02)

        asker = asyncio.create_task(ask())
        try:
            await work
        finally:
            done.set()
            await asker


def fenced(prompt: str, source: str) -> str:
    """The body of the fenced block from ``source`` in a prompt."""
    opening = f'<untrusted source="{source}">\n'
    start = prompt.index(opening) + len(opening)
    return prompt[start : prompt.index("\n</untrusted>", start)]


def assert_clean(body: str) -> None:
    assert body, "the block is empty"
    assert "untrusted" not in body.lower() and "<!--" not in body
    assert len(body) <= MAX_PERSON_CHARS
    assert re.search(r"\[\.\.\. \d+ more characters\]$", body), body[-80:]


@pytest.fixture
async def bot(tmp_path: Path) -> AsyncIterator[Harness]:
    async with Harness(tmp_path) as harness:
        yield harness


async def test_a_flood_in_a_commands_instructions(bot: Harness, tmp_path: Path) -> None:
    llm = use_llm(bot, SteeredLLM([*two_writes(), docs.completion()]))
    github_repo(bot, origin(tmp_path))
    pulse = Pulse(bot)
    response = await bot.send_github("issue_comment", gh_comment(f"/agent run {FLOOD}"))
    assert response.status_code == 202
    await pulse.during(settle(bot))
    assert pulse.answers >= 3 and pulse.longest < STALL, pulse.longest

    [task] = await bot.tasks()
    assert task.state is TaskState.DONE
    prompt = llm.requests[0].messages[-1].content
    assert_clean(fenced(prompt, "instructions given with the command"))


async def test_a_flood_as_an_answer(bot: Harness, tmp_path: Path) -> None:
    [unclear] = script("unclear_goal")[:1]
    action = docs.action("task_1", "write_file", arguments={"path": "a.txt", "content": "A\n"})
    llm = use_llm(bot, SteeredLLM([unclear, docs.plan([action]), docs.completion(done=1)]))
    github_repo(bot, origin(tmp_path))
    await bot.send_github("issue_comment", gh_comment("/agent run"))
    await settle(bot)
    [task] = await bot.tasks()
    assert task.state is TaskState.AWAITING_INPUT

    pulse = Pulse(bot)
    assert (await bot.send_github("issue_comment", gh_comment(FLOOD))).status_code == 202
    await pulse.during(settle(bot))
    assert pulse.answers >= 3 and pulse.longest < STALL, pulse.longest

    [task] = await bot.tasks()
    assert task.state is TaskState.DONE
    assert_clean(fenced(llm.requests[1].messages[-1].content, "answer by Codertocat"))


async def test_a_flood_as_feedback_mid_task(bot: Harness, tmp_path: Path) -> None:
    follow = {
        "phase": "reflection",
        "reflection": {"action_evaluated": "human feedback", "status": "success",
                       "evaluation": "nothing to change", "plan_revision_needed": False},
        "comment": "noted",
    }  # fmt: skip
    llm = use_llm(bot, SteeredLLM([*two_writes(), follow, docs.completion()]))
    pulse = Pulse(bot)

    async def comment() -> None:
        response = await bot.send_github("issue_comment", gh_comment(FLOOD))
        assert response.status_code == 202
        assert await bot.dispatch_all() == 1

    llm.before[2] = comment
    github_repo(bot, origin(tmp_path))
    await bot.send_github("issue_comment", gh_comment("/agent run"))
    await pulse.during(settle(bot))
    assert pulse.answers >= 3 and pulse.longest < STALL, pulse.longest

    [task] = await bot.tasks()
    assert task.state is TaskState.DONE
    assert llm.requests[2].phase == "reflection"
    assert_clean(fenced(llm.requests[2].messages[-1].content, "feedback by Codertocat"))


async def test_a_flood_in_a_review_comment(tmp_path: Path) -> None:
    """A line comment on the bot's pull request counts towards a review round: the round
    reads its thread as GitHub stores it, and the thread becomes checklist item T1."""
    fix = docs.action("task_1", "write_file", arguments={"path": "a.txt", "content": "A2\n"})
    scripted = [*two_writes(), docs.completion(), docs.plan([fix]), docs.completion(done=1)]
    async with bot_with_clock(tmp_path, []) as bot:
        llm = use_llm(bot, SteeredLLM(scripted))
        github_repo(bot, origin(tmp_path))
        await bot.send_github("issue_comment", gh_comment("/agent run"))
        await settle(bot)
        [change] = bot.github.repos[GH_REPO].change_requests

        [thread] = review_threads(bot.github, change.number, [("a.txt", 1, FLOOD)])
        pulse = Pulse(bot)
        review = review_comment(change, thread)
        assert (await bot.send_github("pull_request_review_comment", review)).status_code == 202
        await pulse.during(later(bot))
        assert pulse.answers >= 3 and pulse.longest < STALL, pulse.longest

        follow_up = [t for t in await bot.tasks() if t.request.mode is TaskMode.FOLLOW_UP]
        assert [t.state for t in follow_up] == [TaskState.DONE]
        assert [t.request.round.kind for t in follow_up if t.request.round] == [RoundKind.REVIEW]
        prompt = llm.requests[-2].messages[-1].content
        body = fenced(prompt, "review thread T1")
        assert body.startswith(f"{OWNER}: ")
        assert_clean(body.removeprefix(f"{OWNER}: "))
