"""Checkpoints of version 1 (a phase and flags) read into the version 2 form (a stage).
Pure: no I/O.
"""

from __future__ import annotations

from typing import Any

from bot.record.stages import Stage
from bot.run_events import PauseReason, WaitKind

CHECKPOINT_VERSION = 2  # the current version, which ``upgrade_v1`` writes


_V1_FLAGS = ("phase", "early_done", "plan_approved", "unreflected", "llm_pause_notified")


def upgrade_v1(data: dict[str, Any]) -> dict[str, Any]:
    """A version 1 checkpoint (a phase and flags) in the version 2 form (a stage). Pure."""
    out = {k: v for k, v in data.items() if k not in _V1_FLAGS}
    out["version"] = CHECKPOINT_VERSION
    out["batch"] = list(data.get("unreflected") or [])
    notified = data.get("llm_pause_notified")
    out["paused"] = PauseReason.LLM_UNAVAILABLE.value if notified else None
    waiting = data.get("waiting")
    out["waiting"] = _waiting_v1(waiting) if isinstance(waiting, dict) else None
    out["stage"] = _stage_v1(data, out["waiting"]).value
    return out


def _stage_v1(data: dict[str, Any], waiting: dict[str, Any] | None) -> Stage:
    if data.get("outcome") is not None:
        return Stage.DONE
    if waiting is not None:
        return Stage.WAIT
    if data.get("plan") is None:
        return Stage.PLAN
    if data.get("early_done"):
        return Stage.DELIVER
    if not data.get("plan_approved") and not data.get("records"):
        return Stage.PLAN  # planned; the plan-only gate is still ahead
    return Stage.EXECUTE


def _waiting_v1(old: dict[str, Any]) -> dict[str, Any]:
    details = dict(old.get("details") or {})
    answers = old.get("kind") == WaitKind.ANSWERS  # v1: kind "clarification" or "approval"
    kind = WaitKind.ANSWERS if answers else WaitKind(old["subject"])
    call = None
    if kind is WaitKind.TOOL:
        call = {
            "key": str(details["key"]),
            "task_id": str(details["task_id"]),
            "tool": str(details["tool"]),
            "arguments": dict(details["arguments"]),
        }
    return {
        "kind": kind.value,
        "since": old.get("since", 0.0),
        "wake_at": old.get("wake_at"),
        "what": str(details.get("what", "")),
        "text": str(details.get("text", "")),
        "after_seq": int(details.get("after_seq", 0)),
        "timed_out": bool(details.get("timed_out", False)),
        "number": int(details.get("number", 0)),
        "questions": [str(q) for q in details.get("questions") or []],
        "call": call,
    }
