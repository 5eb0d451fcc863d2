"""Reading many files and searching file contents inside the workspace.

Both walk the workspace without entering ``.git`` or following directory links, skip
the usual generated directories (unless asked not to), binary files and files over
the size limit, and cap their output: ``read_many_files`` by total characters,
``search_files`` by number of hits.
"""

from __future__ import annotations

from collections.abc import Iterator
from fnmatch import fnmatchcase
from pathlib import Path

import re2

from bot.paths import PathRefused, TooLarge, read_regular, resolve_inside
from bot.sandbox.textfiles import decode_text
from bot.sandbox.tree_walk import walk
from bot.tools.file_ops import FileOpError, Limits, rel_name

DEFAULT_EXCLUDES: tuple[str, ...] = (
    "node_modules", ".venv", "venv", "__pycache__", "*.pyc", ".mypy_cache", ".pytest_cache",
    ".ruff_cache", ".tox", "dist", "build", "*.min.js", "*.lock", "package-lock.json",
)  # fmt: skip
MAX_LINE_CHARS = 300  # of a matching line, shown
MAX_SEARCHED_LINE_CHARS = 20_000  # of any line, searched (minified files have huge lines)
MAX_PATTERN_CHARS = 1_000


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
    for directory, dirs, files in walk(start):
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
        data = read_regular(path, max_bytes, shown_as=rel)
    except TooLarge as exc:
        return None, f"{exc.size} bytes, over the limit"
    except PathRefused as exc:
        return None, str(exc).removeprefix(f"{rel}: ")
    decoded = decode_text(data)
    return (None, "binary") if decoded is None else (decoded.text, "")


def compile_pattern(pattern: str, *, ignore_case: bool) -> re2._Regexp[str]:
    """The model's pattern, compiled by RE2: matching takes time linear in the text,
    whatever the pattern (Python's ``re`` backtracks: ``(a+)+$`` on 27 ``a`` and a ``!``
    held the GIL for 9 s, doubling with every character)."""
    if len(pattern) > MAX_PATTERN_CHARS:
        raise FileOpError(f"the pattern is {len(pattern)} characters; at most {MAX_PATTERN_CHARS}")
    options = re2.Options()
    options.log_errors = False
    options.case_sensitive = not ignore_case
    options.max_mem = 8 << 20
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        why = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise FileOpError(
            f"invalid regular expression {pattern!r}: {why} (RE2 syntax: no look-around "
            "or back-references)"
        ) from None


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
    regex = compile_pattern(pattern, ignore_case=ignore_case)
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
            if regex.search(line[:MAX_SEARCHED_LINE_CHARS]):
                total += 1
                if len(hits) < max_hits:
                    hits.append(f"{rel}:{number}: {line.strip()[:MAX_LINE_CHARS]}")
    if not hits:
        return f"no matches for {pattern!r}"
    more = (
        f"\n[... {total - len(hits)} more matches; narrow the search]" if total > max_hits else ""
    )
    return "\n".join(hits) + more
