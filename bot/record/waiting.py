"""What a task waits for (``Waiting``: answers, an approval, a judgement), the call an
approval is asked for (``ToolCall``), and people's comments on the running task
(``Feedback``), with their checkpoint forms. Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from bot.run_events import WaitKind


@dataclass(frozen=True, slots=True)
class Feedback:
    """A person's comment on the running task (kept until a reflection reads it)."""

    author: str
    body: str
    seq: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"author": self.author, "body": self.body, "seq": self.seq}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Feedback:
        return cls(str(data.get("author", "")), str(data.get("body", "")), int(data.get("seq", 0)))


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A call waiting for approval, exactly as it was shown."""

    key: str
    task_id: str
    tool: str
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass
class Waiting:
    kind: WaitKind
    since: float = 0.0
    wake_at: float | None = None
    what: str = ""  # what is to be approved, in words
    text: str = ""  # what the request showed
    after_seq: int = 0  # approvals up to this message answer something else
    timed_out: bool = False
    number: int = 0  # of the revision
    questions: list[str] = field(default_factory=list)
    call: ToolCall | None = None
    plan_hash: str = ""  # the digest of the plan the request showed (plan and revision)
    paths: dict[str, str] = field(default_factory=dict)  # push: path -> content shown

    @property
    def approval(self) -> bool:
        return self.kind is not WaitKind.ANSWERS

    @property
    def approvable(self) -> bool:
        """An approval answers it: an approval request, or questions shown with a
        best-guess plan (``plan_hash``) that ``/agent approve`` runs."""
        return self.approval or bool(self.plan_hash)

    def to_dict(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["kind"] = self.kind.value
        data["questions"] = list(self.questions)
        data["paths"] = dict(self.paths)
        call = self.call
        data["call"] = (
            None if call is None else {f.name: getattr(call, f.name) for f in fields(call)}
        )
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Waiting:
        values = dict(data)
        values["kind"] = WaitKind(values["kind"])
        call = values.get("call")
        values["call"] = ToolCall(**call) if isinstance(call, dict) else None
        return cls(**values)
