"""The workspace clone against a real bare repository: clone, branch, diff, commit, push."""

from __future__ import annotations

import asyncio
import os
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

from bot.forges.base import CloneAuth
from bot.sandbox.workspace import Workspace, WorkspaceError, branch_name, valid_branch
from tests.fakes import FakeForge
from tests.tools.conftest import HttpRemote, Remote, git, static_auth

MakeWorkspace = Callable[..., Workspace]


# --- branch names ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("title", "expected"),
    [
        ("Fix README typo", "agent/42-fix-readme-typo"),
        ("  Café crème: naïve façade!  ", "agent/42-cafe-creme-naive-facade"),
        ("READMEの誤字を直す", "agent/42-readme"),
        ("日本語だけのタイトル", "agent/42"),
        ("", "agent/42"),
        ("Fix: ../../etc/passwd ~^:?*[ \\ @{x}", "agent/42-fix-etc-passwd-x"),
    ],
)
def test_branch_name_is_an_ascii_slug(title: str, expected: str) -> None:
    assert branch_name("agent/", 42, title) == expected


def test_branch_name_is_cut_at_a_word_boundary_within_60_characters() -> None:
    name = branch_name("agent/", 1234, "Refactor the configuration loader so that environment " * 3)
    assert len(name) <= 60
    assert name.startswith("agent/1234-refactor-the-configuration-loader")
    assert not name.endswith("-")
    assert "environmen" not in name or name.endswith("environment")


@pytest.mark.parametrize("prefix", ["agent..x/", "-agent/", "agent/.hidden/", "a b/"])
def test_branch_name_refuses_a_prefix_git_would_refuse(prefix: str) -> None:
    with pytest.raises(ValueError, match="not a valid branch name"):
        branch_name(prefix, 1, "title")


def test_branch_name_refuses_negative_numbers() -> None:
    with pytest.raises(ValueError, match="negative"):
        branch_name("agent/", -1, "x")


@pytest.mark.parametrize(
    ("name", "ok"),
    [("agent/1-x", True), ("main", True), ("a..b", False), ("a.lock", False), ("a/", False),
     ("-x", False), ("x@{1}", False), ("a//b", False), ("a b", False), ("", False)],
)  # fmt: skip
def test_valid_branch_follows_check_ref_format(name: str, ok: bool, tmp_path: Path) -> None:
    done = subprocess.run(
        ["git", "check-ref-format", "--branch", name], capture_output=True, check=False
    )
    assert valid_branch(name) is ok
    assert (done.returncode == 0) is ok


def test_the_bot_branch_may_not_be_the_base_branch(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="may not be the base branch"):
        Workspace(tmp_path, auth=static_auth("file:///x"), branch="main", base_branch="main")
    with pytest.raises(ValueError, match="not a valid branch name"):
        Workspace(tmp_path, auth=static_auth("file:///x"), branch="a..b", base_branch="main")


# --- clone and branch -----------------------------------------------------------------------------


async def test_ensure_makes_a_shallow_clone_on_the_bot_branch(
    make_workspace: MakeWorkspace,
) -> None:
    ws = make_workspace()
    path = await ws.ensure()
    assert path == ws.path
    assert (path / "src" / "app.py").read_text().startswith("def greet")
    assert git("rev-parse", "--is-shallow-repository", cwd=path) == "true"
    assert git("rev-list", "--count", "HEAD", cwd=path) == "1"
    assert git("symbolic-ref", "--short", "HEAD", cwd=path) == "agent/1-test"


async def test_ensure_is_idempotent_and_concurrency_safe(
    make_workspace: MakeWorkspace, remote: Remote
) -> None:
    calls = 0
    inner = static_auth(remote.url)

    async def counting_auth() -> CloneAuth:
        nonlocal calls
        calls += 1
        return await inner()

    ws = make_workspace(auth=counting_auth)
    paths = await asyncio.gather(*(ws.ensure() for _ in range(5)))
    assert set(paths) == {ws.path}
    assert calls == 2  # one clone, one look for the remote branch
    twin = make_workspace(auth=counting_auth)  # same directory, e.g. after a restart
    await twin.ensure()
    assert calls == 2
    assert git("symbolic-ref", "--short", "HEAD", cwd=ws.path) == "agent/1-test"


async def test_ensure_refuses_a_non_empty_directory_that_is_not_a_clone(
    make_workspace: MakeWorkspace, tmp_path: Path
) -> None:
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "stray.txt").write_text("x")
    with pytest.raises(WorkspaceError, match="not empty and is not a clone"):
        await make_workspace().ensure()


