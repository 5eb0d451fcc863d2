"""Verified work on real repositories: small Python and Node packages with a dependency from
their package registry and a real test suite, cloned by the worker from a real git remote,
set up in the sandbox, fixed by the scripted model, and judged by their own tests.

A correct fix passes the project's tests and ends done with the gate's figures in the pull
request; a wrong fix fails them through the fix rounds and ends help needed with the work
pushed to the bot's branch and the run report in the issue."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from bot.config.planning import RevisionSettings
from bot.events import TaskMode
from bot.storage.base import TaskState
from tests.agent import docs
from tests.e2e.support import GH_REPO, OWNER, bodies, gh_labeled, of_kind, settle
from tests.harness import Harness, fixture
from tests.tools.conftest import Remote, make_remote
from tests.tools.test_setup import needs_index, needs_node

pytestmark = [
    pytest.mark.sandbox,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap missing"),
]

PYPROJECT = b"""[build-system]
requires = ["flit_core>=3.4,<4"]
build-backend = "flit_core.buildapi"

[project]
name = "calc"
version = "0.1.0"
description = "Adds numbers read from an ini text"
dependencies = ["iniconfig"]

[project.optional-dependencies]
test = ["pytest"]
"""
LIBRARY = '''"""Adds numbers; reads them from an ini text."""
import iniconfig


def add(a: int, b: int) -> int:
    return {body}


def total(text: str) -> int:
    values = iniconfig.IniConfig("numbers.ini", data=text)["numbers"]
    return add(int(values["a"]), int(values["b"]))
'''
TESTS = b"""from calc import add, total


def test_add() -> None:
    assert add(2, 1) == 3


def test_total_reads_the_ini() -> None:
    assert total("[numbers]\\na = 4\\nb = 5\\n") == 9
