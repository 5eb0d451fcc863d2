"""Forge calls per CI round and per review round (prints figures; not a test).

    .venv/bin/python bench/followup_rounds.py

Drives the real app, dispatcher and worker (SQLite in a temp dir, the one FakeForge per
forge) through the rounds of the bot's own change request, with the events GitHub and
GitLab send, and counts what the bot asks of the forge:

1. CI round: a burst of CI events on a failed head (queued, two failed jobs, the suite)
   -> the one decision -> the round queued with the jobs' logs; the round's end (its
   push and figures kept, the status comment shown); the next head's burst (all green)
   -> ready for review.
2. Review round: a review of N line comments (the review and each comment, as GitHub
   sends them; GitLab: N notes) -> one round queued; its end -> N replies, the addressed
   threads resolved, the status comment shown. The "repliers" rows: 6 threads also hold a
   reply by another person without write access (held by the forge, no event of their
   own), whose access the round asks about up to its cap (``MAX_REPLIER_LOOKUPS``).

The round's own task run (clone, plan, gate, push, its status comment on the change
request) is any task's run and is not counted here. Each forge method is counted once
per call, and converted to HTTP requests with the adapters' own costs (``COSTS``: from
the adapters' docstrings, and checked by the request-counting tests in
tests/forges/test_github_followup.py and tests/forges/test_gitlab_followup.py). The
target is at most 15 requests per round; review rounds of many threads stay under it
because their replies and resolutions go in one GraphQL document for up to 20 threads
(``ANSWERS_PER_REQUEST``). On GitLab the one FakeForge answers as the adapter does
(``bot.forges.gitlab_answers``): each GraphQL document it sends is a recorded ``graphql``
call (one request), a look-up of the merge request's global id a ``get_merge_request``
call; and a GitLab note that only brings a review round (no task on the merge request) is
not read back (``triggers.note_unused``).
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import math
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bot.change_state import Mergeable, ThreadAnswer, ThreadComment  # noqa: E402
from bot.events import CheckState, ForgeKind, IssueRef, TaskRequest  # noqa: E402
from bot.followup.record import ChangeRecord  # noqa: E402
from bot.forges.base import ANSWERS_PER_REQUEST  # noqa: E402
from bot.run_events import Outcome  # noqa: E402
from bot.storage.base import TaskState, Watch  # noqa: E402
from tests.e2e.after import (  # noqa: E402
    PROJECT,
    actions_check,
    check_run,
    check_suite,
    review_comment,
    review_submitted,
    review_threads,
)
from tests.e2e.support import GH_BRANCH, GH_REPO, GL_OWNER, GL_REPO, OWNER, gl_note  # noqa: E402
from tests.harness import Harness  # noqa: E402
from tests.storage.store_support import Clock  # noqa: E402

TARGET = 15
SETTLE = 60.0
HEAD, NEXT = "a" * 40, "c" * 40
GL_BRANCH = "agent/17-add-calc-sh"

Cost = Callable[[tuple[Any, ...]], int]


def _answers(per_request: int) -> Cost:
    def cost(args: tuple[Any, ...]) -> int:
        answers: tuple[ThreadAnswer, ...] = args[2]
        return math.ceil(len(answers) / per_request) if per_request else 0

    return cost


# HTTP requests per forge call, per adapter (a method not listed costs one).
COSTS: dict[ForgeKind, dict[str, int | Cost]] = {
    ForgeKind.GITHUB: {
        "get_change_request_state": 1,  # one GraphQL query
        "get_commit_checks": 2,  # check runs, statuses (+1 per failed run with annotations)
        "get_job_log": 2,  # the REST redirect, then the download of its end
        "list_review_threads": 1,  # GraphQL, 100 threads a page
        "answer_threads": _answers(ANSWERS_PER_REQUEST),  # GraphQL documents
        "mark_ready_for_review": 2,  # query, mutation
        "get_issue": 2,  # the issue and its comments (a pull request: +1 for its head)
    },
    ForgeKind.GITLAB: {
        "get_change_request_state": 3,
        "get_commit_checks": 2,  # pipelines, then the jobs of the newest one
        "get_job_log": 1,  # the trace, its end kept
        "list_review_threads": 1,
        "answer_threads": 0,  # its requests are its recorded graphql (or REST) calls
        "graphql": 1,  # one GraphQL document: up to 20 threads' replies and resolutions
        "get_merge_request": 1,  # the global id createNote needs, when not seen before
        "mark_ready_for_review": 2,
        "get_issue": 2,
        "get_permission": 2,  # the user, then the member
    },
}


def requests(kind: ForgeKind, calls: list[tuple[str, tuple[Any, ...]]]) -> int:
    total, known = 0, set()
    for name, args in calls:
        if name == "get_repo_info":  # the adapters keep it for REPO_INFO_TTL (5 minutes)
            total += args not in known
            known.add(args)
            continue
        cost = COSTS[kind].get(name, 1)
        total += cost(args) if callable(cost) else cost
    return total


def by_method(calls: list[tuple[str, tuple[Any, ...]]]) -> str:
    counted = collections.Counter(name for name, _ in calls)
    return ", ".join(f"{name} {n}" for name, n in sorted(counted.items()))


class Measured:
    def __init__(self) -> None:
        self.rows: list[tuple[str, ForgeKind, list[tuple[str, tuple[Any, ...]]]]] = []

    def add(self, label: str, kind: ForgeKind, calls: list[tuple[str, tuple[Any, ...]]]) -> None:
        self.rows.append((label, kind, list(calls)))

    def print(self) -> None:
        print(f"{'step':<58} {'calls':>5} {'requests':>8}  target <= {TARGET}")
        for label, kind, calls in self.rows:
            sent = requests(kind, calls)
            mark = "ok" if sent <= TARGET else "OVER"
            print(f"{label:<58} {len(calls):>5} {sent:>8}  {mark}")
            print(f"    {by_method(calls)}")


async def watched(bot: Harness, kind: ForgeKind) -> tuple[Any, Any]:
    """The bot's draft change request from issue #1 (#17), watched, its gate passed."""
    forge = bot.github if kind is ForgeKind.GITHUB else bot.gitlab
    name, owner = (GH_REPO, OWNER) if kind is ForgeKind.GITHUB else (GL_REPO, GL_OWNER)
    branch = GH_BRANCH if kind is ForgeKind.GITHUB else GL_BRANCH
    number = 1 if kind is ForgeKind.GITHUB else 17
    repo = forge.add_repo(name, dict(PROJECT), writers=(owner,))
    forge.add_issue(repo, number, title="Add calc.sh", author=owner)
    issue = IssueRef(repo, number, title="x")
    task, _ = await bot.store.create_task(TaskRequest(issue, owner))
    await bot.store.set_state(task.id, TaskState.DONE)
    # the status comment its task posted (the store knows it, as after any task)
    status = await forge.create_comment(
        issue, f"status <!-- coding-agent:task={task.id} kind=status seq=0 -->"
    )
    await bot.store.put_comment_id(task.id, "status:0", status.id)
    change = await forge.open_change_request(repo, head=branch, base="main", title="t", body="")
    fake = forge.change(repo, change.number)
    fake.head_sha, fake.base_sha, fake.mergeable, fake.commits = (
        HEAD,
        "b" * 40,
        Mergeable.MERGEABLE,
        [],
    )
    pull = IssueRef(repo, change.number, is_change_request=True, web_url=change.web_url,
                    author=forge.bot_login, head_branch=branch, head_repo=name)  # fmt: skip
    record = ChangeRecord(head_sha=HEAD, gate_sha=HEAD)
    await bot.store.add_watch(Watch(pull.key, repo.key, branch, task.id, pull,
                                    data=record.to_dict()))  # fmt: skip
    return forge, change


