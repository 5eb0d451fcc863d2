"""`bot action` end to end: the environment a GitHub Actions runner sets (event name and
file, repository, API and server URLs, run id, token, step-summary and output files),
the one FakeForge at the forge seam with a real git remote, the scripted model, the real
store, sandbox and git, and the kept state carried between runs in a folder."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sqlite3
import tarfile
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from bot.action.connect import Connection
from bot.action.environment import RunnerEnv
from bot.action.run import run_action
from bot.action.state import FolderCarrier, artifact_name
from bot.config import Settings
from bot.events import ForgeKind
from bot.llm.base import LLM
from bot.storage.base import Store
from tests.agent import docs
from tests.e2e.support import (
    GH_BRANCH,
    GH_REPO,
    ORIGIN_FILES,
    OWNER,
    SteeredLLM,
    bodies,
    gh_comment,
    gh_labeled,
    of_kind,
    status_comment,
)
from tests.e2e.test_approval import NOTES, write_plan
from tests.e2e.test_success import NEW_README, readme_script
from tests.fakes import FakeForge, FakeIssue
from tests.harness import fixture
from tests.tools.conftest import Remote

pytestmark = pytest.mark.sandbox  # the sandbox is probed and the gate runs `make lint` in it

WORKFLOW_LOGIN = "github-actions[bot]"
TOKEN = "ghs_" + "W" * 36
MODEL_KEY = "sk-test-" + "K" * 24


class Runner:
    """One repository on the fake GitHub and the runs of its workflow: each run gets a
    fresh RUNNER_TEMP, summary and output file, as on a real runner; the kept state
    lives in one folder between them."""

    def __init__(self, tmp_path: Path, remote: Remote) -> None:
        self.tmp = tmp_path
        self.github = FakeForge(ForgeKind.GITHUB, bot_login=WORKFLOW_LOGIN)
        self.repo = self.github.add_repo(
            GH_REPO, dict(ORIGIN_FILES), clone_url=remote.url, writers=(OWNER,)
        )
        self.carrier = FolderCarrier(tmp_path / "kept")
        self.runs = 0
        self.llms: list[SteeredLLM] = []
        self.connected = 0

    def issue(self, **fields: Any) -> FakeIssue:
        values = {"title": "Spelling error in the README file", "author": OWNER, **fields}
        self.github.add_issue(self.repo, 1, **values)
        return self.github.issue(self.repo, 1)

    def environ(self, event: str, payload: dict[str, Any], **extra: str) -> dict[str, str]:
        self.runs += 1
        run = self.tmp / f"run-{self.runs}"
        (run / "temp").mkdir(parents=True)
        (run / "event.json").write_text(json.dumps(payload), encoding="utf-8")
        env = {
            "GITHUB_EVENT_NAME": event,
            "GITHUB_EVENT_PATH": str(run / "event.json"),
            "GITHUB_REPOSITORY": GH_REPO,
            "GITHUB_API_URL": "https://api.github.com",
            "GITHUB_SERVER_URL": "https://github.com",
            "GITHUB_RUN_ID": str(7000 + self.runs),
            "GITHUB_RUN_ATTEMPT": "1",
            "RUNNER_TEMP": str(run / "temp"),
            "GITHUB_STEP_SUMMARY": str(run / "summary.md"),
            "GITHUB_OUTPUT": str(run / "output.txt"),
            "GITHUB_TOKEN": TOKEN,
            "LLM_PROVIDER": "openai",
            "LLM_BASE_URL": "https://api.openai.com/v1",
            "LLM_MODEL": "gpt-4o-mini",
            "LLM_API_KEY": MODEL_KEY,
        }
        env.update(extra)
        return {k: v for k, v in env.items() if v}

    @contextlib.asynccontextmanager
    async def connect(self, settings: Settings, runner: RunnerEnv) -> AsyncIterator[Connection]:
        self.connected += 1
        yield Connection(forge=self.github, carrier=self.carrier)

    async def run(
        self,
        event: str,
        payload: dict[str, Any],
        script: Sequence[object] = (),
        *,
        llm: SteeredLLM | None = None,
        **extra: str,
    ) -> int:
        llm = llm or SteeredLLM(script)
        self.llms.append(llm)

        def make_llm(settings: Settings, store: Store) -> LLM:
            return llm

        return await run_action(
            self.environ(event, payload, **extra), connect=self.connect, make_llm=make_llm
        )

    def summary(self) -> str:
        return (self.tmp / f"run-{self.runs}" / "summary.md").read_text(encoding="utf-8")

    def outputs(self) -> dict[str, str]:
        return read_outputs(self.tmp / f"run-{self.runs}" / "output.txt")

    def kept_tasks(self) -> list[tuple[str, str]]:
        """(id, state) of the tasks in the kept state's store."""
        kept = self.tmp / "kept" / artifact_name(1)
        scratch = self.tmp / f"kept-db-{self.runs}"
        scratch.mkdir()
        with tarfile.open(kept / "state.tar.gz") as tar:
            tar.extractall(scratch, members=[tar.getmember("bot.sqlite3")], filter="data")
        with contextlib.closing(sqlite3.connect(scratch / "bot.sqlite3")) as db:
            return [(str(i), str(s)) for i, s in db.execute("SELECT id, state FROM tasks")]