"""
PYTHON_PACKAGE = {
    "pyproject.toml": PYPROJECT,
    "calc/__init__.py": LIBRARY.format(body="a - b").encode(),
    "tests/test_calc.py": TESTS,
    "README.md": b"# calc\n",
}
TITLE = "add() subtracts"


def fix_script(body: str, *, rounds: int = 0) -> list[object]:
    """Plan: read the module, write it with ``add`` returning ``body``; then ``rounds``
    fix rounds that write the same and hand back to the gate; then the completion."""
    path = "calc/__init__.py"
    fixed = LIBRARY.format(body=body)
    plan = docs.plan(
        [
            docs.action("task_1", "read_file", arguments={"path": path}, expected="the module"),
            docs.action(
                "task_2",
                "write_file",
                arguments={"path": path, "content": fixed},
                purpose="Make add() add",
                dependencies=["task_1"],
            ),
        ],
        dependencies={"task_2": ["task_1"]},
        objective="add() returns the sum",
    )
    again = docs.execution("quality_gate", "write_file", {"path": path, "content": fixed})
    ready = docs.execution("quality_gate", "run_quality_gate", {})
    rounds_script: list[object] = [again, ready] if rounds else []
    rounds_script += [ready] * max(0, rounds - 1)
    return [plan, *rounds_script, docs.completion(achieved=True, done=2)]


def repository(bot: Harness, tmp_path: Path, files: dict[str, bytes]) -> Remote:
    remote = make_remote(tmp_path / "origin", files)
    ref = bot.github.add_repo(GH_REPO, dict(files), clone_url=remote.url, writers=(OWNER,))
    bot.github.add_issue(ref, 1, title=TITLE, author=OWNER, labels=("coding agent",))
    return remote


def bot_branches(remote: Remote) -> list[str]:
    """The branches the bot pushed to the remote (all but main)."""
    listed = subprocess.run(
        ["git", "for-each-ref", "--format=%(refname:short)", "refs/heads"],
        cwd=remote.bare, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return [name for name in listed.stdout.split() if name != "main"]


async def run_issue(bot: Harness) -> TaskState:
    assert (await bot.send_github("issues", gh_labeled(title=TITLE))).status_code == 202
    await settle(bot)
    [task] = await bot.tasks()
    return task.state


@needs_index
async def test_a_correct_fix_passes_the_projects_tests_and_ends_done_with_the_figures(
    tmp_path: Path,
) -> None:
    async with Harness(tmp_path, script=fix_script("a + b")) as bot:
        remote = repository(bot, tmp_path, PYTHON_PACKAGE)
        state = await run_issue(bot)

        [task] = await bot.tasks()
        checkpoint = await bot.store.load_checkpoint(task.id)
        assert checkpoint is not None
        assert state is TaskState.DONE, checkpoint.get("outcome")
        setup = checkpoint["setup"]
        assert setup["status"] == "ran"  # iniconfig and pytest came from the index
        quality = checkpoint["delivery"]["quality"]
        assert quality["result"] == "passed"
        assert quality["test"]["counts"].get("passed") == 2  # the project's own tests ran
        branch = checkpoint["delivery"]["branch"]
        assert "return a + b" in remote.show(branch, "calc/__init__.py").decode()
        [change] = bot.github.repos[GH_REPO].change_requests
        _title, body = bot.github.repos[GH_REPO].change_request_bodies[change.number]
        assert "**Quality gate:** passed" in body
        assert "- test `" in body and "passed" in body.split("- test `", 1)[1].split("\n")[0]
        issue = bot.github.issue(bot.github.repos[GH_REPO].ref, 1)
        assert "coding agent done" in issue.labels
        [done] = of_kind(issue, "completion")
        assert done.startswith("### ✅ Done")


@needs_index
async def test_a_wrong_fix_fails_the_projects_tests_through_the_fix_rounds_and_asks_for_help(
    tmp_path: Path,
) -> None:
    no_revisions = {"revision": RevisionSettings(max_revisions=0)}
    script = fix_script("a * b", rounds=3)
    async with Harness(tmp_path, script=script, overrides={"planning": no_revisions}) as bot:
        remote = repository(bot, tmp_path, PYTHON_PACKAGE)
        state = await run_issue(bot)

        assert state is TaskState.NEEDS_HUMAN
        [task] = await bot.tasks()
        checkpoint = await bot.store.load_checkpoint(task.id)
        assert checkpoint is not None
        history = bot.settings.data_dir / "planning_history" / f"{task.id}.jsonl"
        runs = [json.loads(line) for line in history.read_text().splitlines()]
        gate_runs = [e for e in runs if e["type"] == "quality"]
        assert [e["result"] for e in gate_runs] == ["failed"] * 4  # the first and three fixes
        assert "FAILED tests/test_calc.py::test_add - assert 2 == 3" in gate_runs[-1]["feedback"]
        # the work is pushed to the bot's branch, and the issue says what to check
        [branch] = bot_branches(remote)
        assert "return a * b" in remote.show(branch, "calc/__init__.py").decode()
        [change] = bot.github.repos[GH_REPO].change_requests
        assert checkpoint["delivery"]["change_request_url"] == change.web_url
        issue = bot.github.issue(bot.github.repos[GH_REPO].ref, 1)
        assert "coding agent help needed" in issue.labels
        assert "coding agent done" not in issue.labels
        [help_needed] = of_kind(issue, "human_intervention")
        assert "the quality gate failed" in help_needed
        assert f"Branch: `{branch}`" in help_needed
        assert "<details><summary>Run report</summary>" in help_needed
        assert str(bot.settings.data_dir) not in "\n".join(bodies(issue))


NODE_PACKAGE = {
    "package.json": json.dumps(
        {
            "name": "evens",
            "version": "1.0.0",
            "private": True,
            "dependencies": {"is-number": "7.0.0"},
            "scripts": {"test": "node --test"},
        },
        indent=2,
    ).encode(),
    "index.js": b"const isNumber = require('is-number');\n"
    b"module.exports.even = (n) => isNumber(n) && n % 2 === 1;\n",
    "test/even.test.js": b"const test = require('node:test');\n"
    b"const assert = require('node:assert');\n"
    b"const { even } = require('..');\n"
    b"test('even numbers', () => { assert.strictEqual(even(4), true); });\n"
    b"test('odd numbers', () => { assert.strictEqual(even(3), false); });\n"
    b"test('not numbers', () => { assert.strictEqual(even('x'), false); });\n",
}


@needs_node
async def test_a_node_package_is_set_up_from_the_registry_and_fixed_with_its_tests(
    tmp_path: Path,
) -> None:
    fixed = (
        "const isNumber = require('is-number');\n"
        "module.exports.even = (n) => isNumber(n) && n % 2 === 0;\n"
    )
    plan = docs.plan(
        [docs.action("task_1", "write_file", arguments={"path": "index.js", "content": fixed})],
        objective="even() is true for even numbers",
    )
    async with Harness(tmp_path, script=[plan, docs.completion(achieved=True, done=1)]) as bot:
        remote = repository(bot, tmp_path, NODE_PACKAGE)
        state = await run_issue(bot)

        [task] = await bot.tasks()
        checkpoint = await bot.store.load_checkpoint(task.id)
        assert checkpoint is not None
        assert state is TaskState.DONE, checkpoint.get("outcome")
        assert checkpoint["setup"]["status"] == "ran"
        assert [s["command"] for s in checkpoint["setup"]["steps"]] == [
            "npm install --no-audit --no-fund"
        ]
        quality = checkpoint["delivery"]["quality"]
        assert quality["result"] == "passed" and quality["test"]["counts"].get("passed") == 3
        assert remote.show(checkpoint["delivery"]["branch"], "index.js").decode() == fixed


# --- follow-ups on the bot's own branch: set-up from the base branch --------------------------

QUIET = {"review": {"quiet_seconds": 0}}  # a review round without waiting for more comments


@pytest.fixture
def pypi_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The server's only package index is the network's (as on most servers): no local
    mirror in the pip configuration that an offline command could still read."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for name in ("PIP_FIND_LINKS", "PIP_CONFIG_FILE", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL"):
        monkeypatch.delenv(name, raising=False)


def review_follow_up(bot: Harness, branch: str, body: str) -> dict[str, object]:
    """A line comment on the bot's pull request (its thread as GitHub holds it): a review
    round on its branch (``QUIET``: at once)."""
    [change] = bot.github.repos[GH_REPO].change_requests
    repo = bot.github.repos[GH_REPO].ref
    thread = bot.github.add_thread(repo, change.number, (OWNER, body), path="README.md", line=1)
    review = fixture("github", "pull_request_review_comment.created.json")
    review["pull_request"].update(number=change.number, html_url=change.web_url)
    review["pull_request"]["head"]["ref"] = branch
    review["pull_request"]["user"]["login"] = bot.settings.bot.github_login  # the bot's PR
    review["comment"].update(body=body, id=thread.comments[0].id)
    review["comment"]["user"]["login"] = review["sender"]["login"] = OWNER
    return review


def touch_readme(note: str) -> list[object]:
    """A follow-up's plan: one write to README.md (not what set-up depends on)."""
    write = {"path": "README.md", "content": f"# calc\n\n{note}\n"}
    plan = docs.plan([docs.action("task_1", "write_file", arguments=write)], objective=note)
    return [plan, docs.completion(achieved=True, done=1)]


