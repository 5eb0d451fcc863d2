"""Set-up on a follow-up: the working tree is the bot's own branch, so set-up runs with
network in a clean checkout of the base branch's commit, caches that, and copies the
environment in; what set-up depends on that the branch changed runs offline on top.
Real git repositories, the real sandbox and its egress proxy, the real package index."""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Mapping
from pathlib import Path

import pytest

from bot.config import SandboxSettings
from bot.sandbox.gitcmd import Identity, base_env
from bot.sandbox.setup import SetupStatus
from bot.sandbox.setup_base import FOLDER_SUFFIX, BaseUnavailable, _git
from bot.sandbox.workspace import Workspace
from tests.tools.conftest import git
from tests.tools.test_setup import (
    PACKAGE,
    _offline,
    _preparer,
    _workspace,
    needs_index,
    needs_node,
)

pytestmark = [
    pytest.mark.sandbox,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap missing"),
]

FILES = {"README.md": b"hi\n", "src.txt": b"from main\n"}
# What a set-up command sees: whether it has the egress proxy, the source it was given
# (a file it does not name: not what set-up depends on),
# whether it can write .git, the commit git reports, and whether a remote is configured.
SHOW = (
    "sh",
    "-c",
    'mkdir -p env && { echo "proxy=${http_proxy:+yes}"; cat *.txt; '
    "touch .git/planted 2>/dev/null && echo git-writable || echo git-read-only; "
    "git rev-parse HEAD; git config --get-regexp '^remote' || echo no-remote; "
    "ls .git/hooks 2>/dev/null || echo no-hooks; } > env/made",
)


def _push_branch(tmp_path: Path, files: Mapping[str, bytes], branch: str = "agent/1-test") -> None:
    """The bot's branch on the remote: main with ``files`` changed (an earlier run's work)."""
    seed = tmp_path / f"seed-{len(list(tmp_path.glob('seed-*')))}"
    git("clone", "--quiet", f"file://{tmp_path / 'origin' / 'remote.git'}", str(seed), cwd=tmp_path)
    git("checkout", "--quiet", "-b", branch, cwd=seed)
    for rel, data in files.items():
        (seed / rel).parent.mkdir(parents=True, exist_ok=True)
        (seed / rel).write_bytes(data)
    git("add", "--all", cwd=seed)
    git("commit", "--quiet", "-m", "the agent's earlier work", cwd=seed)
    git("push", "--quiet", "origin", branch, cwd=seed)


def _base_folder(ws: Workspace) -> Path:
    return ws.path.parent / f".{ws.path.name}{FOLDER_SUFFIX}"


def _main_commit(tmp_path: Path) -> str:
    return git("rev-parse", "main", cwd=tmp_path / "origin" / "remote.git")


async def test_a_follow_up_that_changed_a_source_file_is_set_up_with_network_from_the_base(
    tmp_path: Path,
) -> None:
    ws = _workspace(tmp_path, "task", FILES)
    _push_branch(tmp_path, {"src.txt": b"from the bot's branch\n"})
    networks: list[bool] = []
    cache = tmp_path / "cache"
    result = await _preparer(ws, cache, (SHOW,), networks=networks).prepare()
    assert result.status is SetupStatus.RAN, result.failure
    assert networks == [True]
    [step] = result.steps
    assert (step.network, step.base) == (True, True)
    assert result.base_commit == _main_commit(tmp_path)
    assert result.key == result.base_key  # the source file is not what set-up depends on
    # the working tree has the environment, made from the base branch's files
    made = (ws.path / "env" / "made").read_text().splitlines()
    assert made == [
        "proxy=yes", "from main", "git-read-only", result.base_commit, "no-remote", "no-hooks"
    ]  # fmt: skip
    assert (ws.path / "src.txt").read_text() == "from the bot's branch\n"
    assert await ws.changed_files() == []  # what set-up made is never committed
    # cached under the base tree's key; the checkout is gone
    [entry] = cache.glob("*/*/manifest.json")
    assert entry.parent.name == result.base_key
    assert not _base_folder(ws).exists()
    assert any("clean checkout of main" in note and "src.txt" in note for note in result.notes)
    # a later run of the same task finds the workspace prepared
    again = await _preparer(ws, cache, (SHOW,), networks=networks).prepare()
    assert again.status is SetupStatus.READY and networks == [True]


