"""A worker killed while it delivers loses no work and opens the change request when
the task runs again: killed between the local commit and the push (the push never
arrives), and killed after the push but before it could checkpoint (the push arrives
later). Real processes, a real kill, a real git remote whose pre-receive hook holds
the push until the test has killed the worker."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bot.storage.base import TaskState
from tests.agent import docs
from tests.e2e.support import GH_BRANCH, gh_labeled, github_repo, origin, settle
from tests.harness import ROOT, Harness
from tests.tools.conftest import Remote, git

pytestmark = pytest.mark.sandbox  # the quality gate runs `make lint` in bubblewrap

NEW_README = "# Hello-World\n\nMy first repository.\n\n## Installation\n\n    make install\n"
PLAN = docs.plan(
    [docs.action("task_1", "write_file", arguments={"path": "README.md", "content": NEW_README})]
)
SCRIPT: list[object] = [PLAN]  # the killed run never gets as far as the completion
HOOK = """#!/bin/sh
touch "{marker}"
sleep 4
exit {code}
"""


def hold_pushes(remote: Remote, marker: Path, *, accept: bool) -> Path:
    hook = remote.bare / "hooks" / "pre-receive"
    hook.write_text(HOOK.format(marker=marker, code=0 if accept else 1))
    hook.chmod(0o755)
    return hook


def remote_branch(remote: Remote) -> str | None:
    found = subprocess.run(
        ["git", "rev-parse", "--verify", "--quiet", f"refs/heads/{GH_BRANCH}"],
        cwd=remote.bare, capture_output=True, text=True, check=False,
    )  # fmt: skip
    return found.stdout.strip() or None


async def queue_the_task(tmp_path: Path, remote: Remote) -> str:
    async with Harness(tmp_path, script=SCRIPT) as bot:
        github_repo(bot, remote, labels=("bug", "coding agent"))
        assert (await bot.send_github("issues", gh_labeled())).status_code == 202
        await bot.dispatch_all()
        [task] = await bot.tasks()
        return task.id


async def kill_during_push(tmp_path: Path, remote: Remote, marker: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(  # noqa: ASYNC220 - a real process to kill
        [sys.executable, str(ROOT / "tests/worker/delivery_proc.py"), str(tmp_path), remote.url],
        env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 90
        while not os.path.exists(marker):  # noqa: ASYNC240 - a tight poll of a marker
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            assert time.monotonic() < deadline, "the worker never pushed"
            await asyncio.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)  # the push is on its way: the worker dies now
    finally:
        proc.wait(timeout=30)
        if proc.stderr:
            proc.stderr.close()
    await asyncio.sleep(5)  # the orphaned push ends (accepted or refused by the hook)


async def restart(tmp_path: Path, remote: Remote, task_id: str) -> Harness:
    bot = Harness(tmp_path, script=[docs.completion(done=1)])
    await bot.__aenter__()
    github_repo(bot, remote, labels=("bug", "coding agent"))
    # the dead worker's lease expires: maintenance gives the task to the next worker
    assert await bot.store.set_state(task_id, TaskState.QUEUED)
    await settle(bot)
    return bot


@pytest.mark.parametrize("push_arrives", [False, True], ids=["before-push", "after-push"])
async def test_a_worker_killed_while_delivering_loses_nothing(
    tmp_path: Path, push_arrives: bool
) -> None:
    remote = origin(tmp_path)
    task_id = await queue_the_task(tmp_path, remote)
    marker = tmp_path / "pushing"
    hook = hold_pushes(remote, marker, accept=push_arrives)

    await kill_during_push(tmp_path, remote, marker)

    workspace = tmp_path / "data" / "workspaces" / task_id
    local = git("rev-parse", "HEAD", cwd=workspace)
    assert git("show", "HEAD:README.md", cwd=workspace) == NEW_README.strip()  # committed
    assert remote_branch(remote) == (local if push_arrives else None)
    hook.unlink()

    bot = await restart(tmp_path, remote, task_id)
    try:
        task = await bot.store.get_task(task_id)
        assert task is not None and task.state is TaskState.DONE, task
        assert remote_branch(remote) == local  # the commit was pushed, once
        repo = bot.github.repo(bot.github.repos["Codertocat/Hello-World"].ref)
        [change] = repo.change_requests
        assert change.head_branch == GH_BRANCH
        issue = bot.github.issue(repo.ref, 1)
        assert "coding agent done" in issue.labels
    finally:
        await bot.__aexit__(None, None, None)
