"""A repository whose folders nest deeper than Python's recursion limit (issue 27, item 9).

In Python 3.11 ``os.walk`` and ``shutil.rmtree`` recurse once per folder level: the
clone's walk for nested repositories raised ``RecursionError``, and so did set-up's
cache key, the file tools and the worker's clean-up, so every task on such a repository
failed with a traceback. Here a real repository nests 1,200 folders (short names: the
deepest path stays under PATH_MAX) and a task runs on it through the whole path: clone,
set-up, tools, gate, push, clean-up."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.sandbox.tree_walk import remove_tree, walk
from bot.storage.base import TaskState
from bot.tools.file_ops import list_directory
from bot.tools.file_search import walk_files
from tests.e2e.support import gh_labeled, github_repo, settle
from tests.e2e.test_success import NEW_README, readme_script
from tests.harness import Harness
from tests.tools.conftest import Remote, git

pytestmark = [
    pytest.mark.sandbox,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap missing"),
]

DEPTH = 1_200
LEAF = "d/" * DEPTH + "leaf.txt"


def _nest(top: Path, depth: int = DEPTH) -> Path:
    """``depth`` folders named ``d`` below ``top`` (made one by one: ``Path.mkdir`` with
    ``parents`` recurses per level too); the deepest."""
    here = top
    for _ in range(depth):
        here = here / "d"
        here.mkdir()
    return here


@pytest.fixture(autouse=True)
def _remove_deep_trees(tmp_path: Path) -> Iterator[None]:
    """Every tree of the test is removed at its end: pytest's own clean-up of old
    temporary folders recurses per level too."""
    yield
    for top in tmp_path.iterdir():
        remove_tree(top, ignore_errors=True)


@pytest.fixture
def deep(tmp_path: Path, remote: Remote) -> Remote:
    """The fixtures' remote with one more commit on main: ``LEAF``, 1,200 folders deep."""
    assert sys.getrecursionlimit() < DEPTH
    seed = tmp_path / "seed"
    git("clone", "--quiet", remote.url, str(seed), cwd=tmp_path)
    (_nest(seed) / "leaf.txt").write_text("at the bottom\n")
    git("add", "--all", cwd=seed)
    git("commit", "--quiet", "-m", "a deep tree", cwd=seed)
    git("push", "--quiet", "origin", "main", cwd=seed)
    remove_tree(seed)
    return remote


def test_walking_and_removing_a_tree_deeper_than_the_recursion_limit(tmp_path: Path) -> None:
    (tmp_path / "top").mkdir()
    (_nest(tmp_path / "top") / "leaf.txt").write_text("x")
    (tmp_path / "top" / "link").symlink_to(tmp_path)  # listed, never entered
    with pytest.raises(RecursionError):
        list(os.walk(tmp_path / "top"))  # what the bot used before
    walked = list(walk(tmp_path / "top"))
    assert len(walked) == DEPTH + 1
    assert sorted(walked[0][1]) == ["d", "link"]
    assert walked[-1][2] == ["leaf.txt"]
    [found] = walk_files(tmp_path, tmp_path / "top", ())
    assert found.name == "leaf.txt"
    listing = list_directory(tmp_path, "top", recursive=True)
    assert "leaf.txt" in listing
    remove_tree(tmp_path / "top")
    assert not (tmp_path / "top").exists() and tmp_path.exists()  # the link's target stays


async def test_a_task_on_a_repository_nested_deeper_than_the_recursion_limit_runs(
    tmp_path: Path, deep: Remote
) -> None:
    async with Harness(tmp_path, script=readme_script()) as bot:
        github_repo(bot, deep, labels=("coding agent",))
        response = await bot.send_github("issues", gh_labeled())
        assert response.status_code == 202
        await settle(bot)
        [task] = await bot.tasks()
        checkpoint = await bot.store.load_checkpoint(task.id)
        assert task.state is TaskState.DONE, checkpoint and checkpoint.get("outcome")
        branch = checkpoint["delivery"]["branch"] if checkpoint else ""
        assert deep.show(branch, "README.md").decode() == NEW_README
        assert deep.show(branch, LEAF) == b"at the bottom\n"  # the deep tree is still there
        assert not (bot.settings.data_dir / "workspaces" / task.id).exists()  # cleaned up
