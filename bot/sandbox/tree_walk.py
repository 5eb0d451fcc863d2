"""Walking and removing a folder tree without recursion.

A repository may nest folders deeper than Python's recursion limit (1,000 frames), and
in Python 3.11 ``os.walk``, ``Path.rglob`` and ``shutil.rmtree`` recurse once per
level: every walk over such a clone failed with ``RecursionError``, so every task on
the repository did. ``walk`` and ``remove_tree`` keep their own stack instead, follow
no link, and hold one folder open at a time (a tree deeper than the open-file limit is
removed too); paths are never longer than the walk's own (``remove_tree`` goes by
folder descriptors, never by a path longer than a name).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def walk(top: str | Path) -> Iterator[tuple[str, list[str], list[str]]]:
    """``os.walk(top)`` (top-down, links not followed, unreadable folders skipped) with a
    stack of its own: each folder's path, its folders and its other entries; prune the
    folders list in place to skip some."""
    stack = [os.fspath(top)]
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as found:
                entries = list(found)
        except OSError:
            continue
        dirs: list[str] = []
        files: list[str] = []
        for entry in entries:
            try:
                is_dir = entry.is_dir()  # a link to a folder is listed as one, as os.walk does
            except OSError:
                is_dir = False
            (dirs if is_dir else files).append(entry.name)
        yield folder, dirs, files
        for name in reversed(dirs):
            path = os.path.join(folder, name)
            if not os.path.islink(path):
                stack.append(path)


def remove_tree(
    path: str | Path, *, dir_fd: int | None = None, ignore_errors: bool = False
) -> None:
    """Remove ``path`` (relative to ``dir_fd`` when given) and all it holds, never through
    a link; raises ``OSError`` unless ``ignore_errors``."""
    try:
        _remove_tree(os.fspath(path), dir_fd)
    except OSError:
        if not ignore_errors:
            raise


def _remove_tree(name: str, dir_fd: int | None) -> None:
    try:
        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(info.st_mode):
        os.unlink(name, dir_fd=dir_fd)
        return
    fd = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    # the names from the top folder down to the open one, and each level's folders left
    names: list[str] = []
    pending: list[list[str]] = [_empty_files(fd)]
    try:
        while True:
            if pending[-1]:
                child = pending[-1].pop()
                inner = os.open(child, _DIR_FLAGS, dir_fd=fd)
                os.close(fd)
                fd = inner
                names.append(child)
                pending.append(_empty_files(fd))
                continue
            pending.pop()
            if not names:
                break
            parent = os.open("..", _DIR_FLAGS, dir_fd=fd)  # the real parent, never a link
            os.close(fd)
            fd = parent
            os.rmdir(names.pop(), dir_fd=fd)
    finally:
        os.close(fd)
    os.rmdir(name, dir_fd=dir_fd)


def _empty_files(fd: int) -> list[str]:
    """Unlink every entry of the open folder ``fd`` that is not a folder; its folders."""
    folders = []
    with os.scandir(fd) as found:
        entries = list(found)
    for entry in entries:
        if entry.is_dir(follow_symlinks=False):
            folders.append(entry.name)
        else:
            os.unlink(entry.name, dir_fd=fd)
    return folders
