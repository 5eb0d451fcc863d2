"""The local stand-in forge over a task's own remote: the base commit and nothing after it."""

from __future__ import annotations

import asyncio
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from bot.eval.checkout import CheckoutError
from bot.eval.local_forge import LocalForge
from bot.eval.origin import bot_patch, make_origin, source_repo
from bot.eval.tasks import EvalTask
from bot.forges.base import Conflict, NotFound
from tests.eval.projects import commit, git, new_repo


async def forge_at_base(tmp_path: Path) -> tuple[LocalForge, str, str]:
    repo, base = new_repo(tmp_path / "repo", {"calc.py": "def add(a, b):\n    return a - b\n"})
    future = commit(repo, {"calc.py": "def add(a, b):\n    return a + b\n"}, "the fix")
    folder = tmp_path / "task"
    folder.mkdir()
    full = await make_origin(repo, base[:10], folder / "origin.git")
    assert full == base
    forge = LocalForge(origin=folder / "origin.git", folder=folder, repo="octo/calc",
                       title="add() subtracts", body="It should add.", requester="eval",
                       bot_login="coding-agent[bot]")  # fmt: skip
    return forge, base, future


async def test_the_remote_holds_the_base_commit_and_not_the_fix(tmp_path: Path) -> None:
    forge, base, future = await forge_at_base(tmp_path)
    auth = await forge.clone_auth(forge.repo)
    clone = tmp_path / "clone"
    await asyncio.to_thread(git, tmp_path, "clone", "-q", auth.url, str(clone))
    assert git(clone, "rev-parse", "HEAD").strip() == base
    shown = await asyncio.to_thread(subprocess.run, ["git", "cat-file", "-e", future],
                                    cwd=clone, check=False)  # fmt: skip
    assert shown.returncode != 0  # the agent cannot read the fix from the future
    assert (await forge.get_file(forge.repo, "calc.py")).text.endswith("a - b\n")
    with pytest.raises(NotFound):
        await forge.get_file(forge.repo, "missing.py")
    paths = {e.path for e in await forge.list_tree(forge.repo, recursive=True)}
    assert {"calc.py", "pyproject.toml"} <= paths
    [hit] = await forge.search_code(forge.repo, "return a - b")
    assert hit.path == "calc.py" and hit.snippet.startswith("2:")


async def test_commits_land_on_the_bots_branch_and_make_the_prediction(tmp_path: Path) -> None:
    forge, base, _ = await forge_at_base(tmp_path)
    assert await bot_patch(forge.origin, base) == ("", "")
    await forge.create_branch(forge.repo, "agent/1-add", from_ref="main")
    files: dict[str, bytes | None] = {"calc.py": b"def add(a, b):\n    return a + b\n"}
    await forge.commit_files(forge.repo, branch="agent/1-add", message="fix", files=files)
    branch, patch = await bot_patch(forge.origin, base)
    assert branch == "agent/1-add"
    assert "-    return a - b\n+    return a + b\n" in patch
    issue = forge.issue.ref
    first = await forge.create_comment(issue, "status: planning")
    await forge.create_comment(issue, "done")
    await forge.edit_comment(issue, first.id, "status: done")
    text = (forge.folder / "comments.md").read_text()
    assert text.index("status: done") < text.index("\ndone") and "planning" not in text
    details = await forge.get_issue(forge.repo, 1, change_request=False)
    assert details.issue.body == "It should add." and len(details.comments) == 2


async def test_comments_written_at_once_are_all_kept(tmp_path: Path) -> None:
    forge, _, _ = await forge_at_base(tmp_path)
    bodies = [f"comment {n}" for n in range(20)]
    await asyncio.gather(*(forge.create_comment(forge.issue.ref, b) for b in bodies))
    text = (forge.folder / "comments.md").read_text()
    assert all(f"{body}\n" in text for body in bodies)


async def test_a_task_from_a_git_url_is_cloned_once_per_run(tmp_path: Path) -> None:
    repo, base = new_repo(tmp_path / "repo", {"calc.py": "x = 1\n"})
    task = EvalTask("octo__calc-1", "octo/calc", base, "x", "diff", ("t::a",), (),
                    repo_url=repo.absolute().as_uri())  # fmt: skip
    cache = tmp_path / "run" / "repos"
    first, second = await asyncio.gather(source_repo(task, cache), source_repo(task, cache))
    assert first == second and first.parent == cache and (first / "HEAD").is_file()
    assert await make_origin(first, base, tmp_path / "origin.git") == base
    with pytest.raises(CheckoutError, match="cannot clone"):
        await source_repo(replace(task, repo_url=(tmp_path / "nowhere").as_uri()), cache)


async def test_a_forge_built_again_from_the_folder_goes_on_where_the_last_one_stopped(
    tmp_path: Path,
) -> None:
    """A queued task may wait on one worker and go on on another: the forge that worker
    builds shows the status comment to edit, the labels and the change request."""
    forge, _, _ = await forge_at_base(tmp_path)
    issue = forge.issue.ref
    status = await forge.create_comment(issue, "status: planning")
    await forge.add_labels(issue, ["coding agent working"])
    await forge.create_branch(forge.repo, "agent/1-add", from_ref="main")
    await forge.open_change_request(forge.repo, head="agent/1-add", base="main", title="t",
                                    body="b")  # fmt: skip
    again = LocalForge(origin=forge.origin, folder=forge.folder, repo="octo/calc",
                       title="add() subtracts", body="It should add.", requester="eval",
                       bot_login="coding-agent[bot]")  # fmt: skip
    await again.edit_comment(issue, status.id, "status: done")
    details = await again.get_issue(again.repo, 1, change_request=False)
    assert [c.body for c in details.comments] == ["status: done"]
    assert details.issue.labels == ("coding agent working",)
    later = await again.create_comment(issue, "done")
    assert later.id == status.id + 1  # ids go on, never reused
    with pytest.raises(Conflict):  # the change request the first one opened is known
        await again.open_change_request(again.repo, head="agent/1-add", base="main",
                                        title="t", body="b")  # fmt: skip
    (forge.folder / "forge.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match=r"forge\.json is not a local forge.s state"):
        LocalForge(origin=forge.origin, folder=forge.folder, repo="octo/calc", title="t",
                   body="b", requester="eval", bot_login="coding-agent[bot]")  # fmt: skip
