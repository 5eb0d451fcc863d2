"""Copy and remove file trees without ever following a symbolic link.

Every step opens a name relative to a folder already open (``dir_fd``) with
``O_NOFOLLOW``, and everything written is new (``O_EXCL``, ``mkdir``): a link, a file
or a folder already at a path being written, or a link on the way to it, refuses the
copy (``TreeRefused``) before anything is written through it. Links in the copied tree
are copied as links (never followed); FIFOs, sockets and devices are left out. A copy
that fails removes what it made. Synchronous file work: call it in a thread.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
from collections.abc import Callable
from pathlib import Path, PurePosixPath

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
MAX_DEPTH = 256
CHUNK = 1 << 20
# (path relative to the copied top, its bytes) -> the bytes to write
Rewrite = Callable[[PurePosixPath, bytes], bytes]
Rewrites = Callable[[PurePosixPath], bool]


class TreeRefused(Exception):
    """The copy would go through a link or over something already there."""


def parts(rel: str) -> tuple[str, ...]:
    """The components of a relative path; raises TreeRefused for anything that leaves."""
    pure = PurePosixPath(rel)
    names = pure.parts
    if not names or pure.is_absolute() or any(n in ("", ".", "..") for n in names):
        raise TreeRefused(f"{rel!r} is not a path inside the tree")
    return names


def open_folder(root: Path, names: tuple[str, ...], *, create: bool) -> int:
    """An open descriptor of ``root/names...``, no component a link (made when
    ``create``). ``root`` itself is the bot's own path and is opened as it is."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for name in names:
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, 0o755, dir_fd=fd)
            try:
                inner = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise TreeRefused(f"{name}: a link or not a folder, on the way") from None
                raise
            os.close(fd)
            fd = inner
    except BaseException:
        os.close(fd)
        raise
    return fd


def copy_path(
    source_root: Path,
    rel: str,
    target_root: Path,
    *,
    rewrites: Rewrites | None = None,
    rewrite: Rewrite | None = None,
) -> None:
    """Copy ``source_root/rel`` to ``target_root/rel``; ``rewrite`` changes the bytes of
    the files ``rewrites`` names (paths relative to ``rel``'s top)."""
    names = parts(rel)
    source = open_folder(source_root, names[:-1], create=False)
    try:
        target = open_folder(target_root, names[:-1], create=True)
        try:
            _copy_top(source, target, names[-1], _Edits(rewrites, rewrite))
        finally:
            os.close(target)
    finally:
        os.close(source)


def remove_path(root: Path, rel: str) -> None:
    """Remove ``root/rel`` (a link itself, never what it points to); nothing when a link
    lies on the way or nothing is there."""
    names = parts(rel)
    try:
        parent = open_folder(root, names[:-1], create=False)
    except (TreeRefused, OSError):
        return
    try:
        _remove(parent, names[-1])
    finally:
        os.close(parent)


class _Edits:
    def __init__(self, rewrites: Rewrites | None, rewrite: Rewrite | None) -> None:
        self.rewrites = rewrites
        self.rewrite = rewrite

    def wanted(self, path: PurePosixPath) -> bool:
        return self.rewrite is not None and self.rewrites is not None and self.rewrites(path)


def _copy_top(source: int, target: int, name: str, edits: _Edits) -> None:
    try:
        _copy(source, target, name, PurePosixPath("."), edits, 0)
    except FileExistsError:
        raise TreeRefused(f"{name}: already there") from None
    except BaseException:
        _remove(target, name)  # made here: the name was free (O_EXCL) when the copy began
        raise


def _copy(source: int, target: int, name: str, rel: PurePosixPath, edits: _Edits,
          depth: int) -> None:  # fmt: skip
    if depth > MAX_DEPTH:
        raise TreeRefused(f"{rel}: folders nested too deep")
    info = os.stat(name, dir_fd=source, follow_symlinks=False)
    if stat.S_ISLNK(info.st_mode):
        os.symlink(os.readlink(name, dir_fd=source), name, dir_fd=target)
    elif stat.S_ISDIR(info.st_mode):
        os.mkdir(name, 0o700, dir_fd=target)
        inner_source = os.open(name, _DIR_FLAGS, dir_fd=source)
        try:
            inner_target = os.open(name, _DIR_FLAGS, dir_fd=target)
            try:
                for child in sorted(os.listdir(inner_source)):
                    _copy(inner_source, inner_target, child, rel / child, edits, depth + 1)
                os.chmod(inner_target, stat.S_IMODE(info.st_mode) & 0o777)
                os.utime(inner_target, ns=(info.st_atime_ns, info.st_mtime_ns))
            finally:
                os.close(inner_target)
        finally:
            os.close(inner_source)
    elif stat.S_ISREG(info.st_mode):
        _copy_file(source, target, name, info, rel, edits)


def _copy_file(source: int, target: int, name: str, info: os.stat_result,
               rel: PurePosixPath, edits: _Edits) -> None:  # fmt: skip
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    reader = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=source)
    try:
        writer = os.open(name, flags, 0o600, dir_fd=target)
        try:
            if edits.wanted(rel) and edits.rewrite is not None:
                data = edits.rewrite(rel, _read_all(reader))
                _write_all(writer, data)
            else:
                _pump(reader, writer, info.st_size)
            os.fchmod(writer, stat.S_IMODE(info.st_mode) & 0o777)
            os.utime(writer, ns=(info.st_atime_ns, info.st_mtime_ns))
        finally:
            os.close(writer)
    finally:
        os.close(reader)


def _pump(reader: int, writer: int, size: int) -> None:
    """Copy the whole file, in the kernel where it can."""
    try:
        left = size
        while left > 0:
            sent = os.copy_file_range(reader, writer, min(left, 1 << 30))
            if sent == 0:
                break
            left -= sent
        else:
            return
    except OSError as exc:
        if exc.errno not in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
            raise
    while chunk := os.read(reader, CHUNK):  # the rest (or all) the plain way
        _write_all(writer, chunk)


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, CHUNK):
        chunks.append(chunk)
    return b"".join(chunks)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _remove(parent: int, name: str) -> None:
    try:
        info = os.stat(name, dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(info.st_mode):
        shutil.rmtree(name, dir_fd=parent, ignore_errors=True)  # fd-based: never follows
    else:
        os.unlink(name, dir_fd=parent)
