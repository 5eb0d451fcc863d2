"""Set-up before work, end to end: a real Python package whose dependency comes from the
package index, cloned from a real git remote by the worker, set up in the sandbox, the
agent's command using what set-up installed; a second task on the same repository skips
the installs; a failing set-up asks a person with the command and its output's tail."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from bot.config.planning import ExecutionSettings
from bot.storage.base import TaskState
from tests.agent import docs
from tests.e2e.support import GH_REPO, OWNER, gh_labeled, of_kind, settle
from tests.harness import Harness
from tests.tools.conftest import make_remote
from tests.tools.test_setup import PACKAGE, needs_index

pytestmark = [
    pytest.mark.sandbox,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap missing"),
]
PYTEST = ["pytest", "-q", "-p", "no:cacheprovider"]


def run_tests_script() -> list[object]:
    """A plan of one command: the project's tests, with what set-up installed."""
    plan = docs.plan(
        [docs.action("task_1", "run_command", arguments={"argv": PYTEST}, expected="1 passed")],
        objective="Run the project's tests",
    )
    return [plan, docs.completion(done=1)]


def repository(bot: Harness, tmp_path: Path, files: dict[str, bytes]) -> None:
    remote = make_remote(tmp_path / "origin", files)
    ref = bot.github.add_repo(GH_REPO, dict(files), clone_url=remote.url, writers=(OWNER,))
    for number in (1, 2):
        bot.github.add_issue(
            ref, number, title=f"Check the tests {number}", author=OWNER, labels=("coding agent",)
        )


async def run_issue(bot: Harness, number: int) -> tuple[TaskState, dict[str, Any]]:
    """Label issue ``number``; run its task; its end state and its checkpoint."""
    payload = gh_labeled(number=number, title=f"Check the tests {number}")
    assert (await bot.send_github("issues", payload)).status_code == 202
    await settle(bot)
    task = next(t for t in await bot.tasks() if t.request.issue.number == number)
    checkpoint = await bot.store.load_checkpoint(task.id)
    assert checkpoint is not None
    return task.state, checkpoint


def history(bot: Harness, checkpoint_task: str) -> list[dict[str, Any]]:
    path = bot.settings.data_dir / "planning_history" / f"{checkpoint_task}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


@needs_index
async def test_set_up_installs_from_the_index_and_the_second_task_skips_the_installs(
    tmp_path: Path,
) -> None:
    async with Harness(tmp_path, script=run_tests_script() + run_tests_script()) as bot:
        repository(bot, tmp_path, PACKAGE)
        state, first = await run_issue(bot, 1)
        assert state is TaskState.DONE, first.get("outcome")
        setup = first["setup"]
        assert setup["status"] == "ran" and setup["source"] == "detected"
        commands = [step["command"] for step in setup["steps"]]
        assert commands[0] == "python3 -m venv .venv"
        assert (
            commands[1].startswith(".venv/bin/python -m pip install")
            and "'.[test]'" in (commands[1])
        )
        [record] = first["records"].values()
        assert record["status"] == "done" and "1 passed" in record["output"]
        [task_1] = [t for t in await bot.tasks() if t.request.issue.number == 1]
        run_dir = bot.settings.data_dir / "runs" / task_1.id
        assert "iniconfig" in (run_dir / "setup" / "02-python.log").read_text()
        assert "- set-up ran: 2 commands in" in (run_dir / "report.md").read_text()
        assert [e["status"] for e in history(bot, task_1.id) if e["type"] == "setup"] == ["ran"]
        # the virtualenv is not part of the agent's work
        assert ".venv" not in json.dumps(first.get("delivery", {}))

        state, second = await run_issue(bot, 2)
        assert state is TaskState.DONE, second.get("outcome")
        assert second["setup"]["status"] == "restored"
        assert second["setup"]["steps"] == []  # no install ran
        assert second["setup"]["duration"] < setup["duration"] / 2
        [task_2] = [t for t in await bot.tasks() if t.request.issue.number == 2]
        assert not (bot.settings.data_dir / "runs" / task_2.id / "setup").exists()
        [record] = second["records"].values()
        assert record["status"] == "done" and "1 passed" in record["output"]
        report = (bot.settings.data_dir / "runs" / task_2.id / "report.md").read_text()
        assert "- set-up restored: 0 commands in" in report and "the cache: .venv" in report


async def test_a_failing_set_up_asks_a_person_with_the_command_and_its_output(
    tmp_path: Path,
) -> None:
    agent_yaml = (
        b"setup:\n"
        b"  - [sh, -c, 'echo resolving dependencies; "
        b'echo "ERROR: No matching distribution found for nosuchpkg" >&2; exit 1\']\n'
    )
    files = {"README.md": b"# Demo\n", ".agent.yaml": agent_yaml}
    async with Harness(tmp_path, script=run_tests_script()) as bot:
        repository(bot, tmp_path, files)
        state, checkpoint = await run_issue(bot, 1)
        assert state is TaskState.NEEDS_HUMAN
        assert checkpoint["records"] == {}  # the agent never started
        issue = bot.github.issue(bot.github.repos[GH_REPO].ref, 1)
        [help_request] = of_kind(issue, "human_intervention")
        assert "exit code 1" in help_request
        assert "ERROR: No matching distribution found for nosuchpkg" in help_request
        assert "resolving dependencies" in help_request
        assert "sh -c" in help_request
        assert "coding agent help needed" in issue.labels
        assert "coding agent done" not in issue.labels
        # one model call: the plan; nobody asked the model to explain a failed install
        assert len(bot.llm.requests) == 1


async def test_a_command_past_the_action_timeout_but_within_the_sandbox_timeout_completes(
    tmp_path: Path,
) -> None:
    """planning.execution.action_timeout is 1 s here; the command takes 3 s."""
    slow = ["python3", "-c", "import time; print('begun', flush=True); time.sleep(3); print('end')"]
    plan = docs.plan(
        [docs.action("task_1", "run_command", arguments={"argv": slow}, expected="end")],
        objective="Run a slow command",
    )
    files = {"README.md": b"# Demo\n", ".agent.yaml": b"setup: []\n"}
    overrides = {
        "planning": {"execution": ExecutionSettings(action_timeout=1)},
        "sandbox": {"timeout": 30},
    }
    async with Harness(
        tmp_path, script=[plan, docs.completion(done=1)], overrides=overrides
    ) as bot:
        repository(bot, tmp_path, files)
        state, checkpoint = await run_issue(bot, 1)
        [record] = checkpoint["records"].values()
        assert record["status"] == "done", record["output"]
        assert "begun" in record["output"] and "end" in record["output"]
        assert record["duration"] >= 3
        assert checkpoint["setup"]["status"] == "nothing"  # setup: [] turned it off
        assert state is TaskState.DONE