async def step(bot: Harness, clock: Clock, quiet: float) -> None:
    await bot.dispatch_all()
    clock.advance(quiet + 1)
    await bot.dispatch_all()


async def end_round(bot: Harness, pushed: str) -> None:
    """The round's task ends done, having pushed ``pushed`` with its gate passed: what the
    worker hands the aftercare after any task."""
    [task] = [t for t in await bot.tasks() if t.request.round is not None and t.active]
    delivery = {"head_sha": pushed, "paths": [], "quality": {"passed": True}}
    await bot.store.save_checkpoint(task.id, {"delivery": delivery})
    await bot.store.set_state(task.id, TaskState.DONE)
    done = await bot.store.get_task(task.id)
    assert done is not None
    await bot.worker.aftercare.task_ended(done, Outcome(TaskState.DONE, summary={}))


async def ci_round(root: Path, kind: ForgeKind, failed: int, measured: Measured) -> None:
    clock = Clock()
    async with Harness(
        root, clock=clock, overrides={"workspace": {"ready_when_green": True}}
    ) as bot:
        forge, change = await watched(bot, kind)
        forge.calls.clear()
        lint = CheckState.FAILED if failed > 1 else CheckState.PASSED
        forge.set_checks(HEAD, actions_check("test", CheckState.FAILED, 11),
                         actions_check("lint", lint, 12))  # fmt: skip
        forge.logs["11"] = forge.logs["12"] = "FAILED test_sub\n" * 200
        if kind is ForgeKind.GITHUB:
            for payload in (
                check_run(HEAD, change.number, conclusion=None, status="queued"),
                check_run(HEAD, change.number),
                check_run(HEAD, change.number, name="lint", run_id=12),
            ):
                await bot.send_github("check_run", payload)
            await bot.send_github("check_suite", check_suite(HEAD, change.number,
                                                             conclusion="failure"))  # fmt: skip
        else:
            await bot.send_gitlab("Pipeline Hook", gl_pipeline(HEAD, change.number, "running"))
            await bot.send_gitlab("Pipeline Hook", gl_pipeline(HEAD, change.number, "failed"))
        await step(bot, clock, SETTLE)
        started = list(forge.calls)
        forge.calls.clear()
        await end_round(bot, NEXT)
        jobs = "1 failed job" if failed == 1 else f"{failed} failed jobs"
        measured.add(f"{kind.value}: CI round, {jobs}: decision, round, its end", kind,
                     started + forge.calls)  # fmt: skip
        forge.calls.clear()
        forge.change(forge.repos[GH_REPO if kind is ForgeKind.GITHUB else GL_REPO].ref,
                     change.number).head_sha = NEXT  # fmt: skip
        forge.set_checks(NEXT, actions_check("test", CheckState.PASSED, 21),
                         actions_check("lint", CheckState.PASSED, 22))  # fmt: skip
        if kind is ForgeKind.GITHUB:
            await bot.send_github("check_suite", check_suite(NEXT, change.number))
        else:
            await bot.send_gitlab("Pipeline Hook", gl_pipeline(NEXT, change.number, "success"))
        await step(bot, clock, SETTLE)
        measured.add(f"{kind.value}: the next head's decision: green, ready", kind, forge.calls)


