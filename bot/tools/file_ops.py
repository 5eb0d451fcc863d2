"""File operations inside the workspace, behind the path guard and the size limit.

Synchronous functions (the tools run them in a thread) that return the text the agent
sees and raise ``FileOpError`` or ``PathRefused`` with a reason for expected failures.
Text keeps its encoding: a Shift-JIS file is read as text and written back as
Shift-JIS.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from bot.paths import PathRefused, ensure_writable, read_regular, resolve_inside
from bot.sandbox.textfiles import DecodedText, decode_text, encode_text
from bot.sandbox.tree_walk import walk

MAX_LIST_ENTRIES = 2000


class FileOpError(Exception):
    """An expected failure (missing file, ambiguous edit, ...); the message says why."""


@dataclass(frozen=True, slots=True)
class Limits:
    max_file_bytes: int
    max_output_chars: int


def rel_name(root: Path, path: Path) -> str:
    return path.relative_to(root.resolve()).as_posix() or "."


def load_text(root: Path, rel: str, max_bytes: int) -> tuple[Path, DecodedText]:
    path = resolve_inside(root, rel)
    if not path.exists():
        raise FileOpError(f"{rel}: no such file")
    if path.is_dir():
        raise FileOpError(f"{rel}: not a file")
    decoded = decode_text(read_regular(path, max_bytes, shown_as=rel))
    if decoded is None:
        raise FileOpError(f"{rel}: a binary file (or an unknown encoding); not shown as text")
    return path, decoded


def read_lines(root: Path, rel: str, limits: Limits, start: int | None, end: int | None) -> str:
    _, decoded = load_text(root, rel, limits.max_file_bytes)
    lines = decoded.text.splitlines(keepends=True)
    first = max(start or 1, 1)
    last = min(end or len(lines), len(lines))
    if lines and first > len(lines):
        raise FileOpError(f"{rel}: start_line {first} is past the end ({len(lines)} lines)")
    body, shown_last = _fit(lines[first - 1 : last], limits.max_output_chars, first)
    header = f"--- {rel}: lines {first}-{shown_last} of {len(lines)} ({decoded.encoding}) ---"
    if shown_last < last:
        body += f"\n[truncated at line {shown_last}: read on with start_line={shown_last + 1}]"
    return f"{header}\n{body}"


def _fit(lines: list[str], max_chars: int, first: int) -> tuple[str, int]:
    taken: list[str] = []
    size = 0
    for line in lines:
        if taken and size + len(line) > max_chars:
            break
        taken.append(line[:max_chars])
        size += len(line)
    return "".join(taken), first + len(taken) - 1


def write_text(root: Path, rel: str, content: str, max_bytes: int) -> str:
    path = resolve_inside(root, rel)
    if path.is_dir():
        raise FileOpError(f"{rel}: is a directory")
    ensure_writable(path, shown_as=rel)
    encoding = "utf_8"
    note = ""
    if path.is_file() and path.stat().st_size <= max_bytes:
        previous = decode_text(read_regular(path, max_bytes, shown_as=rel))
        if previous is not None and previous.encoding != "utf_8":
            encoding = previous.encoding
    try:
        data = encode_text(content, encoding)
    except UnicodeEncodeError:
        note = f" (the text does not fit {encoding}: written as UTF-8)"
        encoding, data = "utf_8", content.encode("utf-8")
    _check_new_size(rel, len(data), max_bytes)
    created = not path.exists()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    verb = "created" if created else "overwrote"
    return f"{verb} {rel}: {len(data)} bytes, {encoding}{note}"


def _check_new_size(rel: str, size: int, max_bytes: int) -> None:
    if size > max_bytes:
        raise PathRefused(f"{rel}: {size} bytes is over the limit of {max_bytes} bytes")


def replace_text(
    root: Path, rel: str, old: str, new: str, *, replace_all: bool, max_bytes: int
) -> str:
    if old == "":
        raise FileOpError("old_text is empty: give the exact text to replace")
    path, decoded = load_text(root, rel, max_bytes)
    text = decoded.text
    if old not in text and "\r\n" in text and "\r\n" not in old:
        old, new = old.replace("\n", "\r\n"), new.replace("\n", "\r\n")
    count = text.count(old)
    if count == 0:
        raise FileOpError(
            f"{rel}: old_text was not found (0 matches); read the file and copy the text "
            "exactly, including indentation and line breaks"
        )
    if count > 1 and not replace_all:
        lines = _match_lines(text, old)
        raise FileOpError(
            f"{rel}: old_text is ambiguous: {count} matches (at lines {lines}); include "
            "more surrounding lines to make it unique, or set replace_all"
        )
    if not decoded.exact:
        raise FileOpError(
            f"{rel}: this {decoded.encoding} file cannot be rewritten without changing "
            "other bytes; edit it with write_file"
        )
    updated = text.replace(old, new)
    try:
        data = encode_text(updated, decoded.encoding)
    except UnicodeEncodeError as exc:
        raise FileOpError(
            f"{rel}: new_text has characters that {decoded.encoding} cannot store "
            f"({exc.object[exc.start : exc.end]!r}); the file keeps its encoding"
        ) from None
    _check_new_size(rel, len(data), max_bytes)
    path.write_bytes(data)
    return f"replaced {count} occurrence(s) in {rel} ({decoded.encoding})"


def _match_lines(text: str, old: str) -> str:
    lines: list[str] = []
    start = 0
    while (found := text.find(old, start)) != -1 and len(lines) < 10:
        lines.append(str(text.count("\n", 0, found) + 1))
        start = found + 1
    return ", ".join(lines)


def move_path(root: Path, source: str, destination: str, *, overwrite: bool) -> str:
    src = resolve_inside(root, source)
    dst = resolve_inside(root, destination)
    if src == root.resolve():
        raise FileOpError("the workspace root cannot be moved")
    if not src.exists() and not src.is_symlink():
        raise FileOpError(f"{source}: no such file or directory")
    if dst.exists() and not overwrite:
        raise FileOpError(f"{destination}: already exists (set overwrite to replace it)")
    if dst.is_dir() and not dst.is_symlink():
        raise FileOpError(f"{destination}: is a directory; name the full target path")
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(src, dst)
    return f"moved {source} to {destination}"


def delete_path(root: Path, rel: str) -> str:
    path = resolve_inside(root, rel)
    if path == root.resolve():
        raise FileOpError("the workspace root cannot be deleted")
    if path.is_symlink() or path.is_file():
        path.unlink()
        return f"deleted {rel}"
    if path.is_dir():
        if any(path.iterdir()):
            raise FileOpError(f"{rel}: a directory that is not empty; delete its files first")
        path.rmdir()
        return f"deleted the empty directory {rel}"
    raise FileOpError(f"{rel}: no such file")


def make_directory(root: Path, rel: str) -> str:
    path = resolve_inside(root, rel)
    if path.exists() and not path.is_dir():
        raise FileOpError(f"{rel}: exists and is not a directory")
    existed = path.is_dir()
    path.mkdir(parents=True, exist_ok=True)
    return f"{rel}: already exists" if existed else f"created the directory {rel}"


def list_directory(root: Path, rel: str, *, recursive: bool) -> str:
    base = resolve_inside(root, rel)
    if not base.is_dir():
        raise FileOpError(f"{rel}: not a directory")
    real_root = root.resolve()
    entries: list[str] = []
    for directory, dirs, files in walk(base):
        dirs[:] = sorted(d for d in dirs if d != ".git")
        here = Path(directory)
        for name in dirs:
            entries.append(rel_name(real_root, here / name) + "/")
        for name in sorted(files):
            entries.append(_describe_file(real_root, here / name))
        if not recursive or len(entries) >= MAX_LIST_ENTRIES:
            break
    if not recursive:
        entries.sort()
    shown = entries[:MAX_LIST_ENTRIES]
    more = len(entries) - len(shown)
    tail = f"\n[... {more} more entries]" if more > 0 else ""
    return ("\n".join(shown) or f"{rel}: empty directory") + tail


def _describe_file(root: Path, path: Path) -> str:
    name = rel_name(root, path)
    if path.is_symlink():
        return f"{name} -> {os.readlink(path)}"
    try:
        return f"{name} ({path.stat().st_size} bytes)"
    except OSError:
        return name