async def follow_up_of(bot: Harness, branch: str, body: str) -> tuple[TaskState, dict[str, Any]]:
    review = review_follow_up(bot, branch, body)
    assert (await bot.send_github("pull_request_review_comment", review)).status_code == 202
    await settle(bot)
    [task] = [t for t in await bot.tasks() if t.request.mode is TaskMode.FOLLOW_UP]
    checkpoint = await bot.store.load_checkpoint(task.id)
    assert checkpoint is not None
    return task.state, checkpoint


@needs_index
@pytest.mark.usefixtures("pypi_only")
async def test_a_follow_up_sets_up_from_the_base_branch_when_the_cache_entry_was_pruned(
    tmp_path: Path,
) -> None:
    script = fix_script("a + b") + touch_readme("Adds numbers.")
    async with Harness(tmp_path, script=script, overrides=QUIET) as bot:
        remote = repository(bot, tmp_path, PYTHON_PACKAGE)
        assert await run_issue(bot) is TaskState.DONE
        [branch] = bot_branches(remote)
        shutil.rmtree(bot.settings.data_dir / "setup-cache")  # pruned by other environments

        state, checkpoint = await follow_up_of(bot, branch, "say what calc does")
        assert state is TaskState.DONE, checkpoint.get("outcome")
        setup = checkpoint["setup"]
        assert setup["status"] == "ran", setup
        assert [(s["network"], s["base"]) for s in setup["steps"]] == [(True, True)] * 2
        assert setup["base_commit"] == remote.rev("main") and setup["key"] == setup["base_key"]
        cached = bot.settings.data_dir / "setup-cache"
        assert list(cached.glob(f"*/{setup['base_key']}/manifest.json"))
        quality = checkpoint["delivery"]["quality"]  # the project's tests, with the branch's fix
        assert quality["result"] == "passed" and quality["test"]["counts"].get("passed") == 2
        assert remote.show(branch, "README.md") == b"# calc\n\nAdds numbers.\n"
        assert not list((bot.settings.data_dir / "workspaces").glob(".*setup-base"))


@needs_index
@pytest.mark.usefixtures("pypi_only")
async def test_a_follow_up_whose_branch_added_a_dependency_says_why_set_up_failed(
    tmp_path: Path,
) -> None:
    manifest = PYPROJECT.replace(b'["iniconfig"]', b'["iniconfig", "packaging"]').decode()
    fixed = {"path": "calc/__init__.py", "content": LIBRARY.format(body="a + b")}
    plan = docs.plan(
        [docs.action("task_1", "write_file", arguments=fixed),
         docs.action("task_2", "write_file",
                     arguments={"path": "pyproject.toml", "content": manifest})],
        objective="add() adds; depend on packaging",
    )  # fmt: skip
    script = [plan, docs.completion(achieved=True, done=2), *touch_readme("Adds numbers.")[:1]]
    async with Harness(tmp_path, script=script, overrides=QUIET) as bot:
        remote = repository(bot, tmp_path, PYTHON_PACKAGE)
        assert await run_issue(bot) is TaskState.DONE
        [branch] = bot_branches(remote)
        assert b"packaging" in remote.show(branch, "pyproject.toml")

        state, checkpoint = await follow_up_of(bot, branch, "and use packaging")
        assert state is TaskState.NEEDS_HUMAN
        setup = checkpoint["setup"]
        assert setup["status"] == "failed"
        # the base branch's environment (cached by the first task) came in; the branch's own
        # install ran offline on top and failed
        *_, failing = setup["steps"]
        assert (failing["network"], failing["base"]) == (False, False)
        assert "--editable" in failing["command"] and failing["exit_code"] != 0
        [change] = bot.github.repos[GH_REPO].change_requests
        pull = bot.github.issues[(GH_REPO, change.number)]
        issue = bot.github.issue(bot.github.repos[GH_REPO].ref, 1)
        [help_needed] = of_kind(pull, "human_intervention") + of_kind(issue, "human_intervention")
        assert "**Set-up failed:**" in help_needed
        assert "changes what set-up installs or runs (pyproject.toml)" in help_needed
        assert "without network" in help_needed and "Land that change on main" in help_needed