def read_outputs(path: Path) -> dict[str, str]:
    """The runner's output file as it reads it: ``name<<DELIMITER``, lines, ``DELIMITER``."""
    values: dict[str, str] = {}
    lines = iter(path.read_text(encoding="utf-8").splitlines())
    for line in lines:
        name, _, delimiter = line.partition("<<")
        body = []
        for item in lines:
            if item == delimiter:
                break
            body.append(item)
        values[name] = "\n".join(body)
    return values


@pytest.fixture
def runner(tmp_path: Path, remote: Remote) -> Runner:
    return Runner(tmp_path, remote)


async def test_a_labelled_issue_becomes_a_branch_and_a_pull_request(
    runner: Runner, remote: Remote
) -> None:
    issue = runner.issue(labels=("bug", "coding agent"))

    code = await runner.run("issues", gh_labeled(), readme_script())

    assert code == 0
    assert remote.show(GH_BRANCH, "README.md").decode() == NEW_README
    [change] = runner.github.repos[GH_REPO].change_requests
    assert (change.head_branch, change.draft) == (GH_BRANCH, True)
    assert issue.labels == ["bug", "coding agent done"]
    assert issue.reactions == [(None, "eyes")]
    status = status_comment(issue)
    assert status.startswith("### Coding agent — ✅ Done\n")
    assert "**Quality gate:** ✅ passed" in status
    assert all(c.author == WORKFLOW_LOGIN for c in issue.comments)
    outputs = runner.outputs()
    assert outputs["conclusion"] == "done"
    assert outputs["branch"] == GH_BRANCH
    assert outputs["change_request_url"] == change.web_url
    assert int(outputs["tokens"]) > 0 and float(outputs["cost"]) > 0  # gpt-4o-mini is priced
    assert outputs["state_artifact"] == artifact_name(1)
    summary = runner.summary()
    assert summary.startswith("## Coding agent: done\n")
    assert "- [x] ✅ Read README.md\n- [x] ✅ Add an Installation section" in summary
    assert "**Quality gate:** ✅ passed\n- lint `make lint`: passed" in summary
    assert f"tokens {int(outputs['tokens']):,} · cost $" in summary
    assert "Run: https://github.com/Codertocat/Hello-World/actions/runs/7001" in summary
    # the kept state: the run directory for people, no credential anywhere in it
    kept = runner.tmp / "kept" / artifact_name(1)
    [(task_id, state)] = runner.kept_tasks()
    assert state == "done"
    assert (kept / "runs" / task_id / "report.md").is_file()
    for path in kept.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert TOKEN.encode() not in data and MODEL_KEY.encode() not in data, path


