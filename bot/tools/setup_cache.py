"""Prepared environments kept per repository and cache key, so the next task on the same
repository skips the installs. Synchronous file work: call it in a thread.

    <data_dir>/setup-cache/<repository>/<key>/
        manifest.json   the workspace it was made in and the paths it holds
        files/<path>    what set-up left in the workspace (.venv, node_modules, ...)

The data directory is hidden from the sandbox, so no command can reach the cache. A
restore copies (never hard-links: a command that writes a file in place would change
the cached one for every later task) and re-points what holds the old workspace's path:
a virtualenv's scripts, ``pyvenv.cfg``, ``.pth`` files and editable installs (a venv is
not relocatable). Each repository keeps its ``KEEP`` most recently used environments.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import time
import uuid
from collections.abc import Iterable
from pathlib import Path

log = logging.getLogger(__name__)

KEEP = 2
MAX_REWRITE_BYTES = 1 << 20
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


class SetupCache:
    def __init__(self, folder: Path, repository: str, *, keep: int = KEEP) -> None:
        """``folder``: the cache of all repositories; ``repository``: a name unique to one
        (forge and full name)."""
        self.folder = Path(folder) / _UNSAFE.sub("_", repository).strip("_.")
        self.keep = keep

    def entry(self, key: str) -> Path:
        if not re.fullmatch(r"[0-9a-f]{8,64}", key):
            raise ValueError(f"{key!r} is not a cache key")
        return self.folder / key

    def has(self, key: str) -> bool:
        return (self.entry(key) / "manifest.json").is_file()

    def restore(self, key: str, root: Path) -> list[str] | None:
        """Copy the environment into the workspace ``root``; the paths restored, or None
        when there is none (or it cannot be read: set-up then runs)."""
        root = root.resolve()  # where the sandbox mounts the workspace
        entry = self.entry(key)
        paths: list[str] = []
        try:
            manifest = json.loads((entry / "manifest.json").read_text("utf-8"))
            old = str(manifest["root"])
            paths = [str(p) for p in manifest["paths"]]
            for rel in paths:
                _copy(entry / "files" / rel, root / rel)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            if not isinstance(exc, FileNotFoundError) or (entry / "manifest.json").exists():
                log.warning("set-up cache %s unusable: %s", entry, exc)
            for rel in paths:  # half a copy (pruned meanwhile) must not stay behind
                _remove(root / rel)
            return None
        for rel in paths:
            repoint(root / rel, old, str(root))
        os.utime(entry)  # most recently used
        return paths

    def store(self, key: str, root: Path, paths: Iterable[str]) -> None:
        """Keep ``paths`` of the workspace ``root`` under ``key`` (first writer wins)."""
        root = root.resolve()
        entry = self.entry(key)
        if self.has(key):
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        staging = self.folder / f".new-{uuid.uuid4().hex}"
        try:
            kept = [rel for rel in paths if os.path.lexists(root / rel)]
            for rel in kept:
                _copy(root / rel, staging / "files" / rel)
            manifest = {"root": str(root), "paths": kept, "created": time.time()}
            (staging / "manifest.json").write_text(json.dumps(manifest, indent=2), "utf-8")
            os.rename(staging, entry)
        except OSError as exc:
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


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _copy(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    if source.is_dir() and not source.is_symlink():
        shutil.copytree(source, target, symlinks=True, dirs_exist_ok=True)
    else:
        shutil.copy2(source, target, follow_symlinks=False)


def repoint(path: Path, old: str, new: str) -> None:
    """Re-point every virtualenv at or right below ``path`` from ``old`` to ``new``."""
    if old == new or not path.is_dir() or path.is_symlink():
        return
    venvs = [path] if (path / "pyvenv.cfg").is_file() else []
    venvs += [p for p in path.iterdir() if (p / "pyvenv.cfg").is_file() and not p.is_symlink()]
    for venv in venvs:
        for file in _venv_files(venv):
            _rewrite(file, old.encode(), new.encode())


def _venv_files(venv: Path) -> list[Path]:
    """The files of a venv that name its own location: its scripts, its configuration,
    path files and editable installs."""
    files = [venv / "pyvenv.cfg"]
    bin_dir = venv / "bin"
    if bin_dir.is_dir():
        files += sorted(bin_dir.iterdir())
    for site in sorted(venv.glob("lib/python*/site-packages")):
        files += sorted(site.glob("*.pth")) + sorted(site.glob("__editable__*"))
        files += sorted(site.glob("*.dist-info/direct_url.json"))
        files += sorted(site.glob("*.dist-info/RECORD"))
    return [f for f in files if f.is_file() and not f.is_symlink()]


def _rewrite(file: Path, old: bytes, new: bytes) -> None:
    if file.stat().st_size > MAX_REWRITE_BYTES:
        return
    data = file.read_bytes()
    if old in data:
        mode = file.stat().st_mode
        file.write_bytes(data.replace(old, new))
        os.chmod(file, mode)
