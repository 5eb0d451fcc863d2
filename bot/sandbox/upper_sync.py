"""Apply the upper layer of a command's overlay to the workspace on disk.

Run by ``overlay_session`` as ``python -I upper_sync.py UPPER_FD ROOT`` once the sandbox
is gone (nothing else changes either tree meanwhile); prints a JSON summary. Standard
library only: it runs by path, outside the package.

The layer is what the command made of the workspace (overlayfs, ``userxattr`` form):

- a file or a symbolic link: the whole new content (copied up when changed);
- a character device 0/0: a whiteout, the path was deleted (no other device can be made
  in the sandbox); a FIFO or a socket: made anew (they hold no content);
- a folder with ``user.overlay.opaque=y``: it replaces whatever was there; any other
  folder is merged with the one on disk.

The layer is the command's, so it is hostile input: nothing on disk is followed through
a link (every folder is opened relative to its parent with ``O_NOFOLLOW``), ``.git`` at
the top is never written (the command saw it read-only anyway), hard links stay links
and sparse files stay sparse (either copied out in full could multiply what the tmpfs
bounded), no device is created, permissions keep only the ``rwx`` bits, and an entry
replaces the old one by a rename, never by writing through it.
"""

from __future__ import annotations

import contextlib
import errno
import importlib.util
import json
import os
import resource
import secrets
import stat
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING


def _beside(name: str) -> ModuleType:
    """The module ``name`` in this file's folder, loaded by its path (run by path with
    ``-I``, the bot's package is not what this process imports)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"_bot_{name}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path}: cannot be loaded")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


if TYPE_CHECKING or __package__:
    from bot.sandbox import safe_tree
else:
    safe_tree = _beside("safe_tree")  # the one link-safe copy and removal

OPAQUE = "user.overlay.opaque"
MAX_DEPTH = safe_tree.MAX_DEPTH
_MAX_ERRORS = 20


@dataclass
class Summary:
    files: int = 0
    removed: int = 0
    errors: list[str] = field(default_factory=list)

    def error(self, where: str, exc: BaseException | str) -> None:
        if len(self.errors) < _MAX_ERRORS:
            self.errors.append(f"{where or '.'}: {exc}")


@dataclass
class _Sync:
    root: int
    summary: Summary = field(default_factory=Summary)
    links: dict[int, str] = field(default_factory=dict)  # layer inode -> first path written

    def merge(self, src: int, dst: int, rel: str, depth: int) -> None:
        for name in sorted(os.listdir(src)):
            path = f"{rel}/{name}" if rel else name
            if not rel and name == ".git":
                continue
            try:
                self.entry(src, dst, name, path, depth)
            except OSError as exc:
                self.summary.error(path, exc.strerror or exc)

    def entry(self, src: int, dst: int, name: str, path: str, depth: int) -> None:
        info = os.stat(name, dir_fd=src, follow_symlinks=False)
        mode = info.st_mode
        if stat.S_ISDIR(mode):
            self.folder(src, dst, name, path, info, depth)
        elif stat.S_ISREG(mode):
            self.file(src, dst, name, path, info)
        elif stat.S_ISLNK(mode):
            target = os.readlink(name, dir_fd=src)
            self.place(dst, name, lambda tmp: os.symlink(target, tmp, dir_fd=dst))
        elif stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):  # no content: made anew
            kind = stat.S_IFMT(mode) | (stat.S_IMODE(mode) & 0o777)
            self.place(dst, name, lambda tmp: os.mknod(tmp, kind, dir_fd=dst))
        else:  # a whiteout (a device 0/0: nothing else can be made in the sandbox)
            if safe_tree.remove(dst, name):
                self.summary.removed += 1

    def folder(
        self, src: int, dst: int, name: str, path: str, info: os.stat_result, depth: int
    ) -> None:
        if depth >= MAX_DEPTH:
            self.summary.error(path, f"not kept: more than {MAX_DEPTH} folders deep")
            return
        sub_src = safe_tree.open_dir(src, name, claim=True)
        try:
            opaque = _is_opaque(sub_src)
            sub_dst = _folder_on_disk(dst, name, replace=opaque)
            try:
                self.merge(sub_src, sub_dst, path, depth + 1)
                safe_tree.keep_mode(sub_dst, info)
            finally:
                os.close(sub_dst)
        finally:
            os.close(sub_src)

    def file(self, src: int, dst: int, name: str, path: str, info: os.stat_result) -> None:
        first = self.links.get(info.st_ino) if info.st_nlink > 1 else None
        if first is not None:
            self.place(dst, name, lambda tmp: os.link(
                first, tmp, src_dir_fd=self.root, dst_dir_fd=dst, follow_symlinks=False
            ))  # fmt: skip
            return
        self.place(
            dst, name, lambda tmp: safe_tree.copy_file(src, name, dst, tmp, info, claim=True)
        )
        self.summary.files += 1
        if info.st_nlink > 1:
            self.links[info.st_ino] = path

    def place(self, dst: int, name: str, make: Callable[[str], None]) -> None:
        """Make the entry under a temporary name, then rename it over ``name``."""
        tmp = f".bot-sync-{secrets.token_hex(6)}"
        try:
            make(tmp)
            old = safe_tree.lstat(dst, name)
            if old is not None and stat.S_ISDIR(old.st_mode):
                safe_tree.remove(dst, name)
            os.replace(tmp, name, src_dir_fd=dst, dst_dir_fd=dst)
        except BaseException:
            safe_tree.remove(dst, tmp)
            raise


def _is_opaque(fd: int) -> bool:
    try:
        return os.getxattr(fd, OPAQUE) == b"y"
    except OSError as exc:
        if exc.errno in (errno.ENODATA, errno.ENOTSUP):
            return False
        raise


def _folder_on_disk(dst: int, name: str, *, replace: bool) -> int:
    """The folder ``name`` on disk, opened without following a link: the existing one
    (writable for us meanwhile), or a new one in place of whatever was there."""
    old = safe_tree.lstat(dst, name)
    if old is not None and (replace or not stat.S_ISDIR(old.st_mode)):
        safe_tree.remove(dst, name)
        old = None
    if old is None:
        os.mkdir(name, 0o700, dir_fd=dst)
    fd = safe_tree.open_dir(dst, name)
    with contextlib.suppress(PermissionError):  # not ours: writing in it may still work
        os.chmod(fd, 0o700 | stat.S_IMODE(os.fstat(fd).st_mode))
    return fd


def apply(upper: int, root: str) -> Summary:
    root_fd = os.open(root, safe_tree.DIR_FLAGS)
    try:
        sync = _Sync(root_fd)
        sync.merge(upper, root_fd, "", 0)
        return sync.summary
    finally:
        os.close(root_fd)


def main(argv: list[str]) -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)  # two per folder level
    wanted = 4 * MAX_DEPTH + 64
    if soft != resource.RLIM_INFINITY and soft < wanted:
        top = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (top, hard))
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 4 * MAX_DEPTH + 100))
    summary = apply(int(argv[1]), argv[2])
    print(json.dumps({"files": summary.files, "removed": summary.removed,
                      "errors": summary.errors}))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
