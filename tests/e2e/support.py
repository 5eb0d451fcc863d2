"""Helpers for the end-to-end tests: payloads, an observable LLM, what the issue shows."""

from __future__ import annotations

import asyncio
import time
import zlib
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from bot.comments.render import Marker, find_markers
from bot.llm.base import HealthReport, LLMRequest, LLMResponse, LLMUnavailable
from bot.llm.scripted import ScriptedLLM
from bot.storage.base import Task, TaskState
from tests.agent import docs
from tests.fakes import FakeForge, FakeIssue
from tests.harness import Harness, fixture
from tests.tools.conftest import Remote, make_remote

OWNER = "Codertocat"
GH_REPO = "Codertocat/Hello-World"
GL_REPO = "gitlab-org/gitlab-test"
GL_OWNER = "root"
ORIGIN_FILES = {
    "README.md": b"# Hello-World\n\nMy first repository.\n",
    "Makefile": b"lint:\n\tgrep -q Hello-World README.md\n",
}

Hook = Callable[[], Awaitable[None]]


class SteeredLLM:
    """The scripted LLM, with two things a real endpoint does: people act while it
    thinks (``before[n]`` runs before the n-th request, 1-based), and it goes away
    (``down``: every call raises ``LLMUnavailable`` and health says unreachable)."""

    def __init__(self, script: Sequence[object], before: dict[int, Hook] | None = None) -> None:
        self.scripted = ScriptedLLM(list(script))
        self.name = "steered"
        self.before = dict(before or {})
        self.down = False
        self.calls = 0  # requests that reached the endpoint (not refused while down)

    @property
    def requests(self) -> list[LLMRequest]:
        return self.scripted.requests

    async def complete(self, request: LLMRequest) -> LLMResponse:
        if self.down:
            raise LLMUnavailable("connection refused")
        self.calls += 1
        hook = self.before.pop(self.calls, None)
        if hook is not None:
            await hook()
        return await self.scripted.complete(request)

    async def health(self) -> HealthReport:
        report = await self.scripted.health()
        if not self.down:
            return report
        return HealthReport(
            reachable=False, provider="scripted", base_url="test", model="scripted", error="down"
        )

    async def aclose(self) -> None:
        return None


def use_llm(bot: Harness, llm: SteeredLLM) -> SteeredLLM:
    bot.runtime.llm = llm
    bot.llm = llm  # the harness's ``llm`` is what tests read requests from
    return llm


def origin(tmp_path: Path, files: dict[str, bytes] | None = None) -> Remote:
    """A bare git repository on disk: the remote the task clones and pushes to."""
    return make_remote(tmp_path / "origin", dict(files or ORIGIN_FILES))


def github_repo(bot: Harness, remote: Remote | None = None, **issue: Any) -> FakeIssue:
    """The fixtures' repository and issue #1 on the fake GitHub."""
    ref = bot.github.add_repo(
        GH_REPO, dict(ORIGIN_FILES), clone_url=remote.url if remote else "", writers=(OWNER,)
    )
    fields = {"title": "Spelling error in the README file", "author": OWNER, **issue}
    bot.github.add_issue(ref, 1, **fields)
    return bot.github.issue(ref, 1)


def gh_labeled(label: str = "coding agent", **issue: Any) -> dict[str, Any]:
    payload = fixture("github", "issues.labeled.json")
    payload["label"]["name"] = label
    payload["issue"]["labels"].append({"name": label})
    payload["issue"].update(issue)
    return payload


def gh_comment(text: str, sender: str = OWNER, *, again: int = 0, **issue: Any) -> dict[str, Any]:
    """A comment by ``sender``; ``issue`` overrides fields of the issue it is on. Its id is
    GitHub's own identity of the comment: the same for the same sender, issue and text
    (a replay), another for the ``again``-th time a person writes the same words."""
    payload = fixture("github", "issue_comment.created.json")
    payload["comment"]["body"] = text
    payload["comment"]["user"]["login"] = sender
    payload["sender"]["login"] = sender
    payload["issue"].update(issue)
    number = payload["issue"]["number"]
    payload["comment"]["id"] = zlib.crc32(f"{sender}:{number}:{text}:{again}".encode())
    return payload


