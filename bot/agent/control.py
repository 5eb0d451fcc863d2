"""What people said since the last look: commands, approvals, feedback. Pure.

The trigger layer stores only messages from people allowed to steer the task, as
``feedback`` ({author, body}) and ``command`` ({name, args, author}) messages.
``read_inbox`` folds them into what the coordinator acts on at its next safe
point: stop and pause win over everything; the latest approve / reject sent after
the pending approval request decides it; feedback is kept in order.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from bot.storage.base import TaskMessage


@dataclass(frozen=True, slots=True)
class Decision:
    approved: bool
    author: str
    reason: str = ""


@dataclass
class Inbox:
    last_seq: int
    stop: str | None = None
    pause: str | None = None
    resume: bool = False
    decision: Decision | None = None
    feedback: list[dict[str, Any]] = field(default_factory=list)
    commands: list[dict[str, Any]] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.stop or self.pause or self.resume or self.decision or self.feedback)


def read_inbox(
    messages: Iterable[TaskMessage], last_seq: int, *, decisions_after: int = 0
) -> Inbox:
    """Fold ``messages``; approve / reject with a sequence number up to
    ``decisions_after`` (sent before the pending approval request was posted) are
    kept as commands, marked ``stale``, and decide nothing."""
    inbox = Inbox(last_seq=last_seq)
    for message in sorted(messages, key=lambda m: m.seq):
        inbox.last_seq = max(inbox.last_seq, message.seq)
        payload = message.payload
        author = str(payload.get("author", ""))
        if message.kind == "feedback":
            body = str(payload.get("body", "")).strip()
            if body:
                inbox.feedback.append({"author": author, "body": body, "seq": message.seq})
            continue
        if message.kind != "command":
            continue
        name = str(payload.get("name", "")).lower()
        args = str(payload.get("args", "")).strip()
        command: dict[str, Any] = {"name": name, "args": args, "author": author}
        inbox.commands.append(command)
        if name in ("approve", "reject") and message.seq <= decisions_after:
            command["stale"] = True
        elif name == "stop":
            inbox.stop = author or "someone"
        elif name == "pause":
            inbox.pause = author or "someone"
        elif name == "resume":
            inbox.resume = True
            inbox.pause = None
        elif name == "approve":
            inbox.decision = Decision(True, author, args)  # args: the plan id, if named
        elif name == "reject":
            inbox.decision = Decision(False, author, args)
    return inbox
