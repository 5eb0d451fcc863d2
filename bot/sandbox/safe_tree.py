"""Copy and remove file trees without ever following a symbolic link.

Every step opens a name relative to a folder already open (``dir_fd``) with
``O_NOFOLLOW``, and everything written is new (``O_EXCL``, ``mkdir``): a link, a file
or a folder already at a path being written, or a link on the way to it, refuses the
copy (``TreeRefused``) before anything is written through it. Links in the copied tree
are copied as links (never followed); FIFOs, sockets and devices are left out. A copy
that fails removes what it made. Synchronous file work: call it in a thread.

The one link-safe copy and removal of the sandbox: ``copy_file``, ``remove``,
``open_dir`` and ``lstat`` also serve ``upper_sync.py``, which runs by path in a process
of its own and loads this file beside it. Standard library only, therefore.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import shutil
import stat
from collections.abc import Callable
from pathlib import Path, PurePosixPath

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
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
                inner = os.open(name, DIR_FLAGS, dir_fd=fd)
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
        with contextlib.suppress(OSError):
            remove(parent, names[-1])
    finally:
        os.close(parent)


class _Edits:
    def __init__(self, rewrites: Rewrites | None, rewrite: Rewrite | None) -> None:
        self.rewrites = rewrites
        self.rewrite = rewrite

    def of(self, path: PurePosixPath) -> Callable[[bytes], bytes] | None:
        """What changes the bytes of ``path``, if anything does."""
        if self.rewrite is None or self.rewrites is None or not self.rewrites(path):
            return None
        return functools.partial(self.rewrite, path)


def _copy_top(source: int, target: int, name: str, edits: _Edits) -> None:
    try:
        _copy(source, target, name, PurePosixPath("."), edits, 0)
    except FileExistsError:
        raise TreeRefused(f"{name}: already there") from None
    except BaseException:
        with contextlib.suppress(OSError):  # made here: the name was free (O_EXCL) at first
            remove(target, name)
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
        inner_source = os.open(name, DIR_FLAGS, dir_fd=source)
        try:
            inner_target = os.open(name, DIR_FLAGS, dir_fd=target)
            try:
                for child in sorted(os.listdir(inner_source)):
                    _copy(inner_source, inner_target, child, rel / child, edits, depth + 1)
                keep_mode(inner_target, info)
            finally:
                os.close(inner_target)
        finally:
            os.close(inner_source)
    elif stat.S_ISREG(info.st_mode):
        copy_file(source, name, target, name, info, edit=edits.of(rel))


def keep_mode(fd: int, info: os.stat_result) -> None:
    """Give the open ``fd`` the ``rwx`` bits (no set-id, no sticky bit) and times of ``info``."""
    os.fchmod(fd, stat.S_IMODE(info.st_mode) & 0o777)
    os.utime(fd, ns=(info.st_atime_ns, info.st_mtime_ns))


def lstat(dir_fd: int, name: str) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def remove(dir_fd: int, name: str) -> bool:
    """Remove ``name`` under ``dir_fd`` (a link itself, a folder with all it holds,
    never following a link); False when nothing is there."""
    old = lstat(dir_fd, name)
    if old is None:
        return False
    if stat.S_ISDIR(old.st_mode):
        try:
            shutil.rmtree(name, dir_fd=dir_fd)  # fd-based: never follows
        except RecursionError:  # rmtree recurses per level (Python 3.11)
            raise OSError(f"{name}: folders nested too deep to remove here") from None
    else:
        os.unlink(name, dir_fd=dir_fd)
    return True


def open_dir(dir_fd: int, name: str, *, claim: bool = False) -> int:
    """The folder ``name`` under ``dir_fd``, never through a link; ``claim``: a folder
    without rights for us is ours to read (a layer the bot owns) and gets them."""
    try:
        return os.open(name, DIR_FLAGS, dir_fd=dir_fd)
    except PermissionError:
        if not claim:
            raise
        os.chmod(name, 0o700, dir_fd=dir_fd)
        return os.open(name, DIR_FLAGS, dir_fd=dir_fd)


def copy_file(
    src: int,
    name: str,
    dst: int,
    new: str,
    info: os.stat_result,
    *,
    claim: bool = False,
    edit: Callable[[bytes], bytes] | None = None,
) -> None:
    """Copy the file ``name`` under ``src`` to a new file ``new`` under ``dst`` (which
    must not exist: ``O_EXCL``), neither end followed through a link; the ``rwx`` bits
    and times of ``info`` kept, holes kept (a sparse file stays sparse), in the kernel
    where it can. ``edit`` changes the bytes; ``claim`` as for ``open_dir``."""
    try:
        reader = os.open(name, _READ_FLAGS, dir_fd=src)
    except PermissionError:
        if not claim:
            raise
        os.chmod(name, 0o600, dir_fd=src)
        reader = os.open(name, _READ_FLAGS, dir_fd=src)
    try:
        writer = os.open(new, _NEW_FLAGS, 0o600, dir_fd=dst)
        try:
            if edit is not None:
                _write_all(writer, edit(_read_all(reader)), 0)
            else:
                _copy_data(reader, writer, info)
            keep_mode(writer, info)
        finally:
            os.close(writer)
    finally:
        os.close(reader)


def _copy_data(reader: int, writer: int, info: os.stat_result) -> None:
    size = info.st_size
    if info.st_blocks * 512 >= size:  # no hole: one range, no seeking
        _copy_range(reader, writer, 0, size)
        return
    offset = 0
    while offset < size:
        try:
            data = os.lseek(reader, offset, os.SEEK_DATA)
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # nothing but a hole up to the end
                break
            raise
        offset = min(os.lseek(reader, data, os.SEEK_HOLE), size)
        _copy_range(reader, writer, data, offset)
    os.ftruncate(writer, size)


def _copy_range(reader: int, writer: int, start: int, end: int) -> None:
    """Copy bytes ``start`` to ``end`` at the same place, in the kernel where it can."""
    try:
        while start < end:
            sent = os.copy_file_range(reader, writer, end - start, start, start)
            if sent == 0:
                return
            start += sent
        return
    except OSError as exc:
        if exc.errno not in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
            raise
    while start < end and (chunk := os.pread(reader, min(CHUNK, end - start), start)):
        start = _write_all(writer, chunk, start)


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, CHUNK):
        chunks.append(chunk)
    return b"".join(chunks)


def _write_all(fd: int, data: bytes, offset: int) -> int:
    view = memoryview(data)
    while view:
        done = os.pwrite(fd, view, offset)
        view, offset = view[done:], offset + done
    return offset
