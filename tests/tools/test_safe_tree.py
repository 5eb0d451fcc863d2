"""The one link-safe copy (``bot/sandbox/safe_tree.py``), as the set-up cache and the
overlay's sync (``upper_sync.py``, run by path) both use it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from bot.sandbox import safe_tree
from bot.sandbox.overlay_session import SYNC_SCRIPT

HOLE = 64 << 20


def test_a_sparse_file_stays_sparse_and_equal(tmp_path: Path) -> None:
    source = tmp_path / "source" / "env"
    source.mkdir(parents=True)
    sparse = source / "sparse.bin"
    with sparse.open("wb") as out:
        out.write(b"head")
        out.seek(HOLE)
        out.write(b"tail")
    (source / "plain.txt").write_bytes(b"x" * 100_000)
    os.chmod(source / "plain.txt", 0o500)
    (tmp_path / "copy").mkdir()
    safe_tree.copy_path(tmp_path / "source", "env", tmp_path / "copy")
    copy = tmp_path / "copy" / "env"
    assert (copy / "sparse.bin").read_bytes() == sparse.read_bytes()
    assert (copy / "sparse.bin").stat().st_blocks * 512 < 1 << 20  # not 64 MiB on disk
    assert (copy / "plain.txt").read_bytes() == b"x" * 100_000
    assert (copy / "plain.txt").stat().st_mode & 0o777 == 0o500


def test_a_file_is_never_written_through_a_link(tmp_path: Path) -> None:
    (tmp_path / "source" / "env").mkdir(parents=True)
    (tmp_path / "source" / "env" / "f").write_text("new")
    outside = tmp_path / "outside"
    outside.write_text("mine")
    (tmp_path / "copy" / "env").mkdir(parents=True)
    (tmp_path / "copy" / "env" / "f").symlink_to(outside)
    src = os.open(tmp_path / "source" / "env", os.O_RDONLY | os.O_DIRECTORY)
    dst = os.open(tmp_path / "copy" / "env", os.O_RDONLY | os.O_DIRECTORY)
    try:
        info = os.stat("f", dir_fd=src)
        try:
            safe_tree.copy_file(src, "f", dst, "f", info)
        except FileExistsError:
            pass
        else:
            raise AssertionError("copied over a link")
    finally:
        os.close(src)
        os.close(dst)
    assert outside.read_text() == "mine"


def test_the_sync_script_runs_by_path_on_the_module_beside_it(tmp_path: Path) -> None:
    """``python -I upper_sync.py`` (no bot on its path) copies with ``safe_tree``."""
    folder = tmp_path / "script"
    folder.mkdir()
    script = folder / SYNC_SCRIPT.name
    script.write_bytes(SYNC_SCRIPT.read_bytes())
    upper, root = tmp_path / "upper", tmp_path / "root"
    (upper / "pkg").mkdir(parents=True)
    (upper / "pkg" / "a.txt").write_text("made")
    root.mkdir()
    fd = os.open(upper, os.O_RDONLY | os.O_DIRECTORY)
    try:
        lone = _sync(script, fd, root)
        assert lone.returncode != 0 and "safe_tree" in lone.stderr  # nothing of its own
        script.with_name("safe_tree.py").write_bytes(Path(safe_tree.__file__).read_bytes())
        done = _sync(script, fd, root)
    finally:
        os.close(fd)
    assert done.returncode == 0, done.stderr
    assert '"files": 1' in done.stdout
    assert (root / "pkg" / "a.txt").read_text() == "made"


def _sync(script: Path, fd: int, root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-I", str(script), str(fd), str(root)],
        pass_fds=(fd,), capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