async def test_a_non_writers_command_gets_one_reply_and_no_task(runner: Runner) -> None:
    issue = runner.issue()

    code = await runner.run("issue_comment", gh_comment("/agent run", sender="mallory"))

    assert code == 0
    [reply] = bodies(issue)
    assert "Sorry, only people with write, maintain or admin access" in reply
    assert ("get_permission", (GH_REPO, "mallory")) in runner.github.calls
    assert not (runner.tmp / "kept").exists()  # nothing kept: the run read and wrote no state
    assert runner.llms[0].calls == 0
    outputs = runner.outputs()
    assert outputs["conclusion"] == "skipped" and "state_dir" not in outputs
    assert "No task ran" in runner.summary()
    assert "mallory has no write access here" in runner.summary()


def _kept_bytes(runner: Runner) -> dict[str, bytes]:
    kept = runner.tmp / "kept"
    return {str(p.relative_to(kept)): p.read_bytes() for p in kept.rglob("*") if p.is_file()}


async def test_a_non_writer_cannot_touch_a_maintainers_waiting_task(
    runner: Runner, remote: Remote
) -> None:
    """Runs started by people without write access sit in concurrency groups of their own
    (docs/github-action.md) and so never replace a maintainer's queued run; the run itself
    neither reads nor writes the issue's kept state, so it cannot race or overwrite it."""
    issue = runner.issue()
    assert await runner.run("issue_comment", gh_comment("/agent plan"), [write_plan()]) == 0
    [(task_id, state)] = runner.kept_tasks()
    assert state == "awaiting_approval"
    before = _kept_bytes(runner)

    for text in ("/agent stop", "/agent approve", "please also delete the tests"):
        code = await runner.run("issue_comment", gh_comment(text, sender="mallory"))
        assert code == 0
        assert runner.outputs()["conclusion"] == "skipped"
        assert _kept_bytes(runner) == before
    assert all(llm.calls == 0 for llm in runner.llms[1:])

    code = await runner.run("issue_comment", gh_comment("/agent approve"),
                            [docs.completion(done=1)])  # fmt: skip
    assert code == 0
    assert runner.kept_tasks() == [(task_id, "done")]
    assert remote.show(GH_BRANCH, "NOTES.md").decode() == NOTES
    assert not any("delete the tests" in m.content for r in runner.llms[-1].requests
                   for m in r.messages)  # fmt: skip
    assert issue.labels == ["coding agent done"]


async def test_an_ignored_event_connects_to_nothing(runner: Runner) -> None:
    runner.issue()
    payload = gh_comment("thanks!", sender="dependabot[bot]")
    payload["sender"]["type"] = "Bot"

    assert await runner.run("issue_comment", payload) == 0

    assert runner.connected == 0 and runner.github.calls == []
    assert runner.outputs() == {"conclusion": "skipped", "branch": "", "change_request_url": "",
                                "tokens": "0", "cost": "0"}  # fmt: skip
    assert "Nothing to do: sent by a bot (dependabot[bot])." in runner.summary()


async def test_a_plan_approval_waits_and_the_next_run_resumes_from_the_checkpoint(
    runner: Runner, remote: Remote
) -> None:
    issue = runner.issue()

    first = await runner.run("issue_comment", gh_comment("/agent plan"), [write_plan()])

    assert first == 0
    assert runner.outputs()["conclusion"] == "waiting"
    assert "✋ Waiting for your approval" in runner.summary()
    [(task_id, state)] = runner.kept_tasks()
    assert state == "awaiting_approval"
    assert issue.labels == ["coding agent waiting"]
    assert not remote.has_branch(GH_BRANCH)

    # a new job on a new runner: only the kept state connects the two runs
    second = await runner.run(
        "issue_comment", gh_comment("/agent approve"), [docs.completion(done=1)]
    )

    assert second == 0
    assert runner.outputs()["conclusion"] == "done"
    assert runner.kept_tasks() == [(task_id, "done")]
    # the plan was not made again: the second run's model was asked once, for completion
    [request] = runner.llms[1].requests
    assert "goal_understanding" not in request.messages[0].content
    assert len(of_kind(issue, "approval_request")) == 1
    assert remote.show(GH_BRANCH, "NOTES.md").decode() == NOTES
    assert issue.labels == ["coding agent done"]
    assert "Resumed from the state kept in folder" in runner.summary()


