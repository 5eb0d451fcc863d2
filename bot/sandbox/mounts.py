"""The mounts of one sandboxed command as they are on this machine: which of the secret
folders and files exist and are hidden, the bot's own paths hidden, the toolchains shown
read-only, the workspace's ``.git`` read-only inside it (``bwrap.Mounts``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from bot.sandbox.bwrap import SECRET_DIRS, SECRET_FILES, Mounts


def command_mounts(
    writable: Path,
    *,
    hide: Sequence[Path],
    expose: Sequence[Path],
    tmp_bytes: int,
    shm_bytes: int,
    overlay_info_fd: int | None = None,
) -> Mounts:
    """What one command's sandbox hides (the secret folders and files that exist here, and
    ``hide``) and shows (the workspace, ``expose`` where it exists)."""
    dirs = [Path(d) for d in SECRET_DIRS] + [Path.home()] + list(hide)
    files = [Path(f) for f in SECRET_FILES] + sorted(Path("/etc/ssh").glob("ssh_host_*key"))
    files += list(hide)
    hide_dirs = tuple(dict.fromkeys(d for d in dirs if _hideable(d, writable) and d.is_dir()))
    hide_files = tuple(dict.fromkeys(f for f in files if _hideable(f, writable) and f.is_file()))
    git = writable / ".git"
    shown = tuple(p for p in expose if p.exists())
    return Mounts(
        writable=writable,
        tmp_bytes=tmp_bytes,
        shm_bytes=shm_bytes,
        hide_dirs=hide_dirs,
        hide_files=hide_files,
        readonly_inside=(git,) if git.exists() else (),
        expose=shown,
        overlay_info_fd=overlay_info_fd,
    )


def _hideable(path: Path, writable: Path) -> bool:
    """Hide a path unless it is the workspace or inside it (the workspace is mounted after
    the hidden paths, so a hidden parent of the workspace is fine)."""
    return path != Path("/") and not path.is_symlink() and not path.is_relative_to(writable)