def gl_pipeline(sha: str, iid: int, status: str) -> dict[str, Any]:
    from tests.e2e.after import pipeline

    job = "failed" if status == "failed" else "success" if status == "success" else "running"
    return pipeline(sha, iid, GL_BRANCH, status=status, job=(31, "test", job))


def replied(forge: Any, change: Any, repliers: int) -> None:
    """The first ``repliers`` threads each get a reply by another person (none of them with
    write access): the round asks the forge about each, up to its cap."""
    repo = forge.repos[GH_REPO if forge.kind is ForgeKind.GITHUB else GL_REPO].ref
    held = forge.change(repo, change.number).threads
    for n in range(min(repliers, len(held))):
        reply = ThreadComment(id=800_000 + n, author=f"reader-{n}", body="me too")
        held[n] = dataclasses.replace(held[n], comments=(*held[n].comments, reply))


async def review_round(
    root: Path, kind: ForgeKind, threads: int, measured: Measured, repliers: int = 0
) -> None:
    clock = Clock()
    async with Harness(root, clock=clock) as bot:
        forge, change = await watched(bot, kind)
        forge.calls.clear()
        comments = [("calc.sh", n + 1, f"comment {n}") for n in range(threads)]
        if kind is ForgeKind.GITHUB:
            held = review_threads(forge, change.number, comments)
            await bot.send_github("pull_request_review", review_submitted(change))
            for thread in held:
                await bot.send_github("pull_request_review_comment", review_comment(change, thread))
        else:
            for n, (path, line, body) in enumerate(comments):
                note = gl_note(body, kind="merge_request")
                position = {"new_path": path, "old_path": path, "new_line": line, "old_line": None}
                note["object_attributes"].update(id=900 + n, type="DiffNote", position=position,
                                                 discussion_id=f"{n:040x}")  # fmt: skip
                note["merge_request"].update(iid=change.number, source_branch=GL_BRANCH,
                                             url=change.web_url)  # fmt: skip
                await bot.send_gitlab("Note Hook", note)
        replied(forge, change, repliers)
        await step(bot, clock, bot.settings.review.quiet_seconds)
        started = list(forge.calls)
        forge.calls.clear()
        [task] = [t for t in await bot.tasks() if t.request.round is not None]
        delivery = {"head_sha": NEXT, "paths": ["calc.sh"], "quality": {"passed": True}}
        await bot.store.save_checkpoint(task.id, {"delivery": delivery})
        await bot.store.set_state(task.id, TaskState.DONE)
        done = await bot.store.get_task(task.id)
        assert done is not None
        answers = {"threads": [{"thread": f"T{n + 1}", "changed": True, "reply": "done"}
                               for n in range(threads)]}  # fmt: skip
        await bot.worker.aftercare.task_ended(done, Outcome(TaskState.DONE, summary=answers))
        label = f"{kind.value}: review round, {threads} comments: start, answers"
        if repliers:
            label = f"{kind.value}: review round, {threads} comments, {repliers} repliers"
        measured.add(label, kind, started + forge.calls)