async def test_a_failed_clone_names_the_problem(
    make_workspace: MakeWorkspace, tmp_path: Path
) -> None:
    ws = make_workspace(auth=static_auth(f"file://{tmp_path}/missing.git"))
    with pytest.raises(WorkspaceError, match="git clone failed"):
        await ws.ensure()


# --- diff, commit, push ---------------------------------------------------------------------------


async def test_diff_and_changed_files_include_new_files(make_workspace: MakeWorkspace) -> None:
    ws = make_workspace()
    await ws.ensure()
    (ws.path / "README.md").write_text("# Demo\n\nA better demo project.\n")
    (ws.path / "src" / "new_module.py").write_text("VALUE = 1\n")
    (ws.path / "docs" / "guide.txt").unlink()
    diff = await ws.diff()
    assert "+A better demo project." in diff
    assert "+++ b/src/new_module.py" in diff and "+VALUE = 1" in diff
    assert "--- a/docs/guide.txt" in diff
    stat = await ws.diff(stat=True)
    assert "3 files changed" in stat
    assert await ws.changed_files() == ["README.md", "docs/guide.txt", "src/new_module.py"]


async def test_changed_files_reports_both_names_of_a_rename(make_workspace: MakeWorkspace) -> None:
    ws = make_workspace()
    await ws.ensure()
    git("mv", "docs/guide.txt", "docs/manual.txt", cwd=ws.path)
    assert await ws.changed_files() == ["docs/guide.txt", "docs/manual.txt"]


async def test_commit_and_push_publishes_the_bot_branch_only(
    make_workspace: MakeWorkspace, remote: Remote
) -> None:
    ws = make_workspace()
    await ws.ensure()
    (ws.path / "src" / "app.py").write_text("def greet(name):\n    return f'Hello, {name}'\n")
    (ws.path / "NOTES.md").write_text("notes\n")
    sha = await ws.commit_and_push("Use an f-string in greet")
    assert sha is not None and len(sha) == 40
    assert remote.rev("agent/1-test") == sha
    assert remote.rev("main") == remote.base_commit
    assert remote.show("agent/1-test", "NOTES.md") == b"notes\n"
    assert git("log", "-1", "--format=%s|%P", "agent/1-test", cwd=remote.bare) == (
        f"Use an f-string in greet|{remote.base_commit}"
    )
    assert await ws.commit_and_push("nothing new") is None
    assert remote.rev("agent/1-test") == sha


async def test_commit_and_push_with_no_change_returns_none(
    make_workspace: MakeWorkspace, remote: Remote
) -> None:
    ws = make_workspace()
    await ws.ensure()
    assert await ws.commit_and_push("nothing") is None
    assert not remote.has_branch("agent/1-test")


async def test_an_existing_remote_branch_is_reused(
    make_workspace: MakeWorkspace, remote: Remote
) -> None:
    first = make_workspace("first")
    await first.ensure()
    (first.path / "step1.txt").write_text("one\n")
    one = await first.commit_and_push("step 1")
    second = make_workspace("second")
    await second.ensure()
    assert (second.path / "step1.txt").read_text() == "one\n"
    (second.path / "step2.txt").write_text("two\n")
    two = await second.commit_and_push("step 2")
    assert git("log", "-1", "--format=%P", "agent/1-test", cwd=remote.bare) == one
    assert remote.rev("agent/1-test") == two
    assert remote.rev("main") == remote.base_commit


async def test_a_commit_left_unpushed_is_pushed_on_the_next_call(
    make_workspace: MakeWorkspace, remote: Remote
) -> None:
    ws = make_workspace()
    await ws.ensure()
    (ws.path / "a.txt").write_text("a\n")
    git("add", "a.txt", cwd=ws.path)
    git("commit", "-q", "-m", "made before a crash", cwd=ws.path)
    sha = await ws.commit_and_push("resume")
    assert sha == git("rev-parse", "HEAD", cwd=ws.path)
    assert remote.rev("agent/1-test") == sha


async def test_push_is_refused_when_another_branch_is_checked_out(
    make_workspace: MakeWorkspace, remote: Remote
) -> None:
    ws = make_workspace()
    await ws.ensure()
    git("checkout", "-q", "main", cwd=ws.path)
    (ws.path / "README.md").write_text("changed on main\n")
    with pytest.raises(WorkspaceError, match="refusing to push: the checked-out branch is main"):
        await ws.commit_and_push("should not happen")
    git("checkout", "-q", "-b", "someone-else", cwd=ws.path)
    with pytest.raises(WorkspaceError, match="branch is someone-else"):
        await ws.commit_and_push("should not happen")
    assert remote.rev("main") == remote.base_commit
    assert not remote.has_branch("someone-else")


