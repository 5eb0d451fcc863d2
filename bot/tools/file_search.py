"""Reading many files and searching file contents inside the workspace.

Both walk the workspace without entering ``.git`` or following directory links, skip
the usual generated directories (unless asked not to), binary files and files over
the size limit, and cap their output: ``read_many_files`` by total characters,
``search_files`` by number of hits.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from fnmatch import fnmatchcase
from pathlib import Path

from bot.paths import PathRefused, resolve_inside
from bot.tools.file_ops import FileOpError, Limits, rel_name
from bot.tools.textfiles import decode_text

DEFAULT_EXCLUDES: tuple[str, ...] = (
    "node_modules", ".venv", "venv", "__pycache__", "*.pyc", ".mypy_cache", ".pytest_cache",
    ".ruff_cache", ".tox", "dist", "build", "*.min.js", "*.lock", "package-lock.json",
)  # fmt: skip
MAX_LINE_CHARS = 300


def matches(rel: str, pattern: str) -> bool:
    """Glob match on a POSIX path: the whole path, any leading directory (so ``build``
    covers ``build/x.o``), or the file name when the pattern has no slash."""
    if fnmatchcase(rel, pattern):
        return True
    parts = rel.split("/")
    if any(fnmatchcase("/".join(parts[:i]), pattern) for i in range(1, len(parts))):
        return True
    return "/" not in pattern and any(fnmatchcase(part, pattern) for part in parts)


def walk_files(
    root: Path, start: Path, excludes: tuple[str, ...], *, recursive: bool = True
) -> Iterator[Path]:
    real_root = root.resolve()
    for directory, dirs, files in os.walk(start):
        here = Path(directory)
        dirs[:] = sorted(
            d for d in dirs
            if d != ".git" and not any(matches(rel_name(real_root, here / d), p) for p in excludes)
        )  # fmt: skip
        for name in sorted(files):
            path = here / name
            if not any(matches(rel_name(real_root, path), p) for p in excludes):
                yield path
        if not recursive:
            return


def _expand(root: Path, pattern: str, excludes: tuple[str, ...], recursive: bool) -> list[Path]:
    """Files named by one path or glob pattern (relative to the workspace)."""
    if Path(pattern).is_absolute() or ".." in Path(pattern).parts:
        resolve_inside(root, pattern)  # raises with the reason when it leaves the workspace
    if not any(ch in pattern for ch in "*?["):
        path = resolve_inside(root, pattern)
        if path.is_dir():
            return list(walk_files(root, path, excludes, recursive=recursive))
        return [path] if path.is_file() else []
    real_root = root.resolve()
    pattern = pattern.removeprefix("./")
    return [
        path
        for path in walk_files(root, real_root, excludes)
        if _glob(rel_name(real_root, path), pattern)
    ]


def _glob(rel: str, pattern: str) -> bool:
    """``fnmatch`` where a leading ``**/`` also matches files at the top level."""
    return fnmatchcase(rel, pattern) or (
        pattern.startswith("**/") and fnmatchcase(rel, pattern[3:])
    )


def read_many(
    root: Path,
    paths: list[str],
    limits: Limits,
    *,
    include: list[str] | None = None,
    exclude: list[str] | None = None,
    recursive: bool = True,
    default_excludes: bool = True,
) -> str:
    excludes = tuple(exclude or ()) + (DEFAULT_EXCLUDES if default_excludes else ())
    real_root = root.resolve()
    files: dict[str, Path] = {}
    for pattern in [*paths, *(include or ())]:
        for path in _expand(root, pattern, excludes, recursive):
            files.setdefault(rel_name(real_root, path), path)
    if not files:
        raise FileOpError(f"no files match {paths + (include or [])}")
    parts: list[str] = []
    skipped: list[str] = []
    budget = limits.max_output_chars
    for rel, path in sorted(files.items()):
        text, why = _readable(root, rel, path, limits.max_file_bytes)
        if text is None:
            skipped.append(f"{rel} ({why})")
            continue
        block = f"--- {rel} ---\n{text}\n"
        if len(block) > budget:
            skipped.append(f"{rel} (over the output budget: read it with read_file)")
            budget = 0
            continue
        parts.append(block)
        budget -= len(block)
    if skipped:
        parts.append("--- skipped ---\n" + "\n".join(skipped))
    return "".join(parts)


def _readable(root: Path, rel: str, path: Path, max_bytes: int) -> tuple[str | None, str]:
    try:
        resolve_inside(root, rel)
        size = path.stat().st_size
    except (PathRefused, OSError) as exc:
        return None, str(exc)
    if size > max_bytes:
        return None, f"{size} bytes, over the limit"
    decoded = decode_text(path.read_bytes())
    return (None, "binary") if decoded is None else (decoded.text, "")


def search(
    root: Path,
    pattern: str,
    limits: Limits,
    *,
    path: str = ".",
    glob: str | None = None,
    ignore_case: bool = False,
    max_hits: int = 200,
) -> str:
    try:
        regex = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    except re.error as exc:
        raise FileOpError(f"invalid regular expression {pattern!r}: {exc}") from None
    start = resolve_inside(root, path)
    if not start.is_dir():
        raise FileOpError(f"{path}: not a directory")
    real_root = root.resolve()
    hits: list[str] = []
    total = 0
    for file in walk_files(root, start, DEFAULT_EXCLUDES):
        rel = rel_name(real_root, file)
        if glob is not None and not matches(rel, glob):
            continue
        text, _ = _readable(root, rel, file, limits.max_file_bytes)
        for number, line in enumerate((text or "").splitlines(), start=1):
            if regex.search(line):
                total += 1
                if len(hits) < max_hits:
                    hits.append(f"{rel}:{number}: {line.strip()[:MAX_LINE_CHARS]}")
    if not hits:
        return f"no matches for {pattern!r}"
    more = (
        f"\n[... {total - len(hits)} more matches; narrow the search]" if total > max_hits else ""
    )
    return "\n".join(hits) + more
