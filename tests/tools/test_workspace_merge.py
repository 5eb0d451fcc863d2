"""Bringing the base into the bot's branch: a merge on a shallow clone, never a rebase,
its conflicts left for the agent; a push with a conflict marker left is refused."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from bot.sandbox.git_state import has_markers, marker_sizes, unmerged_paths
from bot.sandbox.workspace import Workspace, WorkspaceError
from tests.tools.conftest import Remote, git

MakeWorkspace = Callable[..., Workspace]
BRANCH = "agent/1-test"


def push(
    remote: Remote, tmp_path: Path, branch: str, rel: str, text: str, encoding: str = "utf-8"
) -> str:
    """Someone commits ``text`` to ``rel`` on ``branch`` (made from main) and pushes it."""
    seed = tmp_path / f"seed-{len(list(tmp_path.iterdir()))}"
    git("clone", "--quiet", remote.url, str(seed), cwd=tmp_path)
    exists = git("ls-remote", "--heads", "origin", branch, cwd=seed)
    git("checkout", "--quiet", *([branch] if exists else ["-b", branch]), cwd=seed)
    (seed / rel).write_bytes(text.encode(encoding))
    git("add", "--all", cwd=seed)
    git("commit", "--quiet", "-m", f"{rel} on {branch}", cwd=seed)
    git("push", "--quiet", "origin", branch, cwd=seed)
    return git("rev-parse", "HEAD", cwd=seed)


async def test_a_clean_merge_of_the_base_is_pushed_as_a_merge_commit(
    make_workspace: MakeWorkspace, remote: Remote, tmp_path: Path
) -> None:
    mine = push(remote, tmp_path, BRANCH, "mine.txt", "mine\n")
    theirs = push(remote, tmp_path, "main", "theirs.txt", "theirs\n")
    workspace = make_workspace()
    assert await workspace.merge_base() == []
    head = await workspace.commit_and_push("Merge main into the branch")
    assert head is not None
    parents = git("rev-list", "--parents", "-n", "1", head, cwd=remote.bare).split()[1:]
    assert parents == [mine, theirs]
    assert await workspace.merge_base() == []  # main is in already: nothing to do


async def test_conflicts_are_left_for_the_agent_and_block_the_push_until_resolved(
    make_workspace: MakeWorkspace, remote: Remote, tmp_path: Path
) -> None:
    mine = push(remote, tmp_path, BRANCH, "README.md", "the branch's words\n")
    push(remote, tmp_path, "main", "README.md", "main's words\n")
    workspace = make_workspace()
    assert await workspace.merge_base() == ["README.md"]
    assert await workspace.merge_base() == ["README.md"]  # the merge in progress is kept
    marked = (workspace.path / "README.md").read_text()
    assert "<<<<<<< " in marked and ">>>>>>> " in marked
    with pytest.raises(WorkspaceError, match=r"conflict markers in README\.md"):
        await workspace.commit_and_push("Merge main")
    assert remote.rev(BRANCH) == mine  # nothing pushed

    (workspace.path / "README.md").write_text("both sides' words\n")
    head = await workspace.commit_and_push("Merge main")
    assert head is not None and remote.rev(BRANCH) == head
    git("merge-base", "--is-ancestor", mine, head, cwd=remote.bare)  # kept, not rewritten
    assert remote.show(BRANCH, "README.md") == b"both sides' words\n"


async def test_markers_of_the_size_the_attributes_name_block_the_push(
    make_workspace: MakeWorkspace, remote: Remote, tmp_path: Path
) -> None:
    """``conflict-marker-size=12``: git writes twelve-character markers, which a check for
    git's default seven never saw; neither the working tree's attributes changed by a
    command nor git's default hides them."""
    push(remote, tmp_path, "main", ".gitattributes", "* conflict-marker-size=12\n")
    mine = push(remote, tmp_path, BRANCH, "README.md", "the branch's words\n")
    push(remote, tmp_path, "main", "README.md", "main's words\n")
    workspace = make_workspace()
    assert await workspace.merge_base() == ["README.md"]
    assert "u" in git("status", "--porcelain", "README.md", cwd=workspace.path).lower()
    marked = (workspace.path / "README.md").read_text()
    firsts = {line.split(" ")[0] for line in marked.splitlines()}
    assert "<" * 12 in firsts and ">" * 12 in firsts and "<" * 7 not in firsts
    with pytest.raises(WorkspaceError, match=r"conflict markers in README\.md"):
        await workspace.commit_and_push("Merge main")
    # a command names another size in the working tree: the index's attributes still count
    (workspace.path / ".gitattributes").write_text("* conflict-marker-size=30\n")
    with pytest.raises(WorkspaceError, match=r"conflict markers in README\.md"):
        await workspace.commit_and_push("Merge main")
    assert remote.rev(BRANCH) == mine  # nothing pushed

    (workspace.path / ".gitattributes").write_text("* conflict-marker-size=12\n")
    (workspace.path / "README.md").write_text("both sides' words\n")
    head = await workspace.commit_and_push("Merge main")
    assert head is not None and remote.show(BRANCH, "README.md") == b"both sides' words\n"