async def test_commit_message_must_not_be_empty(make_workspace: MakeWorkspace) -> None:
    with pytest.raises(ValueError, match="empty"):
        await make_workspace().commit_and_push("  ")


async def test_git_hooks_in_the_clone_never_run(
    make_workspace: MakeWorkspace, tmp_path: Path
) -> None:
    ws = make_workspace()
    await ws.ensure()
    marker = tmp_path / "hook-ran"
    for hook in ("pre-commit", "pre-push", "post-commit"):
        path = ws.path / ".git" / "hooks" / hook
        path.write_text(f"#!/bin/sh\ntouch {marker}\n")
        path.chmod(0o755)
    (ws.path / "x.txt").write_text("x\n")
    assert await ws.commit_and_push("with hooks present") is not None
    assert not marker.exists()


# --- credentials ----------------------------------------------------------------------------------


def _helper_dirs() -> set[str]:
    return {p for p in os.listdir(tempfile.gettempdir()) if p.startswith("bot-git-credential-")}


def _files_containing(root: Path, needle: bytes) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and needle in p.read_bytes()]


async def test_clone_and_push_over_http_authenticate_through_the_environment_only(
    http_remote: HttpRemote, remote: Remote, tmp_path: Path
) -> None:
    forge = FakeForge()
    repo = forge.add_repo("acme/demo", clone_url=http_remote.url)
    before = _helper_dirs()
    ws = Workspace(
        tmp_path / "ws", auth=lambda: forge.clone_auth(repo), branch="agent/5-auth",
        base_branch="main",
    )  # fmt: skip
    await ws.ensure()
    (ws.path / "auth.txt").write_text("pushed over http\n")
    sha = await ws.commit_and_push("over http")
    assert remote.rev("agent/5-auth") == sha
    assert http_remote.rejected >= 1  # git asked for credentials only after a challenge
    assert any("git-receive-pack" in path for path in http_remote.authorized)
    token = http_remote.password.encode()
    assert _files_containing(ws.path, token) == []
    config = (ws.path / ".git" / "config").read_text()
    assert f"url = {http_remote.url}" in config
    assert "fake-token" not in config and "x-access-token@" not in config
    assert _helper_dirs() <= before  # the helper script is gone


async def test_a_wrong_token_fails_without_prompting_or_leaking(
    http_remote: HttpRemote, tmp_path: Path
) -> None:
    secret = "wrong-secret-value"
    ws = Workspace(
        tmp_path / "ws", auth=static_auth(http_remote.url, password=secret),
        branch="agent/5-auth", base_branch="main", git_timeout=60,
    )  # fmt: skip
    with pytest.raises(WorkspaceError, match="git clone failed") as caught:
        await ws.ensure()
    assert secret not in str(caught.value)
    assert http_remote.authorized == []


# --- nested repositories (a sandbox escape through host-side git) -------------------------------


def _plant_nested_repo(root: Path, marker: Path) -> None:
    """What a sandboxed command could do: a nested repo whose own config runs a filter."""
    sub = root / "sub"
    sub.mkdir()
    git("init", "--quiet", cwd=sub)
    git("config", "filter.x.clean", f"touch {marker}; cat", cwd=sub)
    (sub / ".gitattributes").write_text("* filter=x\n")
    (sub / "f.txt").write_text("one\n")
    git("add", ".", cwd=sub)
    git("-c", "user.name=a", "-c", "user.email=a@b", "commit", "--quiet", "-m", "x", cwd=sub)
    (sub / "f.txt").write_text("two\n")
    marker.unlink()  # the planting itself ran the filter once


async def test_host_side_git_never_runs_a_nested_repositorys_config(
    make_workspace: MakeWorkspace, tmp_path: Path
) -> None:
    ws = make_workspace()
    await ws.ensure()
    marker = tmp_path / "escaped"
    _plant_nested_repo(ws.path, marker)
    diff = await ws.diff()
    await ws.changed_files()
    head = await ws.commit_and_push("add sub")
    assert not marker.exists(), "a nested repository's filter ran outside the sandbox"
    assert not (ws.path / "sub" / ".git").exists()
    assert "sub/f.txt" in diff
    tree = git("ls-tree", "-r", "HEAD", cwd=ws.path)
    assert "160000" not in tree  # no gitlink: the files were committed as files
    assert head is not None
