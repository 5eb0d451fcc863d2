"""The path guard on a real directory tree with real symbolic links."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bot.paths import PathRefused, ensure_size, resolve_inside


@pytest.fixture
def root(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "src" / "pkg").mkdir(parents=True)
    (ws / "src" / "pkg" / "mod.py").write_text("x = 1\n")
    (ws / ".git").mkdir()
    (ws / ".git" / "config").write_text("[core]\n")
    (tmp_path / "outside.txt").write_text("secret\n")
    os.symlink(tmp_path / "outside.txt", ws / "escape.txt")
    os.symlink("/etc", ws / "etc-link")
    os.symlink("src/pkg", ws / "pkg-link")
    os.symlink(".git", ws / "git-link")
    return ws


@pytest.mark.parametrize(
    ("rel", "expected"),
    [
        ("src/pkg/mod.py", "src/pkg/mod.py"),
        ("./src/../src/pkg/mod.py", "src/pkg/mod.py"),
        ("src/pkg/new.py", "src/pkg/new.py"),
        ("new/dir/file.txt", "new/dir/file.txt"),
        ("pkg-link/mod.py", "src/pkg/mod.py"),
        (".", "."),
        ("", "."),
        ("pkg-link", "pkg-link"),
        (".gitignore", ".gitignore"),
        (".github/workflows/ci.yml", ".github/workflows/ci.yml"),
    ],
)
def test_paths_inside_the_workspace_resolve(root: Path, rel: str, expected: str) -> None:
    resolved = resolve_inside(root, rel)
    assert resolved == (root.resolve() / expected if expected != "." else root.resolve())


def test_an_absolute_path_inside_the_workspace_is_accepted(root: Path) -> None:
    assert resolve_inside(root, str(root / "src/pkg/mod.py")) == root / "src/pkg/mod.py"


@pytest.mark.parametrize(
    ("rel", "reason"),
    [
        ("../outside.txt", "leaves the workspace through '..'"),
        ("src/../../outside.txt", "leaves the workspace through '..'"),
        ("/etc/passwd", "absolute paths outside the workspace"),
        ("escape.txt", "symbolic link on this path points outside"),
        ("etc-link/passwd", "symbolic link on this path points outside"),
        (".git/config", ".git directory is off limits"),
        ("src/../.git/config", ".git directory is off limits"),
        (".GIT/config", ".git directory is off limits"),
        ("sub/.git/hooks/pre-commit", ".git directory is off limits"),
        ("git-link/config", "points into .git"),
        ("git-link", "points into .git"),
        ("a\0b", "NUL"),
    ],
)
def test_escapes_are_refused_with_a_reason(root: Path, rel: str, reason: str) -> None:
    with pytest.raises(PathRefused, match=reason.replace(".", r"\.").replace("(", r"\(")):
        resolve_inside(root, rel)


def test_an_absolute_path_given_through_the_unresolved_root_is_accepted(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    os.symlink(real, tmp_path / "alias")
    assert resolve_inside(tmp_path / "alias", str(tmp_path / "alias" / "f.txt")) == real / "f.txt"


def test_ensure_size_refuses_files_over_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "big.bin"
    path.write_bytes(b"x" * 101)
    assert ensure_size(path, 101) == 101
    with pytest.raises(
        PathRefused, match=r"big\.bin: the file is 101 bytes, over the limit of 100"
    ):
        ensure_size(path, 100)
