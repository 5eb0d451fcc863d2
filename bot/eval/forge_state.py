"""What a task's ``LocalForge`` keeps between runs: the issue's comments, labels and
change requests, in the task folder's ``forge.json``.

A queued task (``bot eval run --queue``) may wait for an answer on one worker and go on
on another; the forge each builds from the folder then shows the status comment the bot
edits in place, and the change request it opened, as the first left them.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bot.forges.base import ChangeRequest, Comment

STATE = "forge.json"


@dataclass
class ForgeState:
    comments: list[Comment] = field(default_factory=list)
    labels: set[str] = field(default_factory=set)
    change_requests: list[ChangeRequest] = field(default_factory=list)

    def next_id(self) -> int:
        return max((c.id for c in self.comments), default=0) + 1

    def to_json(self) -> str:
        data = {"comments": [asdict(c) for c in self.comments], "labels": sorted(self.labels),
                "change_requests": [asdict(c) for c in self.change_requests]}  # fmt: skip
        return json.dumps(data, ensure_ascii=False, indent=1) + "\n"


def load_state(folder: Path) -> ForgeState:
    """The state a run before left in ``folder`` (an empty one when there is none; a file
    that is not this state is an error, named)."""
    path = folder / STATE
    if not path.is_file():
        return ForgeState()
    try:
        data: Any = json.loads(path.read_text(encoding="utf-8"))
        return ForgeState(
            comments=[Comment(**c) for c in data["comments"]],
            labels={str(label) for label in data["labels"]},
            change_requests=[ChangeRequest(**c) for c in data["change_requests"]],
        )
    except (ValueError, TypeError, KeyError) as exc:
        raise ValueError(f"{path} is not a local forge's state: {exc}") from None
