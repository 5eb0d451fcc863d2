"""The path guard: every workspace path the agent names goes through ``resolve_inside``.

A path is refused when it leaves the workspace (``..``, an absolute path elsewhere, a
symbolic link pointing outside), when it names the repository metadata (``.git``,
which holds the remote, hooks and configuration git would execute), or, through
``ensure_size``, when the file is too big to handle. The refusal message says why,
so the agent can correct itself.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path, PurePosixPath


class PathRefused(Exception):
    """The path may not be used; the message says why."""


class TooLarge(PathRefused):
    """The file is over the size limit."""

    def __init__(self, name: str, size: int, limit: int) -> None:
        super().__init__(f"{name}: the file is {size} bytes, over the limit of {limit} bytes")
        self.name = name
        self.size = size
        self.limit = limit

    def __reduce__(self) -> tuple[type[TooLarge], tuple[str, int, int]]:
        # Raised in an offload worker process and re-raised here: pickled by its arguments.
        return (TooLarge, (self.name, self.size, self.limit))


def _is_git_dir(parts: tuple[str, ...]) -> bool:
    return any(part.casefold() == ".git" for part in parts)


def _inside(path: Path, root: Path) -> bool:
    return path == root or path.is_relative_to(root)


def resolve_inside(root: Path, rel: str) -> Path:
    """The real location of ``rel`` inside ``root``; raises ``PathRefused`` otherwise.

    The parent directories are resolved (symbolic links followed); the last component
    is kept as named, so deleting or moving a link acts on the link itself, but a link
    whose target lies outside the workspace (or in ``.git``) is refused as well.
    """
    if "\0" in rel:
        raise PathRefused(f"{rel!r}: the path contains a NUL character")
    real_root = root.resolve()
    raw = rel.strip() or "."
    pure = PurePosixPath(raw)
    if pure.is_absolute():
        pure = _relative_to_root(rel, Path(os.path.normpath(raw)), root, real_root)
    if ".." in pure.parts and not _inside(Path(os.path.normpath(real_root / pure)), real_root):
        raise PathRefused(f"{rel}: the path leaves the workspace through '..'")
    if _is_git_dir(pure.parts):
        raise PathRefused(f"{rel}: the .git directory is off limits (repository metadata)")
    lexical = Path(os.path.normpath(real_root / pure))
    if lexical == real_root:
        return real_root
    parent = lexical.parent.resolve()
    candidate = parent / lexical.name
    _check_real(rel, candidate.resolve(), real_root)
    _check_real(rel, parent, real_root)
    return candidate


def _relative_to_root(rel: str, absolute: Path, root: Path, real_root: Path) -> PurePosixPath:
    for base in (Path(os.path.abspath(root)), real_root):
        if _inside(absolute, base):
            return PurePosixPath(absolute.relative_to(base).as_posix())
    raise PathRefused(f"{rel}: absolute paths outside the workspace are not allowed")


def _check_real(rel: str, real: Path, real_root: Path) -> None:
    if not _inside(real, real_root):
        raise PathRefused(
            f"{rel}: a symbolic link on this path points outside the workspace ({real})"
        )
    if _is_git_dir(real.relative_to(real_root).parts):
        raise PathRefused(f"{rel}: a symbolic link on this path points into .git")


def ensure_size(path: Path, max_bytes: int, *, shown_as: str = "") -> int:
    """The size of ``path``; raises ``PathRefused`` when it is over ``max_bytes``."""
    size = path.stat().st_size
    if size > max_bytes:
        raise PathRefused(
            f"{shown_as or path.name}: the file is {size} bytes, over the limit of "
            f"{max_bytes} bytes"
        )
    return size


def read_regular(path: Path, max_bytes: int, *, shown_as: str = "") -> bytes:
    """The bytes of ``path`` if it is a regular file of at most ``max_bytes``.

    A FIFO, socket or device in the workspace (``mkfifo`` in a command, a repository's
    tests) would block ``open()`` or ``read()`` for ever, holding a worker thread: it is
    opened non-blocking and refused unless it is a regular file."""
    name = shown_as or path.name
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise PathRefused(f"{name}: cannot be read ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise PathRefused(f"{name}: not a regular file (a FIFO, socket or device)")
        if info.st_size > max_bytes:
            raise TooLarge(name, info.st_size, max_bytes)
        return handle.read(max_bytes + 1)[: max_bytes + 1]


def ensure_writable(path: Path, *, shown_as: str = "") -> None:
    """Refuse to write through anything but a regular file or a new name: opening a FIFO
    for writing blocks until someone reads it."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISREG(mode):
        raise PathRefused(f"{shown_as or path.name}: not a regular file; not written")