def gl_note(body: str, *, sender: str = GL_OWNER, kind: str = "issue") -> dict[str, Any]:
    """A GitLab note by ``sender`` on the fixtures' issue (open) or merge request."""
    name = "note-hook-issue.json" if kind == "issue" else "note-hook-merge-request.json"
    payload = fixture("gitlab", name)
    payload["object_attributes"]["note"] = body
    payload["user"]["username"] = sender
    if kind == "issue":
        payload["issue"]["state"] = "opened"
    return payload


# --- what the issue shows -----------------------------------------------------------------


# the FakeForges' bot accounts (github-actions[bot]: `bot action` with the workflow's token)
BOT_LOGINS = ("coding-agent[bot]", "coding-agent-bot", "github-actions[bot]")


def bodies(issue: FakeIssue) -> list[str]:
    """What the bot wrote on the issue (GitLab also keeps the people's notes the hooks
    told of: the harness stores them, as GitLab does)."""
    return [c.body for c in issue.comments if c.author in BOT_LOGINS]


def marker_of(body: str) -> Marker | None:
    found = find_markers(body)
    return found[-1] if found else None


def kinds(issue: FakeIssue) -> list[str]:
    """The marker kind of every comment, in order ("" for an unmarked one)."""
    return [m.kind if (m := marker_of(b)) is not None else "" for b in bodies(issue)]


def of_kind(issue: FakeIssue, kind: str) -> list[str]:
    return [b for b in bodies(issue) if (m := marker_of(b)) is not None and m.kind == kind]


def status_comment(issue: FakeIssue) -> str:
    [status] = of_kind(issue, "status")
    return status


def status_edits(forge: FakeForge, issue: FakeIssue) -> int:
    [comment] = [c for c in issue.comments if "kind=status" in c.body]
    return sum(1 for comment_id, _ in forge.edits if comment_id == comment.id)


def assert_no_duplicates(issue: FakeIssue) -> None:
    """Every comment carries a marker, and no body or marker appears twice."""
    seen = bodies(issue)
    assert len(seen) == len(set(seen)), seen
    markers = [marker_of(b) for b in seen]
    assert None not in markers, [b for b in seen if marker_of(b) is None]
    rendered = [m.render() for m in markers if m is not None]
    assert len(rendered) == len(set(rendered)), rendered


async def wait_until(check: Callable[[], Awaitable[bool]], seconds: float) -> bool:
    """Poll ``check`` every 10 ms for at most ``seconds``; whether it came true."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if await check():
            return True
        await asyncio.sleep(0.01)
    return await check()


async def settle(bot: Harness, rounds: int = 10) -> list[Task]:
    """Dispatch every queued event and run every queued task, until nothing moves."""
    ran: list[Task] = []
    for _ in range(rounds):
        handled = await bot.dispatch_all()
        done = await bot.run_queued()
        ran += done
        if not handled and not done:
            break
    return ran


def two_writes() -> list[object]:
    """A plan of two writes (the second's arguments from the model) and that second call."""
    first = docs.action(
        "task_1", "write_file", arguments={"path": "a.txt", "content": "A\n"}, purpose="Write a"
    )
    second = docs.action("task_2", "write_file", purpose="Write b", dependencies=["task_1"])
    plan = docs.plan([first, second], dependencies={"task_2": ["task_1"]})
    return [plan, docs.execution("task_2", "write_file", {"path": "b.txt", "content": "B\n"})]


# The bot branch of issue #1 ("Spelling error in the README file") of the GitHub fixtures.
GH_BRANCH = "agent/1-spelling-error-in-the-readme-file"


async def run_labelled_issue(bot: Harness, remote: Remote) -> Task:
    """The fixtures' issue #1, labelled, run to its end by the harness's script, which must
    finish it (the task the API, the dashboard and their tests read)."""
    github_repo(bot, remote, labels=("bug", "coding agent"))
    await bot.send_github("issues", gh_labeled())
    await settle(bot)
    [task] = await bot.tasks()
    assert task.state is TaskState.DONE, task
    return task