async def test_a_base_set_up_that_fails_says_it_ran_in_the_base_checkout(tmp_path: Path) -> None:
    ws = _workspace(tmp_path, "task", FILES)
    _push_branch(tmp_path, {"src.txt": b"changed\n"})
    failing = ("sh", "-c", "echo 'ERROR: no matching distribution' >&2; exit 3")
    result = await _preparer(ws, tmp_path / "cache", (failing,)).prepare()
    assert result.status is SetupStatus.FAILED
    step = result.failure
    assert step is not None and step.exit_code == 3 and step.base and step.network
    assert "ERROR: no matching distribution" in step.tail
    [hint] = result.hints
    assert "clean checkout of main" in hint and "base branch's own set-up fails" in hint
    assert not (tmp_path / "cache").exists() and not _base_folder(ws).exists()


async def test_the_base_checkout_is_held_to_the_workspace_bounds_and_removed(
    tmp_path: Path,
) -> None:
    ws = _workspace(tmp_path, "task", FILES)
    _push_branch(tmp_path, {"src.txt": b"changed\n"})
    bounded = SandboxSettings(timeout=60, workspace_mb=16, write_mb=64)
    fill = ("sh", "-c", "head -c 40000000 /dev/zero > big.bin")
    result = await _preparer(ws, tmp_path / "cache", (fill,), sandbox_settings=bounded).prepare()
    assert result.status is SetupStatus.FAILED
    step = result.failure
    assert step is not None and step.base
    assert "No space left" in step.tail or "workspace" in step.tail
    assert not _base_folder(ws).exists() and not (ws.path / "big.bin").exists()
    # a base tree over the bounds is never checked out: the working tree is set up offline
    many = {f"files/{n}.txt": b"x" for n in range(150)}
    big = _workspace(tmp_path / "big", "task", many)
    _push_branch(tmp_path / "big", {"src.txt": b"changed\n"})
    tiny = SandboxSettings(timeout=60, workspace_files=100)
    networks: list[bool] = []
    offline = await _preparer(
        big, tmp_path / "cache", (("true",),), sandbox_settings=tiny, networks=networks
    ).prepare()
    assert networks == [False]  # the workspace, offline (and over its bounds as well)
    assert any("over the workspace's bounds" in note for note in offline.notes), offline.notes
    assert not _base_folder(big).exists()


async def test_cancelling_set_up_in_the_base_checkout_removes_it(tmp_path: Path) -> None:
    ws = _workspace(tmp_path, "task", FILES)
    _push_branch(tmp_path, {"src.txt": b"changed\n"})
    slow = ("sh", "-c", "echo started; sleep 60")
    log = tmp_path / "run" / "01-sh.log"
    preparer = _preparer(ws, tmp_path / "cache", (slow,))
    running = asyncio.create_task(preparer.prepare(log_dir=log.parent))
    folder = _base_folder(ws)
    for _ in range(600):  # the command's log is opened as it starts, in the base checkout
        if log.exists():
            break
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.5)
    assert log.exists() and folder.is_dir() and not running.done()
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    assert not folder.exists()
    assert not (tmp_path / "cache").exists()


async def test_a_checkout_left_by_a_crash_is_replaced(tmp_path: Path) -> None:
    ws = _workspace(tmp_path, "task", FILES)
    _push_branch(tmp_path, {"src.txt": b"changed\n"})
    await ws.ensure()
    stale = _base_folder(ws)
    (stale / "locked").mkdir(parents=True)
    (stale / "locked" / "left.txt").write_text("from a crash")
    (stale / "locked").chmod(0o500)
    result = await _preparer(ws, tmp_path / "cache", (SHOW,)).prepare()
    assert result.status is SetupStatus.RAN, result.failure
    assert not stale.exists()


@needs_index
async def test_a_python_follow_up_is_set_up_from_the_base_when_its_cache_entry_was_pruned(
    tmp_path: Path,
) -> None:
    cache = tmp_path / "data" / "setup-cache"
    first = _workspace(tmp_path, "task-1", PACKAGE)
    ran = await _preparer(first, cache).prepare()
    assert ran.status is SetupStatus.RAN, ran.failure
    changed = PACKAGE["tinypkg/__init__.py"] + b"\nFIXED = True\n"
    _push_branch(tmp_path, {"tinypkg/__init__.py": changed})
    shutil.rmtree(cache)  # pruned: other environments took its place
    follow_up = _workspace(tmp_path, "task-2", PACKAGE)
    networks: list[bool] = []
    result = await _preparer(follow_up, cache, networks=networks).prepare()
    assert result.status is SetupStatus.RAN, result.failure
    assert networks == [True, True]
    assert all(step.network and step.base for step in result.steps)
    assert (cache.glob(f"*/{result.base_key}/manifest.json")) and result.key == result.base_key
    # the venv works in the working tree, with the branch's source (the editable install
    # re-pointed from the base checkout)
    show = "import tinypkg; print(tinypkg.__file__, tinypkg.FIXED)"
    where = await _offline(follow_up, "python", "-c", show)
    assert where.split() == [str(follow_up.path.resolve() / "tinypkg" / "__init__.py"), "True"]
    assert "1 passed" in await _offline(follow_up, "pytest", "-q", "-p", "no:cacheprovider")
    assert str(_base_folder(follow_up)) not in (follow_up.path / ".venv" / "pyvenv.cfg").read_text()
    assert await follow_up.changed_files() == []


