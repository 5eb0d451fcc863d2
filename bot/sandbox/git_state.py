"""What git says of the working tree: the paths a status lists, and what a merge of the
base left unresolved, read from git's own state and the files.

Git keeps a path it could not merge in the index's higher stages (``git ls-files -u``)
until it is added again; in the file it writes conflict markers whose length the
repository's attributes choose (``conflict-marker-size``, seven by default). A path still
unmerged whose file holds a marker line of any length those attributes name (in the
working tree or in the index, which a sandboxed command cannot change) is unresolved,
read in the file's ``working-tree-encoding`` too (git writes a UTF-16 file's markers in
UTF-16).
Pure: the parsing of git's output and the reading of one file.
"""

from __future__ import annotations

from pathlib import Path

__all__ = [
    "DEFAULT_MARKER_SIZE",
    "conflict_attributes",
    "has_markers",
    "marker_sizes",
    "parse_status",
    "tree_encodings",
    "unmerged_paths",
]

DEFAULT_MARKER_SIZE = 7  # git's own, where no attribute names another
_MARKER_CHARS = (b"<", b">", b"|")  # ours, theirs, and the base of the diff3 style
_NO_VALUE = frozenset({"", "unspecified", "set", "unset"})
_RAW: frozenset[str] = frozenset({""})


def unmerged_paths(ls_files_u: str, diff_filter_u: str) -> list[str]:
    """Every path git holds as unmerged: ``ls-files -u -z`` (``mode oid stage\\tpath``)
    and ``diff --name-only --diff-filter=U -z``, one sorted list."""
    staged = (entry.partition("\t")[2] for entry in ls_files_u.split("\0"))
    listed = diff_filter_u.split("\0")
    return sorted({p for p in (*staged, *listed) if p})


def _size(value: str) -> int:
    """Git's reading of the attribute's value (C's ``atoi``): leading white space, a sign,
    then ASCII digits; the default when they name no positive number (``unspecified``,
    ``set``, ``unset``, ``-3``, garbage). ``+12`` is twelve to git."""
    text = value.lstrip(" \t\n\v\f\r")
    sign, text = (text[0], text[1:]) if text[:1] in ("+", "-") else ("+", text)
    digits = ""
    for char in text:
        if char not in "0123456789":
            break
        digits += char
    size = int(digits) if digits and len(digits) < 10 and sign == "+" else 0
    return size if size > 0 else DEFAULT_MARKER_SIZE


def marker_sizes(paths: list[str], *check_attr: str) -> dict[str, frozenset[int]]:
    """Each path's marker lengths from the ``check-attr -z conflict-marker-size`` outputs
    given (``path NUL attribute NUL value NUL``), git's default always among them."""
    sizes: dict[str, set[int]] = {path: {DEFAULT_MARKER_SIZE} for path in paths}
    for output in check_attr:
        fields = output.split("\0")
        for at in range(0, len(fields) - 2, 3):
            path, name, value = fields[at : at + 3]
            if name == "conflict-marker-size":
                sizes.setdefault(path, {DEFAULT_MARKER_SIZE}).add(_size(value))
    return {path: frozenset(found) for path, found in sizes.items()}


def tree_encodings(paths: list[str], *check_attr: str) -> dict[str, frozenset[str]]:
    """Each path's encodings in the working tree from ``check-attr -z
    working-tree-encoding`` outputs ("" for the bytes as they are, always among them):
    git writes a conflicted file, markers and all, in that encoding."""
    found: dict[str, set[str]] = {path: {""} for path in paths}
    for output in check_attr:
        fields = output.split("\0")
        for at in range(0, len(fields) - 2, 3):
            path, name, value = fields[at : at + 3]
            if name == "working-tree-encoding" and value not in _NO_VALUE:
                found.setdefault(path, {""}).add(value)
    return {path: frozenset(names) for path, names in found.items()}


def conflict_attributes(
    paths: list[str], *check_attr: str
) -> dict[str, tuple[frozenset[int], frozenset[str]]]:
    """Each path's marker lengths and working-tree encodings (``has_markers``'s arguments)
    from ``check-attr -z conflict-marker-size working-tree-encoding`` outputs."""
    sizes, encodings = marker_sizes(paths, *check_attr), tree_encodings(paths, *check_attr)
    return {path: (sizes[path], encodings[path]) for path in paths}


def _is_marker(line: bytes, size: int) -> bool:
    for char in _MARKER_CHARS:
        if line.startswith(char * size):
            rest = line[size : size + 1]
            if rest in (b" ", b"\n", b"\r", b""):
                return True
    return False


def has_markers(path: Path, sizes: frozenset[int], encodings: frozenset[str] = _RAW) -> bool:
    """Whether the file holds a line git writes around a conflict, at any of ``sizes``,
    read in any of ``encodings`` ("": its bytes; a file that does not read in one, or an
    encoding Python does not know, counts as holding markers)."""
    try:
        with path.open("rb") as handle:
            if any(_is_marker(line, size) for line in handle for size in sizes):
                return True
        data = path.read_bytes() if encodings - _RAW else b""
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return False
    for encoding in encodings - _RAW:
        try:
            text = data.decode(encoding).encode("utf-8")
        except (LookupError, UnicodeError):
            return True
        if any(_is_marker(line, size) for line in text.splitlines(True) for size in sizes):
            return True
    return False


def parse_status(porcelain: str) -> list[str]:
    """File paths from ``git status --porcelain=v1 -z`` (renames give the new path)."""
    fields = porcelain.split("\0")
    paths: list[str] = []
    index = 0
    while index < len(fields):
        entry = fields[index]
        index += 1
        if len(entry) < 4:
            continue
        paths.append(entry[3:])
        if entry[0] in "RC" or entry[1] in "RC":
            index += 1  # the original path of a rename or copy follows
    return sorted(set(paths))
