"""How much disk a directory tree uses, for the workspace's size bound."""

from __future__ import annotations

import os
from pathlib import Path


def tree_bytes(root: Path, *, stop_above: int | None = None) -> int:
    """The bytes the files under ``root`` occupy on disk (allocated blocks, so a sparse
    file counts what it really holds), not following links; the count stops as soon as
    it passes ``stop_above``."""
    total = 0
    stack = [root]
    while stack:
        try:
            entries = os.scandir(stack.pop())
        except OSError:
            continue
        with entries:
            for entry in entries:
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                total += info.st_blocks * 512
                if entry.is_dir(follow_symlinks=False):
                    stack.append(Path(entry.path))
                if stop_above is not None and total > stop_above:
                    return total
    return total
