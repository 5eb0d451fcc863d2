"""What people said since the last look: commands, approvals, feedback. Pure.

The trigger layer stores only messages from people allowed to steer the task, as
``feedback`` ({author, body}) and ``command`` ({name, args, author}) messages. Each is
decoded once (``decode``) into ``Feedback`` or a ``Command`` (a ``CommandName``).
``read_inbox`` folds them into what the agent acts on at its next safe point: stop and
pause win over everything; the latest approve / reject sent after the pending approval
request decides it (earlier ones are kept, marked ``stale``, and decide nothing);
feedback is kept in order.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from bot.events import CommandName, MessageKind
from bot.record.state import Feedback
from bot.storage.base import TaskMessage


@dataclass(frozen=True, slots=True)
class Command:
    name: CommandName
    author: str
    args: str = ""
    seq: int = 0
    stale: bool = False  # an approve / reject sent before the pending request

    def to_dict(self) -> dict[str, object]:
        """As the planning history keeps it."""
        data: dict[str, object] = {"name": self.name.value, "args": self.args,
                                   "author": self.author}  # fmt: skip
        return {**data, "stale": True} if self.stale else data


def decode(message: TaskMessage) -> Feedback | Command | None:
    """A stored message as what it says (None: not for the agent, or empty feedback)."""
    payload = message.payload
    author = str(payload.get("author", ""))
    try:
        kind = MessageKind(message.kind)
    except ValueError:
        return None
    match kind:
        case MessageKind.FEEDBACK:
            body = str(payload.get("body", "")).strip()
            return Feedback(author, body, message.seq) if body else None
        case MessageKind.COMMAND:
            name = str(payload.get("name", "")).lower()
            try:
                known = CommandName(name)
            except ValueError:
                known = CommandName.UNKNOWN
            args = str(payload.get("args", "")).strip()
            return Command(known, author, args, message.seq)


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
    feedback: list[Feedback] = field(default_factory=list)
    commands: list[Command] = field(default_factory=list)

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
        said = decode(message)
        if isinstance(said, Feedback):
            inbox.feedback.append(said)
        if not isinstance(said, Command):
            continue
        deciding = said.name in (CommandName.APPROVE, CommandName.REJECT)
        if deciding and said.seq <= decisions_after:
            said = Command(said.name, said.author, said.args, said.seq, stale=True)
        inbox.commands.append(said)
        by = said.author or "someone"
        match said.name:
            case _ if said.stale:
                pass
            case CommandName.STOP:
                inbox.stop = by
            case CommandName.PAUSE:
                inbox.pause = by
            case CommandName.RESUME:
                inbox.resume, inbox.pause = True, None
            case CommandName.APPROVE:  # args: the plan id, if named
                inbox.decision = Decision(True, said.author, said.args)
            case CommandName.REJECT:
                inbox.decision = Decision(False, said.author, said.args)
    return inbox