async def main() -> None:
    measured = Measured()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        for name in ("github", "gitlab"):
            for n in (1, 2):
                (base / f"ci-{name}-{n}").mkdir()
        for name, n in (
            ("github", 3),
            ("github", 10),
            ("github", 40),
            ("gitlab", 3),
            ("gitlab", 10),
            ("gitlab", 40),
        ):
            (base / f"review-{name}-{n}").mkdir()
            (base / f"replied-{name}-{n}").mkdir()
        for kind in (ForgeKind.GITHUB, ForgeKind.GITLAB):
            for failed in (1, 2):
                await ci_round(base / f"ci-{kind.value}-{failed}", kind, failed, measured)
        for kind, threads in ((ForgeKind.GITHUB, 3), (ForgeKind.GITHUB, 10),
                              (ForgeKind.GITHUB, 40), (ForgeKind.GITLAB, 3),
                              (ForgeKind.GITLAB, 10), (ForgeKind.GITLAB, 40)):  # fmt: skip
            await review_round(base / f"review-{kind.value}-{threads}", kind, threads, measured)
        for kind in (ForgeKind.GITHUB, ForgeKind.GITLAB):
            for threads in (10, 40):  # replies by 6 people without write access
                await review_round(base / f"replied-{kind.value}-{threads}", kind, threads,
                                   measured, repliers=6)  # fmt: skip
    measured.print()
    print(
        "\nA CI round: the burst of CI events on a failed head, its one decision (the change"
        " request, the head's and the base's checks, the failed jobs' logs), the round queued,"
        " the status comment; then the round's end (its figures, the status comment). The"
        " next head gets its own decision (last rows of each forge)."
    )


if __name__ == "__main__":
    asyncio.run(main())
