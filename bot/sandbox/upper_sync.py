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
import json
import os
import resource
import secrets
import shutil
import stat
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

OPAQUE = "user.overlay.opaque"
MAX_DEPTH = 256
_CHUNK = 1 << 20
_MAX_ERRORS = 20
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


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
            if _remove(dst, name):
                self.summary.removed += 1

    def folder(
        self, src: int, dst: int, name: str, path: str, info: os.stat_result, depth: int
    ) -> None:
        if depth >= MAX_DEPTH:
            self.summary.error(path, f"not kept: more than {MAX_DEPTH} folders deep")
            return
        sub_src = _open_layer_dir(src, name)
        try:
            opaque = _is_opaque(sub_src)
            sub_dst = _folder_on_disk(dst, name, replace=opaque)
            try:
                self.merge(sub_src, sub_dst, path, depth + 1)
                os.chmod(sub_dst, stat.S_IMODE(info.st_mode) & 0o777)
                os.utime(sub_dst, ns=(info.st_atime_ns, info.st_mtime_ns))
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
        self.place(dst, name, lambda tmp: _copy_file(src, name, dst, tmp, info))
        self.summary.files += 1
        if info.st_nlink > 1:
            self.links[info.st_ino] = path

    def place(self, dst: int, name: str, make: Callable[[str], None]) -> None:
        """Make the entry under a temporary name, then rename it over ``name``."""
        tmp = f".bot-sync-{secrets.token_hex(6)}"
        try:
            make(tmp)
            old = _lstat(dst, name)
            if old is not None and stat.S_ISDIR(old.st_mode):
                _remove(dst, name)
            os.replace(tmp, name, src_dir_fd=dst, dst_dir_fd=dst)
        except BaseException:
            _remove(dst, tmp)
            raise


def _lstat(dir_fd: int, name: str) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def _remove(dir_fd: int, name: str) -> bool:
    old = _lstat(dir_fd, name)
    if old is None:
        return False
    if stat.S_ISDIR(old.st_mode):
        try:
            shutil.rmtree(name, dir_fd=dir_fd)
        except RecursionError:  # rmtree recurses per level (Python 3.11)
            raise OSError(f"{name}: folders nested too deep to remove here") from None
    else:
        os.unlink(name, dir_fd=dir_fd)
    return True


def _open_layer_dir(src: int, name: str) -> int:
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=src)
    except PermissionError:  # the command took its own rights away: the layer is ours
        os.chmod(name, 0o700, dir_fd=src)
        return os.open(name, _DIR_FLAGS, dir_fd=src)


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
    old = _lstat(dst, name)
    if old is not None and (replace or not stat.S_ISDIR(old.st_mode)):
        _remove(dst, name)
        old = None
    if old is None:
        os.mkdir(name, 0o700, dir_fd=dst)
    fd = os.open(name, _DIR_FLAGS, dir_fd=dst)
    with contextlib.suppress(PermissionError):  # not ours: writing in it may still work
        os.chmod(fd, 0o700 | stat.S_IMODE(os.fstat(fd).st_mode))
    return fd


def _copy_file(src: int, name: str, dst: int, tmp: str, info: os.stat_result) -> None:
    try:
        source = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=src)
    except PermissionError:
        os.chmod(name, 0o600, dir_fd=src)
        source = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=src)
    try:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        target = os.open(tmp, flags, 0o600, dir_fd=dst)
        try:
            _copy_data(source, target, info.st_size)
            os.chmod(target, stat.S_IMODE(info.st_mode) & 0o777)
            os.utime(target, ns=(info.st_atime_ns, info.st_mtime_ns))
        finally:
            os.close(target)
    finally:
        os.close(source)


def _copy_data(source: int, target: int, size: int) -> None:
    """Copy only the data, hole by hole: a sparse file stays sparse."""
    offset = 0
    while offset < size:
        try:
            data = os.lseek(source, offset, os.SEEK_DATA)
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # nothing but a hole up to the end
                break
            raise
        hole = os.lseek(source, data, os.SEEK_HOLE)
        os.lseek(source, data, os.SEEK_SET)
        os.lseek(target, data, os.SEEK_SET)
        left = hole - data
        while left > 0:
            chunk = os.read(source, min(_CHUNK, left))
            if not chunk:
                break
            os.write(target, chunk)
            left -= len(chunk)
        offset = hole
    os.ftruncate(target, size)


def apply(upper: int, root: str) -> Summary:
    root_fd = os.open(root, _DIR_FLAGS)
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
