"""Delivery through a real clone: quality gate, fixes fed back, push, change request, report."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from pathlib import Path

import pytest
from pydantic import SecretStr

from bot.llm.scripted import ScriptedLLM
from bot.record.history import format_timeline, history_path
from bot.run_events import ProgressKind
from bot.storage.base import TaskState
from bot.storage.runs import RunDirectory
from tests.agent import docs
from tests.agent.conftest import make_harness, planning_settings

pytestmark = pytest.mark.sandbox

GIT_ENV = {
    "GIT_AUTHOR_NAME": "Test",
    "GIT_AUTHOR_EMAIL": "test@example.invalid",
    "GIT_COMMITTER_NAME": "Test",
    "GIT_COMMITTER_EMAIL": "test@example.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
}
MAKEFILE = "lint:\n\tgrep -q DONE notes.txt\n"
# The model says a fix round's changes are in.
READY = docs.execution("quality_gate", "run_quality_gate", {})


def git(*args: str, cwd: Path) -> str:
    done = subprocess.run(
        ["git", *args],
        cwd=cwd,
        env={**os.environ, **GIT_ENV},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def bare_remote(base: Path, files: dict[str, str]) -> Path:
    seed = base / "seed"
    seed.mkdir(parents=True)
    git("init", "--quiet", "--initial-branch=main", cwd=seed)
    for rel, text in files.items():
        (seed / rel).write_text(text)
    git("add", "--all", cwd=seed)
    git("commit", "--quiet", "-m", "initial", cwd=seed)
    bare = base / "remote.git"
    git("clone", "--quiet", "--bare", str(seed), str(bare), cwd=base)
    return bare


async def test_workspace_changes_pass_the_quality_gate_after_a_fix_and_are_delivered(
    tmp_path: Path, stack: contextlib.AsyncExitStack
) -> None:
    files = {"README.md": "# Widgets\n", "Makefile": MAKEFILE}
    bare = bare_remote(tmp_path / "origin", files)
    harness = await make_harness(
        tmp_path, stack, files=files, clone_url=f"file://{bare}", title="Write the notes"
    )
    write = docs.action(
        "task_1", "write_file", arguments={"path": "notes.txt", "content": "TODO\n"}
    )
    fix = docs.execution("quality_gate", "write_file", {"path": "notes.txt", "content": "DONE\n"})
    llm = ScriptedLLM([docs.plan([write]), fix, READY, docs.completion(done=2)])

    outcome = await harness.run(llm)

    assert outcome.state is TaskState.DONE, outcome
    fix_prompt = llm.requests[1].messages[-1].content
    assert "Lint failed" in fix_prompt and "make lint" in fix_prompt
    assert "replace_in_file" in fix_prompt and "write_file" in fix_prompt
    branch = harness.built.branch
    assert git("show", f"{branch}:notes.txt", cwd=bare) == "DONE"
    assert git("show", "main:README.md", cwd=bare) == "# Widgets"
    [links] = harness.of(ProgressKind.LINKS)
    assert links["branch"] == branch and links["gate"]["result"] == "passed"
    assert "report_path" not in links
    [change] = harness.forge.repo(harness.repo).change_requests
    _title, body = harness.forge.repo(harness.repo).change_request_bodies[change.number]
    assert "**Quality gate:** passed" in body
    assert "- lint `make lint`: passed" in body and "- test: not configured" in body
    run_dir = RunDirectory(harness.settings.data_dir, harness.task.id).path
    quality = json.loads((run_dir / "quality.json").read_text())
    assert quality["passed"] is True and quality["lint"]["command"] == ["make", "lint"]
    report = (run_dir / "report.md").read_text()
    assert "**Outcome:** goal achieved" in report and "`notes.txt`" in report
    assert (run_dir / "artifacts" / "notes.txt").read_text() == "DONE\n"
    timeline = format_timeline(history_path(harness.settings.data_dir, harness.task.id))
    assert "quality gate run 1: failed" in timeline and "quality gate run 2: passed" in timeline


async def test_quality_gate_that_keeps_failing_gets_three_fix_rounds_then_a_person(
    tmp_path: Path, stack: contextlib.AsyncExitStack
) -> None:
    files = {"README.md": "# Widgets\n", "Makefile": MAKEFILE}
    bare = bare_remote(tmp_path / "origin", files)
    planning = planning_settings(revision={"max_revisions": 0})
    harness = await make_harness(
        tmp_path, stack, files=files, clone_url=f"file://{bare}", planning=planning
    )
    write = docs.action(
        "task_1", "write_file", arguments={"path": "notes.txt", "content": "TODO\n"}
    )
    still = docs.execution("quality_gate", "write_file", {"path": "notes.txt", "content": "NOPE\n"})
    other = docs.execution("quality_gate", "write_file", {"path": "more.txt", "content": "x\n"})
    rounds = [still, other, READY, still, READY, still, READY]
    llm = ScriptedLLM([docs.plan([write]), *rounds, docs.completion(achieved=True, done=3)])

    outcome = await harness.run(llm)

    # the model called it a success; a failing gate says otherwise
    assert outcome.state is TaskState.NEEDS_HUMAN and outcome.summary["goal_achieved"] is False
    assert "the quality gate failed: Lint failed" in outcome.reason
    assert [r.phase for r in llm.requests].count("execution") == 7  # three rounds, four runs
    assert git("show", f"{harness.built.branch}:more.txt", cwd=bare) == "x"  # two files, one round
    timeline = format_timeline(history_path(harness.settings.data_dir, harness.task.id))
    assert "quality gate run 4: failed" in timeline and "quality gate run 5" not in timeline
    run_dir = harness.settings.data_dir / "runs" / harness.task.id
    gate_errors = [
        line
        for line in (run_dir / "errors.log").read_text().splitlines()
        if "[quality_gate]" in line
    ]
    assert [line.split("] ", 1)[1][:24] for line in gate_errors] == [
        f"run {n}: Lint failed: `mak" for n in (1, 2, 3, 4)
    ]
    [change] = harness.forge.repo(harness.repo).change_requests
    _title, body = harness.forge.repo(harness.repo).change_request_bodies[change.number]
    assert "**Quality gate:** failed" in body and "Lint failed" in body
    assert "- lint `make lint`: failed" in body and "- test: skipped" in body
    assert not any(e.kind is ProgressKind.COMPLETION for e in harness.events)


async def test_the_change_request_body_is_redacted(
    tmp_path: Path, stack: contextlib.AsyncExitStack
) -> None:
    secret = "sk-live-" + "q" * 32
    files = {"README.md": "# Widgets\n"}
    bare = bare_remote(tmp_path / "origin", files)
    harness = await make_harness(
        tmp_path,
        stack,
        files=files,
        clone_url=f"file://{bare}",
        llm_settings={"api_key": SecretStr(secret)},
    )
    write = docs.action("task_1", "write_file", arguments={"path": "a.txt", "content": "x\n"})
    plan = docs.plan([write], objective=f"Use the key {secret} in the docs")
    llm = ScriptedLLM([plan, docs.completion(done=1)])

    outcome = await harness.run(llm)

    assert outcome.state is TaskState.DONE, outcome
    [change] = harness.forge.repo(harness.repo).change_requests
    _title, body = harness.forge.repo(harness.repo).change_request_bodies[change.number]
    assert "**Goal:** Use the key" in body
    assert secret not in body


async def test_a_claim_the_record_contradicts_is_reflected_on_and_revised_until_done(
    tmp_path: Path, stack: contextlib.AsyncExitStack
) -> None:
    files = {"README.md": "# Widgets\n", "Makefile": MAKEFILE}
    bare = bare_remote(tmp_path / "origin", files)
    harness = await make_harness(tmp_path, stack, files=files, clone_url=f"file://{bare}")
    write = docs.action(
        "task_1", "write_file", arguments={"path": "notes.txt", "content": "TODO\n"}
    )
    fixed = docs.action(
        "task_2", "write_file", arguments={"path": "notes.txt", "content": "DONE\n"}
    )
    llm = ScriptedLLM(
        [
            docs.plan([write]),
            *[READY] * 3,  # three fix rounds that change nothing: the gate still fails
            docs.completion(achieved=True, done=1),  # ... and the model claims success
            docs.revision([fixed], reason="make lint pass"),
            docs.completion(achieved=True, done=2),
        ]
    )

    outcome = await harness.run(llm)

    assert outcome.state is TaskState.DONE, outcome
    [reflection] = harness.of(ProgressKind.REFLECTION)
    assert reflection["action"] == "completion" and reflection["status"] == "failure"
    assert "the quality gate failed: Lint failed" in reflection["issues"][0]
    revision_prompt = llm.requests[5].messages[-1].content
    assert "the model reported the goal achieved, but the record does not show" in (revision_prompt)
    [revision] = harness.of(ProgressKind.REVISION)
    assert revision["number"] == 1
    assert git("show", f"{harness.built.branch}:notes.txt", cwd=bare) == "DONE"
    [change] = harness.forge.repo(harness.repo).change_requests  # the same one, kept
    _title, body = harness.forge.repo(harness.repo).change_request_bodies[change.number]
    assert "**Quality gate:** passed" in body and "Lint failed" not in body  # refreshed
    first, second = harness.of(ProgressKind.LINKS)
    assert first["gate"]["result"] == "failed" and second["gate"]["result"] == "passed"
    assert second["change_request_url"] == first["change_request_url"]
    [done] = harness.of(ProgressKind.COMPLETION)
    assert done["summary"]["goal_achieved"] is True
    assert done["summary"]["criteria"][0].startswith("? README.md has an Installation section")
    timeline = format_timeline(history_path(harness.settings.data_dir, harness.task.id))
    assert "evidence: the record disagrees: the quality gate failed" in timeline
    assert "reflection on completion: failure (revision needed)" in timeline
    assert timeline.rstrip().count("evidence: agrees") == 1


async def test_a_fix_call_that_needs_approval_ends_its_round(
    tmp_path: Path, stack: contextlib.AsyncExitStack
) -> None:
    files = {"README.md": "# Widgets\n", "Makefile": MAKEFILE}
    bare = bare_remote(tmp_path / "origin", files)
    planning = planning_settings(
        security={"require_approval": ["replace_in_file"]}, revision={"max_revisions": 0}
    )
    harness = await make_harness(
        tmp_path, stack, files=files, clone_url=f"file://{bare}", planning=planning
    )
    write = docs.action(
        "task_1", "write_file", arguments={"path": "notes.txt", "content": "TODO\n"}
    )
    guarded = docs.execution(
        "quality_gate",
        "replace_in_file",
        {"path": "notes.txt", "old_text": "TODO", "new_text": "DONE"},
    )
    llm = ScriptedLLM([docs.plan([write]), guarded, guarded, guarded, docs.completion()])

    outcome = await harness.run(llm)

    assert outcome.state is TaskState.NEEDS_HUMAN
    assert [r.phase for r in llm.requests].count("execution") == 3  # one call a round
    timeline = format_timeline(history_path(harness.settings.data_dir, harness.task.id))
    assert "quality gate run 4: failed" in timeline