async def test_a_size_with_a_plus_sign_is_read_as_git_reads_it(
    make_workspace: MakeWorkspace, remote: Remote, tmp_path: Path
) -> None:
    """``conflict-marker-size=+12``: git reads the value with ``atoi`` (a sign allowed), so
    it writes twelve-character markers; a reading that takes only leading digits saw
    git's default seven and let the markers be pushed."""
    push(remote, tmp_path, "main", ".gitattributes", "* conflict-marker-size=+12\n")
    mine = push(remote, tmp_path, BRANCH, "README.md", "the branch's words\n")
    push(remote, tmp_path, "main", "README.md", "main's words\n")
    workspace = make_workspace()
    assert await workspace.merge_base() == ["README.md"]
    marked = (workspace.path / "README.md").read_text()
    assert "<" * 12 + " " in marked and "<" * 13 not in marked
    with pytest.raises(WorkspaceError, match=r"conflict markers in README\.md"):
        await workspace.commit_and_push("Merge main")
    assert remote.rev(BRANCH) == mine  # nothing pushed


async def test_markers_in_a_working_tree_encoding_block_the_push(
    make_workspace: MakeWorkspace, remote: Remote, tmp_path: Path
) -> None:
    """``working-tree-encoding=UTF-16LE``: git writes the conflicted file, markers and
    all, in UTF-16 to the working tree; a check of its bytes for ``<<<<<<<`` saw none."""
    push(remote, tmp_path, "main", ".gitattributes", "*.md working-tree-encoding=UTF-16LE\n")
    mine = push(remote, tmp_path, BRANCH, "README.md", "the branch's words\n", "utf-16-le")
    push(remote, tmp_path, "main", "README.md", "main's words\n", "utf-16-le")
    workspace = make_workspace()
    assert await workspace.merge_base() == ["README.md"]
    marked = (workspace.path / "README.md").read_bytes().decode("utf-16-le")
    assert "<<<<<<< " in marked
    with pytest.raises(WorkspaceError, match=r"conflict markers in README\.md"):
        await workspace.commit_and_push("Merge main")
    assert remote.rev(BRANCH) == mine  # nothing pushed


def test_marker_sizes_read_as_git_reads_them(tmp_path: Path) -> None:
    outputs = (
        "a\0conflict-marker-size\x0012\0b\0conflict-marker-size\0unspecified\0"
        "c\0conflict-marker-size\0set\0d\0conflict-marker-size\x003x\0",
        "a\0conflict-marker-size\0unspecified\0",
    )
    sizes = marker_sizes(["a", "b", "c", "d", "e"], *outputs)
    assert sizes == {"a": {7, 12}, "b": {7}, "c": {7}, "d": {3, 7}, "e": {7}}
    signed = "".join(
        f"{p}\0conflict-marker-size\0{v}\0"
        for p, v in zip("abc", ("+9", "-9", "\u00b2"), strict=True)
    )
    assert marker_sizes(["a", "b", "c"], signed) == {"a": {7, 9}, "b": {7}, "c": {7}}
    file = tmp_path / "f.txt"
    file.write_bytes(b"text\n<<<<<<<<<<<< HEAD\nx\n")
    assert has_markers(file, frozenset({7, 12}))
    assert not has_markers(file, frozenset({7}))  # twelve is not seven followed by a space
    file.write_bytes(b"|||| base\n")
    assert has_markers(file, frozenset({4})) and not has_markers(file, frozenset({3, 5}))
    file.write_bytes("x\n<<<<<<< HEAD\n".encode("utf-16-le"))
    assert not has_markers(file, frozenset({7}))
    assert has_markers(file, frozenset({7}), frozenset({"", "UTF-16LE"}))
    assert has_markers(file, frozenset({7}), frozenset({"", "NO-SUCH-ENCODING"}))  # unreadable
    assert unmerged_paths("100644 abc 2\tx.txt\x00100644 def 3\tx.txt\x00", "y.txt\0") == [
        "x.txt",
        "y.txt",
    ]