def _pypi_only(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """The package configuration of a server whose only index is the network's: no local
    mirror that an offline command could still read."""
    home = tmp_path / "home"
    home.mkdir()
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}, home


@needs_index
async def test_a_follow_up_whose_branch_adds_a_dependency_fails_and_says_why(
    tmp_path: Path,
) -> None:
    ws = _workspace(tmp_path, "task", PACKAGE)
    manifest = PACKAGE["pyproject.toml"].replace(
        b'dependencies = ["iniconfig"]', b'dependencies = ["iniconfig", "packaging"]'
    )
    _push_branch(tmp_path, {"pyproject.toml": manifest})
    cache = tmp_path / "cache"
    environ, home = _pypi_only(tmp_path)
    result = await _preparer(ws, cache, environ=environ, home=home).prepare()
    assert result.status is SetupStatus.FAILED
    base_steps = [step for step in result.steps if step.base]
    assert len(base_steps) == 2 and all(step.network and step.ok for step in base_steps)
    step = result.failure
    assert step is not None and not step.base and not step.network
    assert "--editable" in step.command
    [hint] = result.hints
    assert "pyproject.toml" in hint and "without network" in hint and "Land that change" in hint
    # the base's environment is cached, under the base's key (not the branch's)
    [entry] = cache.glob("*/*/manifest.json")
    assert entry.parent.name == result.base_key != result.key
    assert not _base_folder(ws).exists()


async def test_without_the_base_branch_in_the_clone_the_working_tree_is_set_up_offline(
    tmp_path: Path,
) -> None:
    ws = _workspace(tmp_path, "task", FILES)
    _push_branch(tmp_path, {"src.txt": b"changed\n"})
    await ws.ensure()
    git("update-ref", "-d", "refs/remotes/origin/main", cwd=ws.path)
    networks: list[bool] = []
    result = await _preparer(ws, tmp_path / "cache", (SHOW,), networks=networks).prepare()
    assert result.status is SetupStatus.RAN and networks == [False]
    assert (ws.path / "env" / "made").read_text().splitlines()[:2] == ["proxy=", "changed"]
    [note] = [n for n in result.notes if "without network" in n]
    assert "the clone does not know the base branch main" in note
    assert not (tmp_path / "cache").exists() and not _base_folder(ws).exists()


async def test_a_git_step_of_the_checkout_that_fails_is_an_error_never_an_empty_answer(
    tmp_path: Path,
) -> None:
    env = base_env(os.environ, Identity("t", "t@example.invalid"))
    with pytest.raises(BaseUnavailable, match="git fetch failed"):
        await _git(["fetch", "--quiet", str(tmp_path / "nowhere"), "main"], tmp_path, env, 30)
    assert await _git(["rev-parse", "--verify", "--quiet", "nothing"], tmp_path, env, 30,
                      check=False) == ""  # fmt: skip


@needs_node
async def test_a_node_follow_up_gets_node_modules_from_the_base_checkout(tmp_path: Path) -> None:
    package = b'{"name": "tiny", "version": "1.0.0", "dependencies": {"is-number": "7.0.0"}}'
    files = {"package.json": package, "index.js": b"module.exports = require('is-number')\n"}
    ws = _workspace(tmp_path, "task", files)
    _push_branch(tmp_path, {"index.js": b"module.exports = (n) => require('is-number')(n)\n"})
    result = await _preparer(ws, tmp_path / "cache").prepare()
    if result.status is SetupStatus.FAILED and "ENOTFOUND" in repr(result.failure):
        pytest.skip("the npm registry is unreachable")
    assert result.status is SetupStatus.RAN, result.failure
    [step] = result.steps
    assert step.command.startswith("npm install") and step.base and step.network
    assert "node_modules" in result.paths
    check = ("node", "-e", "console.log(require('./index.js')(5))")
    assert (await _offline(ws, *check)).strip() == "true"
    assert await ws.changed_files() == []
