"""Prepared environments kept per repository and cache key, so the next task on the same
repository skips the installs. Synchronous file work: call it in a thread.

    <data_dir>/setup-cache/<name>-<hash of forge and full path>/<key>/
        manifest.json   the workspace it was made in and the paths it holds
        files/<path>    what set-up left in the workspace (.venv, node_modules, ...)

The folder of a repository is named by a hash of the forge and the full path, so no
two repositories share one (``acme_payments/app`` and ``acme/payments_app`` included).
The data directory is hidden from the sandbox, so no command can reach the cache.

A restore copies (never hard-links: a command that writes a file in place would change
the cached one for every later task) with ``safe_tree``: nothing is written through a
link the clone holds, and a path the cache would write that the clone already has (a
tracked file, folder or link) refuses the restore, so set-up runs instead. What names
the old workspace's path is re-pointed as it is copied: a virtualenv's scripts,
``pyvenv.cfg``, ``.pth`` files and editable installs (a venv is not relocatable).
``copy_environment`` is that copy, for a set-up made elsewhere too (in the checkout of
the base branch, on a follow-up: ``setup_base``). Storing reads the workspace the same
way (links copied as links, never followed).
Each repository keeps its ``KEEP`` most recently used environments.
"""

from __future__ import annotations

import fnmatch
import functools
import hashlib
import json
import logging
import os
import re
import shutil
import stat
import time
import uuid
from collections.abc import Iterable
from pathlib import Path, PurePosixPath

from bot.sandbox.safe_tree import TreeRefused, copy_path, remove_path

log = logging.getLogger(__name__)

KEEP = 2
MAX_REWRITE_BYTES = 1 << 20
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def folder_name(repository: str) -> str:
    """A readable, injective folder name for ``repository`` (forge and full path)."""
    digest = hashlib.sha256(repository.encode("utf-8")).hexdigest()[:32]
    readable = _UNSAFE.sub("_", repository).strip("_.")[:48]
    return f"{readable}-{digest}" if readable else digest


class SetupCache:
    def __init__(self, folder: Path, repository: str, *, keep: int = KEEP) -> None:
        """``folder``: the cache of all repositories; ``repository``: a name unique to one
        (its forge and full path, e.g. ``gitlab:acme/payments/app``)."""
        self.folder = Path(folder) / folder_name(repository)
        self.keep = keep

    def entry(self, key: str) -> Path:
        if not re.fullmatch(r"[0-9a-f]{8,64}", key):
            raise ValueError(f"{key!r} is not a cache key")
        return self.folder / key

    def has(self, key: str) -> bool:
        return (self.entry(key) / "manifest.json").is_file()

    def restore(self, key: str, root: Path) -> list[str] | None:
        """Copy the environment into the workspace ``root``; the paths restored, or None
        when there is none, it cannot be read, or the clone holds something at one of its
        paths (set-up then runs)."""
        root.mkdir(parents=True, exist_ok=True)
        root = root.resolve()  # where the sandbox mounts the workspace
        entry = self.entry(key)
        try:
            manifest = json.loads((entry / "manifest.json").read_text("utf-8"))
            old = str(manifest["root"])
            paths = [str(p) for p in manifest["paths"]]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            if not isinstance(exc, FileNotFoundError):
                log.warning("set-up cache %s unusable: %s", entry, exc)
            return None
        try:
            copy_environment(entry / "files", old, paths, root)
        except (OSError, TreeRefused) as exc:
            why = "the clone holds that path" if isinstance(exc, TreeRefused) else "unusable"
            log.warning("set-up cache %s not restored (%s): %s", entry, why, exc)
            return None
        os.utime(entry)  # most recently used
        return paths

    def store(self, key: str, root: Path, paths: Iterable[str]) -> None:
        """Keep ``paths`` of the workspace ``root`` under ``key`` (first writer wins)."""
        root = root.resolve()
        entry = self.entry(key)
        if self.has(key):
            return
        staging = self.folder / f".new-{uuid.uuid4().hex}"
        try:
            (staging / "files").mkdir(parents=True)
            kept = []
            for rel in paths:
                try:
                    copy_path(root, rel, staging / "files")
                except FileNotFoundError:
                    continue
                kept.append(rel)
            manifest = {"root": str(root), "paths": kept, "created": time.time()}
            (staging / "manifest.json").write_text(json.dumps(manifest, indent=2), "utf-8")
            os.rename(staging, entry)
        except (OSError, TreeRefused) as exc:
            if not self.has(key):
                log.warning("set-up cache %s not written: %s", entry, exc)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        self.prune()

    def prune(self) -> None:
        entries = [p for p in self.folder.iterdir() if p.is_dir() and not p.name.startswith(".")]
        entries.sort(key=lambda p: p.stat().st_mtime, reverse=True)
        for old in entries[self.keep :]:
            shutil.rmtree(old, ignore_errors=True)


def copy_environment(files: Path, old: str, paths: Iterable[str], root: Path) -> None:
    """Copy ``paths`` of ``files`` (made by set-up in the workspace ``old``) into the
    workspace ``root`` with ``safe_tree``, re-pointing what names ``old``; raises
    ``TreeRefused`` or ``OSError`` with nothing of the copy left behind."""
    root = root.resolve()
    done: list[str] = []
    rewrite = functools.partial(_replaced, old=old, new=str(root))
    try:
        for rel in paths:
            rewrites = functools.partial(_names_its_place, venvs=_venvs(files, rel))
            copy_path(files, rel, root, rewrites=rewrites, rewrite=rewrite)
            done.append(rel)
    except BaseException:
        for rel in done:  # half a copy must not stay behind
            remove_path(root, rel)
        raise


def _venvs(files: Path, rel: str) -> list[PurePosixPath]:
    """The virtualenvs at or right below ``files/rel`` (in the cache: the bot's own
    files), relative to ``rel``; a link is never one."""
    top = files / rel
    found = [PurePosixPath(".")] if _regular(top / "pyvenv.cfg") and _folder(top) else []
    if _folder(top):
        found += [PurePosixPath(child.name) for child in sorted(top.iterdir())
                  if _folder(child) and _regular(child / "pyvenv.cfg")]  # fmt: skip
    return found


def _folder(path: Path) -> bool:
    try:
        return stat.S_ISDIR(path.lstat().st_mode)
    except OSError:
        return False


def _regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(path.lstat().st_mode)
    except OSError:
        return False


# The files of a venv that name its own location: its configuration, its scripts, path
# files and editable installs (patterns on the path inside the venv).
_VENV_FILES = (
    ("pyvenv.cfg",),
    ("bin", "*"),
    ("lib", "python*", "site-packages", "*.pth"),
    ("lib", "python*", "site-packages", "__editable__*"),
    ("lib", "python*", "site-packages", "*.dist-info", "direct_url.json"),
    ("lib", "python*", "site-packages", "*.dist-info", "RECORD"),
)


def _names_its_place(path: PurePosixPath, venvs: list[PurePosixPath]) -> bool:
    for venv in venvs:
        inside = path.parts if venv == PurePosixPath(".") else None
        if venv != PurePosixPath(".") and path.parts[:1] == venv.parts:
            inside = path.parts[1:]
        if inside is not None and any(
            len(inside) == len(pattern)
            and all(
                fnmatch.fnmatchcase(name, glob) for name, glob in zip(inside, pattern, strict=True)
            )
            for pattern in _VENV_FILES
        ):
            return True
    return False


def _replaced(_path: PurePosixPath, data: bytes, *, old: str, new: str) -> bytes:
    if old == new or len(data) > MAX_REWRITE_BYTES:
        return data
    return data.replace(old.encode(), new.encode())
