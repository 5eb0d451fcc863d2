"""A run folder's ``run.json`` read back as a typed record, and the one way the run's
shared files are replaced: written beside and renamed, so a reader on any machine sees
the old file or the new one, never half of one."""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import dataclass
from pathlib import Path

from bot.eval.budgets import Budgets

RUN_META = "run.json"


@dataclass(frozen=True)
class RunMeta:
    model: str
    total: int | None  # None: a folder written before the total was kept
    budgets: Budgets
    queue: bool  # ``--queue``: the tasks are on the bot's queue


def read_meta(run: Path) -> RunMeta:
    """Raises ``ValueError`` (or ``OSError``) for a folder that holds no run."""
    data = json.loads((run / RUN_META).read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{run / RUN_META} is not a run's description")
    total = data.get("total")
    return RunMeta(
        model=str(data.get("model", "?")),
        total=total if isinstance(total, int) and not isinstance(total, bool) else None,
        budgets=Budgets.from_dict(data.get("budgets")),
        queue=data.get("queue") is True,
    )


def replace_file(path: Path, text: str) -> None:
    """``path`` holds ``text`` whole, or what it held before."""
    temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        temporary.write_text(text, encoding="utf-8")
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