async def test_a_missing_model_key_is_said_in_the_summary_and_the_issue(runner: Runner) -> None:
    issue = runner.issue(labels=("coding agent",))

    code = await runner.run("issues", gh_labeled(), readme_script(), LLM_API_KEY="")

    assert code != 0
    assert runner.llms[0].calls == 0
    said = "The model's API key is not set (llm.provider openai)"
    [comment] = of_kind(issue, "action-error")
    assert comment.startswith("### ⚠️ The coding agent cannot run in this workflow\n" + said)
    assert "the request stays queued" in comment
    assert runner.outputs()["conclusion"] == "failed"
    assert said in runner.summary()
    # nothing is lost: the request waits in the kept state for a run with the key
    [(_, state)] = runner.kept_tasks()
    assert state == "queued"


async def test_a_sandbox_that_cannot_start_stops_the_run(
    runner: Runner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    issue = runner.issue(labels=("coding agent",))
    fake_bin = tmp_path / "no-userns"
    fake_bin.mkdir()
    bwrap = fake_bin / "bwrap"
    bwrap.write_text("#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n")
    bwrap.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake_bin}:{Path('/usr/bin')}:{Path('/bin')}")

    code = await runner.run("issues", gh_labeled(), readme_script())

    assert code != 0
    assert runner.llms[0].calls == 0
    [comment] = of_kind(issue, "action-error")
    assert "The sandbox cannot start on this runner, so no command is run" in comment
    assert "setting up uid map: Permission denied" in runner.summary()


async def test_a_hand_started_run_takes_the_issue_and_the_instructions(
    runner: Runner, remote: Remote
) -> None:
    issue = runner.issue()
    payload = fixture("github", "workflow_dispatch.json")
    payload["repository"]["full_name"] = GH_REPO
    payload["sender"]["login"] = OWNER
    payload["inputs"] = {"issue": "1", "instructions": "Add an Installation section"}

    code = await runner.run("workflow_dispatch", payload, readme_script())

    assert code == 0 and runner.outputs()["conclusion"] == "done"
    assert remote.show(GH_BRANCH, "README.md").decode() == NEW_README
    assert "Add an Installation section" in runner.llms[0].requests[0].messages[-1].content
    assert issue.labels == ["coding agent done"]


async def test_a_cancelled_run_keeps_its_work_and_the_next_run_goes_on(
    runner: Runner, remote: Remote
) -> None:
    """GitHub cancels a job with SIGTERM: the run keeps its state (the task mid-way, its
    workspace with the first file written); the issue's next run resumes the task from its
    checkpoint and delivers both files."""
    runner.issue(labels=("coding agent",))
    first = docs.action(
        "task_1", "write_file", arguments={"path": "a.txt", "content": "A\n"}, purpose="Write a"
    )
    second = docs.action("task_2", "write_file", purpose="Write b", dependencies=["task_1"])
    plan = docs.plan([first, second], dependencies={"task_2": ["task_1"]})

    async def cancel_the_job() -> None:
        os.kill(os.getpid(), signal.SIGTERM)
        await asyncio.sleep(5)  # cancelled before this ends

    llm = SteeredLLM([plan], before={2: cancel_the_job})  # the 2nd call: task_2's arguments
    code = await runner.run("issues", gh_labeled(), llm=llm)

    assert code == 1 and runner.outputs()["conclusion"] == "failed"
    assert "The run was cancelled; its state is kept." in runner.summary()
    [(task_id, state)] = runner.kept_tasks()
    assert state == "running"

    write_b = docs.execution("task_2", "write_file", {"path": "b.txt", "content": "B\n"})
    code = await runner.run("issue_comment", gh_comment("/agent status"),
                            [write_b, docs.completion(done=2)])  # fmt: skip

    assert code == 0 and runner.outputs()["conclusion"] == "done"
    assert runner.kept_tasks() == [(task_id, "done")]
    assert remote.show(GH_BRANCH, "a.txt") == b"A\n" and remote.show(GH_BRANCH, "b.txt") == b"B\n"
    assert len(runner.llms[1].requests) == 2  # no new plan: task_2's call and the completion
