"""What one workflow run keeps for the next: the task's store, history, run directory and
the workspace of a task that rests (waits, is paused, was cut short).

A run ends with ``pack(data_dir, out)``; the folder ``out`` is what a ``StateCarrier``
keeps (on a runner: an artifact of the run, uploaded by ``action.yml``; in a test: a
folder). The next run of the same issue asks its carrier to ``fetch`` it and
``unpack``s it into its fresh data directory, so the task resumes from its checkpoint.

    out/
      runs/<task>/...            the run directory, as plain files people can read
      planning_history/*.jsonl   the planning history
      state.tar.gz               bot.sqlite3 (a consistent copy) and workspaces/<task>/
                                 of resting tasks (a tar keeps file modes and links)

Nothing outside those names is read back; links are never followed when packing (a
link in a run directory could point anywhere on the runner) and never created outside
the data directory when unpacking (``tarfile``'s ``data`` filter).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import stat
import tarfile
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

from bot.sandbox.tree_walk import remove_tree, walk
from bot.storage.sqlite import DB_FILENAME

STATE_ARCHIVE = "state.tar.gz"
PLAIN_DIRS = ("runs", "planning_history")
WORKSPACES = "workspaces"
MAX_WORKSPACE_BYTES = 512 << 20  # a resting task's workspace larger than this is not kept
MAX_UNPACKED_BYTES = 4 << 30  # what one archive may unpack to


class StateError(Exception):
    """The kept state cannot be read back; the message says why."""


def artifact_name(issue: int) -> str:
    """The name the state of one issue (or pull request) is kept under."""
    return f"coding-agent-state-{issue}"


class StateCarrier(Protocol):
    """Carries a packed state folder from one workflow run of an issue to the next."""

    async def fetch(self, issue: int, into: Path) -> str | None:
        """Put the newest kept state of ``issue`` into the empty folder ``into``; what it
        was (for the summary), or None when there is none."""
        ...

    async def keep(self, issue: int, packed: Path) -> str:
        """Keep the folder ``packed`` for the next run of ``issue``; where, in words."""
        ...


class FolderCarrier:
    """Kept state in a folder of this machine (``bot action`` outside a runner, tests)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    async def fetch(self, issue: int, into: Path) -> str | None:
        kept = self.root / artifact_name(issue)
        if not kept.is_dir():
            return None
        shutil.copytree(kept, into, symlinks=True, dirs_exist_ok=True)
        return f"folder {kept}"

    async def keep(self, issue: int, packed: Path) -> str:
        target = self.root / artifact_name(issue)
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(packed, target, symlinks=True)
        return f"folder {target}"


# --- packing ---------------------------------------------------------------------------------


def pack(data_dir: Path, out: Path, *, workspaces: Iterable[str] = ()) -> list[str]:
    """Write what to keep of ``data_dir`` into the empty folder ``out`` (made here); the
    workspaces of ``workspaces`` (task ids) when they are small enough. Returns notes on
    what was left out. Call it after the store is closed."""
    remove_tree(out, ignore_errors=True)
    out.mkdir(parents=True)
    for name in PLAIN_DIRS:
        _copy_files(data_dir / name, out / name)
    notes: list[str] = []
    with tarfile.open(out / STATE_ARCHIVE, "w:gz") as archive:
        database = data_dir / DB_FILENAME
        if database.is_file():
            copy = out / f".{DB_FILENAME}"
            _backup(database, copy)
            archive.add(copy, arcname=DB_FILENAME)
            copy.unlink()
        for task_id in workspaces:
            folder = data_dir / WORKSPACES / task_id
            if not folder.is_dir() or folder.is_symlink():
                continue
            size = _size(folder)
            if size > MAX_WORKSPACE_BYTES:
                notes.append(f"the workspace of task {task_id} ({size >> 20} MB) is not kept: "
                             "its next run starts from the branch it pushed")  # fmt: skip
                continue
            archive.add(folder, arcname=f"{WORKSPACES}/{task_id}")
    return notes


def _backup(source: Path, target: Path) -> None:
    """A consistent copy of a SQLite database (the write-ahead log included)."""
    with (
        contextlib.closing(sqlite3.connect(source)) as src,
        contextlib.closing(sqlite3.connect(target)) as dst,
    ):
        src.backup(dst)


def _copy_files(source: Path, target: Path) -> None:
    """Regular files and folders of ``source`` into ``target``; links and special files
    are left out (never followed)."""
    if not source.is_dir() or source.is_symlink():
        return
    for folder, dirs, files in walk(source):  # no recursion: a workspace may nest deep
        here = Path(folder)
        dirs[:] = [d for d in dirs if not (here / d).is_symlink()]
        rel = here.relative_to(source)
        (target / rel).mkdir(parents=True, exist_ok=True)
        for name in files:
            path = here / name
            if path.is_file() and not path.is_symlink():
                shutil.copy2(path, target / rel / name, follow_symlinks=False)


def _size(folder: Path) -> int:
    total = 0
    for here, _dirs, files in walk(folder):
        for name in files:
            with contextlib.suppress(OSError):
                info = os.lstat(os.path.join(here, name))
                total += info.st_size if stat.S_ISREG(info.st_mode) else 0
    return total


# --- unpacking -------------------------------------------------------------------------------


def unpack(packed: Path, data_dir: Path) -> None:
    """Put a packed state back into ``data_dir`` (empty but for what this run made);
    ``StateError`` when the archive is not one of ours."""
    data_dir.mkdir(parents=True, exist_ok=True)
    for name in PLAIN_DIRS:
        _copy_files(packed / name, data_dir / name)
    archive = packed / STATE_ARCHIVE
    if not archive.is_file():
        return
    try:
        with tarfile.open(archive, "r:gz") as tar:
            members = _checked(tar.getmembers())
            tar.extractall(data_dir, members=members, filter="data")
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise StateError(f"the kept state cannot be unpacked: {exc}") from None


def _checked(members: list[tarfile.TarInfo]) -> list[tarfile.TarInfo]:
    """Only the store and workspaces/<task>/..., within the size bound."""
    total = 0
    for member in members:
        parts = Path(member.name).parts
        allowed = member.name == DB_FILENAME or (len(parts) >= 2 and parts[0] == WORKSPACES)
        if not allowed or ".." in parts or Path(member.name).is_absolute():
            raise StateError(f"the kept state holds an unexpected entry: {member.name!r}")
        total += max(0, member.size)
        if total > MAX_UNPACKED_BYTES:
            raise StateError(f"the kept state unpacks to over {MAX_UNPACKED_BYTES} bytes")
    return members
