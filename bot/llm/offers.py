"""The execution phase's call asked natively, kept as the planning process's document.

Where the endpoint supports function calling, the action's tools are offered as native
functions (``LLMRequest.functions``); the call the model makes is turned back into the
same ``execution`` document a JSON answer would be (docs/planning.md#model-documents),
so what is stored, validated and journaled does not depend on how the model answered.
Tool names the APIs would refuse (they allow ``[a-zA-Z0-9_-]{1,64}``) are offered under
a safe alias and mapped back.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from bot.llm.base import FunctionCall, FunctionSpec
from bot.llm.documents import extract_json


class Offered(Protocol):
    """A tool as it is offered: its name, what it is for, its arguments' schema."""

    @property
    def name(self) -> str: ...

    @property
    def purpose(self) -> str: ...

    @property
    def schema(self) -> dict[str, Any]: ...


_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")
_NAME_CHARS = 64


def safe_name(name: str, index: int) -> str:
    """``name`` as both APIs accept it (an alias with the tool's index when it is not)."""
    if not _UNSAFE.search(name) and 0 < len(name) <= _NAME_CHARS:
        return name
    alias = f"t{index}_" + _UNSAFE.sub("_", name)
    return alias[:_NAME_CHARS]


@dataclass(frozen=True, slots=True)
class NativeOffer:
    """The functions offered for one action, and how a call of one becomes its document."""

    task_id: str
    functions: tuple[FunctionSpec, ...]
    names: dict[str, str] = field(default_factory=dict)  # offered name -> tool name

    def document(self, call: FunctionCall, comment: str) -> dict[str, Any]:
        """The ``execution`` document that ``call`` stands for. Broken argument JSON is
        repaired where it can be; arguments that are no object fail validation as such."""
        arguments: Any = extract_json(call.arguments)
        if arguments is None and call.arguments.strip() in ("", "{}", "null"):
            arguments = {}
        return {
            "phase": "execution",
            "current_task": self.task_id,
            "function_call": {
                "name": self.names.get(call.name, call.name),
                "arguments": arguments if arguments is not None else call.arguments,
            },
            "comment": comment.strip(),
        }

    def answer(self, call: FunctionCall, comment: str) -> str:
        """The document as the answer text the phase parser reads."""
        return json.dumps(self.document(call, comment), ensure_ascii=False)


def native_offer(task_id: str, tools: Sequence[Offered]) -> NativeOffer:
    functions: list[FunctionSpec] = []
    names: dict[str, str] = {}
    for index, tool in enumerate(tools):
        name = safe_name(tool.name, index)
        names[name] = tool.name
        functions.append(FunctionSpec(name, tool.purpose, dict(tool.schema)))
    return NativeOffer(task_id, tuple(functions), names)
