"""The label lifecycle. Pure: state -> which managed labels to add and remove.

``coding agent`` (the trigger) -> ``coding agent processing`` -> one of done /
help needed / paused / stopped / waiting. The bot only ever removes labels it
manages; people's own labels are left alone.
"""

from __future__ import annotations

from bot.config import LabelSettings
from bot.storage.base import TaskState

LABEL_COLORS = {
    "trigger": ("1d76db", "Ask the coding agent to work on this"),
    "processing": ("fbca04", "The coding agent is working on this"),
    "done": ("0e8a16", "The coding agent finished this"),
    "help_needed": ("d93f0b", "The coding agent needs a person to look at this"),
    "paused": ("c5def5", "The coding agent paused this task"),
    "stopped": ("bfd4f2", "The coding agent was stopped"),
    "awaiting_input": ("f9d0c4", "The coding agent waits for an answer or approval"),
}


def label_for(labels: LabelSettings, state: TaskState) -> str:
    return {
        TaskState.QUEUED: labels.processing,
        TaskState.RUNNING: labels.processing,
        TaskState.AWAITING_INPUT: labels.awaiting_input,
        TaskState.AWAITING_APPROVAL: labels.awaiting_input,
        TaskState.PAUSED: labels.paused,
        TaskState.DONE: labels.done,
        TaskState.NEEDS_HUMAN: labels.help_needed,
        TaskState.FAILED: labels.help_needed,
        TaskState.STOPPED: labels.stopped,
    }[state]


def managed(labels: LabelSettings) -> list[tuple[str, str, str]]:
    """(name, colour, description) of every label the bot manages."""
    return [(getattr(labels, key), *LABEL_COLORS[key]) for key in LABEL_COLORS]


def transition(
    labels: LabelSettings, current: tuple[str, ...], state: TaskState
) -> tuple[list[str], list[str]]:
    """(labels to add, labels to remove) to show ``state``."""
    target = label_for(labels, state)
    ours = {name for name, _, _ in managed(labels)}
    remove = [name for name in current if name in ours and name != target]
    add = [] if target in current else [target]
    return add, remove
