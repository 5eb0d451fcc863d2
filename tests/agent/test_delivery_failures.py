"""A refused push, a stop: the work survives in the run directory and a person is told why."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import pytest

from bot.llm.scripted import ScriptedLLM
from bot.record.failures import push_failure, push_hints
from bot.run_events import ProgressEvent, ProgressKind
from bot.storage.base import TaskState
from tests.agent import docs
from tests.agent.conftest import Harness, make_harness, planning_settings
from tests.agent.test_delivery import bare_remote, git

pytestmark = pytest.mark.sandbox

FILES = {"README.md": "# Widgets\n"}
WORKFLOW = ".github/workflows/ci.yml"
CI = "on: push\njobs: {}\n"
TOKEN = "ghp_" + "S" * 36
REFUSAL = (
    f"refusing to allow a GitHub App to create or update workflow `{WORKFLOW}` without "
    f"`workflows` permission (token {TOKEN})"
)


def refusing_remote(base: Path) -> Path:
    """A bare remote whose pre-receive hook refuses every push, as GitHub does."""
    bare = bare_remote(base, FILES)
    hook = bare / "hooks" / "pre-receive"
    hook.write_text(f"#!/bin/sh\necho '{REFUSAL}' >&2\nexit 1\n")
    hook.chmod(0o755)
    return bare


async def _clone_harness(tmp_path: Path, stack: contextlib.AsyncExitStack, bare: Path) -> Harness:
    return await make_harness(
        tmp_path, stack, files=FILES, clone_url=f"file://{bare}", title="Add CI"
    )


async def test_a_refused_push_asks_a_person_quoting_git_and_keeps_the_files(
    tmp_path: Path, stack: contextlib.AsyncExitStack
) -> None:
    bare = refusing_remote(tmp_path / "origin")
    harness = await _clone_harness(tmp_path, stack, bare)
    write = docs.action("task_1", "write_file", arguments={"path": WORKFLOW, "content": CI})
    llm = ScriptedLLM([docs.plan([write]), docs.intervention("Look at the push log")])
    asked = await harness.run(llm)
    assert asked.state is TaskState.AWAITING_APPROVAL  # writing a CI definition: approval
    await harness.command("approve")

    outcome = await harness.run(llm)

    assert outcome.state is TaskState.NEEDS_HUMAN, outcome
    assert outcome.reason.startswith(f"the work could not be pushed to {harness.built.branch}: ")
    assert "without `workflows` permission" in outcome.reason
    assert "pre-receive hook declined" in outcome.reason
    assert TOKEN not in outcome.reason and "[REDACTED]" in outcome.reason
    recommendations = outcome.summary["recommendations"]
    assert 'needs the "workflows" permission' in recommendations[0]
    assert "Look at the push log" in recommendations  # the model's advice comes after
    [event] = harness.of(ProgressKind.HUMAN_INTERVENTION)
    assert event["summary"]["reason"] == outcome.reason
    assert ProgressKind.COMPLETION not in harness.kinds()
    # nothing was delivered, and nothing is lost
    assert harness.forge.repo(harness.repo).change_requests == []
    run_dir = harness.settings.data_dir / "runs" / harness.task.id
    assert (run_dir / "artifacts" / WORKFLOW).read_text() == CI
    kept = f"The changed files are kept in `runs/{harness.task.id}/artifacts/` in the bot's data"
    assert any(r.startswith(kept) for r in recommendations)
    assert not any(str(harness.settings.data_dir) in r for r in recommendations)  # no host path
    errors = (run_dir / "errors.log").read_text()
    assert f"[forge] push of {harness.built.branch} failed: git push failed" in errors
    assert TOKEN not in errors
    report = (run_dir / "report.md").read_text()
    assert "**Outcome:** needs a person: the work could not be pushed" in report
    assert f"artifacts/{WORKFLOW}" in report

    again = await harness.run(llm)  # a re-run announces nothing twice
    assert again.state is TaskState.NEEDS_HUMAN
    assert len(harness.of(ProgressKind.HUMAN_INTERVENTION)) == 1


async def test_a_stopped_task_keeps_its_uncommitted_changes(
    tmp_path: Path, stack: contextlib.AsyncExitStack
) -> None:
    bare = bare_remote(tmp_path / "origin", FILES)
    harness = await _clone_harness(tmp_path, stack, bare)
    first = docs.action("task_1", "write_file", arguments={"path": "notes.txt", "content": "a\n"})
    second = docs.action(
        "task_2", "write_file", arguments={"path": "more.txt", "content": "b\n"},
        dependencies=["task_1"],
    )  # fmt: skip
    llm = ScriptedLLM([docs.plan([first, second], dependencies={"task_2": ["task_1"]})])

    async def emit(event: ProgressEvent) -> None:
        harness.events.append(event)
        if event.kind is ProgressKind.ACTION and event.data.get("status") == "done":
            await harness.command("stop", author="bob")

    harness.emit = emit  # type: ignore[method-assign]
    outcome = await harness.run(llm)

    assert outcome.state is TaskState.STOPPED
    artifacts = harness.settings.data_dir / "runs" / harness.task.id / "artifacts"
    assert (artifacts / "notes.txt").read_text() == "a\n"
    assert not (artifacts / "more.txt").exists()
    # nothing hidden: the work so far is on the bot's branch, in a draft marked unfinished
    branch = harness.built.branch
    assert git("show", f"{branch}:notes.txt", cwd=bare) == "a"
    [change] = harness.forge.repo(harness.repo).change_requests
    title, body = harness.forge.repo(harness.repo).change_request_bodies[change.number]
    assert change.draft and title.startswith("[unfinished] ")
    assert body.startswith("> **Unfinished.**") and "not run (unfinished work)" in body
    [links] = harness.of(ProgressKind.LINKS)
    assert links == {"branch": branch, "change_request_url": change.web_url}


async def unfinished_task(
    tmp_path: Path, stack: contextlib.AsyncExitStack
) -> tuple[Harness, Path, dict[str, Any], dict[str, Any]]:
    """A task with a real remote that writes notes.txt, fails its second step, and may not
    revise: it ends needing a person. The harness, the bare remote, the plan, the reflection."""
    bare = bare_remote(tmp_path / "origin", FILES)
    harness = await make_harness(
        tmp_path, stack, files=FILES, clone_url=f"file://{bare}",
        planning=planning_settings(revision={"max_revisions": 0}),
    )  # fmt: skip
    first = docs.action("task_1", "write_file", arguments={"path": "notes.txt", "content": "a\n"})
    second = docs.action("task_2", "read_file", arguments={"path": "missing.txt"},
                         dependencies=["task_1"])  # fmt: skip
    plan = docs.plan([first, second], dependencies={"task_2": ["task_1"]})
    return harness, bare, plan, docs.reflection("task_2", revise=True, reason="read something else")


async def test_a_task_that_needs_a_person_pushes_its_work_and_says_what_to_check(
    tmp_path: Path, stack: contextlib.AsyncExitStack
) -> None:
    harness, bare, plan, reflection = await unfinished_task(tmp_path, stack)
    llm = ScriptedLLM([plan, reflection])

    outcome = await harness.run(llm)

    assert outcome.state is TaskState.NEEDS_HUMAN, outcome
    branch = harness.built.branch
    assert git("show", f"{branch}:notes.txt", cwd=bare) == "a"
    [change] = harness.forge.repo(harness.repo).change_requests
    title, _body = harness.forge.repo(harness.repo).change_request_bodies[change.number]
    assert change.draft and title.startswith("[unfinished] ")
    [event] = harness.of(ProgressKind.HUMAN_INTERVENTION)
    first_advice = event["summary"]["recommendations"][0]
    assert first_advice == f"Review the unfinished work pushed to {change.web_url}"
    assert (
        "## Quality gate" in event["report"]
        and str(harness.settings.data_dir) not in (event["report"])
    )


def test_push_hints_name_what_to_check() -> None:
    def hints(error: str) -> str:
        return " | ".join(push_hints(error, branch="agent/7-x"))

    assert "GitHub App" in hints("refusing to allow ... without `workflows` permission")
    assert "not a fast-forward" in hints(" ! [rejected] HEAD -> agent/7-x (fetch first)")
    assert "not a fast-forward" in hints(" ! [rejected] (non-fast-forward)")
    assert "branch protection" in hints("remote: error: GH006: Protected branch update failed")
    assert "credentials" in hints("remote: Permission to acme/widgets.git denied to bot.")
    assert "can push the branch agent/7-x" in hints("git push failed (exit 128): weird")
    failed = push_failure("x" * 2000, branch="b", kept_in="/runs/t/artifacts")
    assert len(failed.reason) < 700 and failed.reason.endswith(" …")
    assert failed.hints[-1] == "The changed files are kept in /runs/t/artifacts"


async def test_work_written_through_the_forge_api_is_linked_when_a_person_is_needed(
    tmp_path: Path, stack: contextlib.AsyncExitStack
) -> None:
    harness = await make_harness(
        tmp_path, stack, planning=planning_settings(revision={"max_revisions": 0})
    )
    write = docs.action(
        "task_1",
        "github_create_or_update_file",
        arguments={"path": "README.md", "content": "# New\n", "message": "m"},
    )
    read = docs.action("task_2", "github_get_file_contents", arguments={"path": "missing.md"},
                       dependencies=["task_1"])  # fmt: skip
    llm = ScriptedLLM([
        docs.plan([write, read], dependencies={"task_2": ["task_1"]}),
        docs.reflection("task_2", revise=True, reason="look elsewhere"),
    ])  # fmt: skip

    outcome = await harness.run(llm)

    assert outcome.state is TaskState.NEEDS_HUMAN, outcome
    [change] = harness.forge.repo(harness.repo).change_requests
    title, _body = harness.forge.repo(harness.repo).change_request_bodies[change.number]
    assert title.startswith("[unfinished] ") and change.head_branch == harness.built.branch
    [links] = harness.of(ProgressKind.LINKS)
    assert links == {"branch": harness.built.branch, "change_request_url": change.web_url}


async def test_a_crash_pushes_the_work_so_far_before_the_task_fails(
    tmp_path: Path, stack: contextlib.AsyncExitStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A bug of the bot's (here: in choosing the next batch, after the first write) fails
    # the task, and the worker then deletes its workspace: the work must be on the branch.
    import bot.agent.execution as agent_loop

    bare = bare_remote(tmp_path / "origin", FILES)
    harness = await make_harness(tmp_path, stack, files=FILES, clone_url=f"file://{bare}")
    first = docs.action("task_1", "write_file", arguments={"path": "notes.txt", "content": "a\n"})
    second = docs.action("task_2", "read_file", arguments={"path": "notes.txt"},
                         dependencies=["task_1"])  # fmt: skip
    llm = ScriptedLLM([docs.plan([first, second], dependencies={"task_2": ["task_1"]})])
    real_next_batch = agent_loop.next_batch
    batches = []

    def next_batch(*args: object, **kwargs: object) -> object:
        batches.append(1)
        if len(batches) > 1:
            raise RuntimeError("a bug of the bot's")
        return real_next_batch(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(agent_loop, "next_batch", next_batch)

    with pytest.raises(RuntimeError, match="a bug of the bot's"):
        await harness.run(llm)

    branch = harness.built.branch
    assert git("show", f"{branch}:notes.txt", cwd=bare) == "a"
    [change] = harness.forge.repo(harness.repo).change_requests
    title, _body = harness.forge.repo(harness.repo).change_request_bodies[change.number]
    assert change.draft and title.startswith("[unfinished] ")


async def test_a_run_killed_between_the_push_and_the_change_request_opens_it_next_time(
    tmp_path: Path, stack: contextlib.AsyncExitStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The unfinished work is pushed, then the run dies before its change request is opened
    # (a kill: here the opening is cancelled). The run that takes the task up again finds
    # nothing new to push, and must still open the change request for what is on the branch.
    from bot.agent.delivery import Delivery

    harness, bare, plan, reflection = await unfinished_task(tmp_path, stack)
    real_open = Delivery._open
    opened: list[str] = []

    async def killed_open(self: Delivery, *args: object, **kwargs: object) -> object:
        opened.append("tried")
        raise asyncio.CancelledError  # the process is gone before the request is made

    monkeypatch.setattr(Delivery, "_open", killed_open)
    with pytest.raises(asyncio.CancelledError):
        await harness.run(ScriptedLLM([plan, reflection]))
    branch = harness.built.branch
    assert git("show", f"{branch}:notes.txt", cwd=bare) == "a" and opened == ["tried"]
    assert harness.forge.repo(harness.repo).change_requests == []

    monkeypatch.setattr(Delivery, "_open", real_open)
    outcome = await harness.run(ScriptedLLM([reflection, reflection]))

    assert outcome.state is TaskState.NEEDS_HUMAN, outcome
    [change] = harness.forge.repo(harness.repo).change_requests
    assert change.draft and change.head_branch == branch
    [event] = harness.of(ProgressKind.HUMAN_INTERVENTION)
    assert event["summary"]["recommendations"][0] == (
        f"Review the unfinished work pushed to {change.web_url}"
    )
