"""What one sandboxed command is given, checked before it runs: its argv (a list of
strings, never a shell string), its working and writable directories, and the workspace's
prepared environment first on PATH.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from bot.sandbox.bwrap import DEFAULT_PATH


def checked_argv(argv: Sequence[str]) -> list[str]:
    if isinstance(argv, str | bytes):
        raise ValueError("argv must be a list of arguments, not a shell string")
    args = list(argv)
    if not args or not all(isinstance(a, str) for a in args):
        raise ValueError("argv must be a non-empty list of strings")
    if any("\0" in a for a in args):
        raise ValueError("an argument contains a NUL character")
    return args


def checked_dirs(cwd: Path, writable: Path | None) -> tuple[Path, Path]:
    real_cwd = Path(cwd).resolve()
    real_writable = Path(writable).resolve() if writable is not None else real_cwd
    if not real_cwd.is_dir():
        raise ValueError(f"{cwd}: the working directory does not exist")
    if real_writable == Path("/"):
        raise ValueError("the writable directory may not be /")
    if not real_cwd.is_relative_to(real_writable):
        raise ValueError(f"{cwd}: the working directory is outside {writable}")
    return real_cwd, real_writable


def project_env(root: Path) -> dict[str, str]:
    """The workspace's prepared environment (set-up's ``.venv``, ``node_modules``) first on
    PATH, so ``pytest`` or ``python`` is the project's own."""
    found = [root / ".venv" / "bin", root / "node_modules" / ".bin"]
    dirs = [str(d) for d in found if d.is_dir() and not d.is_symlink()]
    if not dirs:
        return {}
    env = {"PATH": ":".join([*dirs, DEFAULT_PATH])}
    if (root / ".venv" / "pyvenv.cfg").is_file():
        env["VIRTUAL_ENV"] = str(root / ".venv")
    return env
