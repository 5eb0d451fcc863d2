"""Comment commands: ``/agent <name> [args]``, one per line, several per comment.

Pure. Lines inside fenced code blocks and quoted lines (``> ...``) are not
commands, so quoting a command in a reply never re-triggers it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from bot.events import Command, CommandName

HELP: dict[CommandName, str] = {
    CommandName.RUN: "start a task for this issue (optional extra instructions after it)",
    CommandName.PLAN: "plan only: post the plan and wait for `approve` before executing",
    CommandName.APPROVE: "approve the plan or the action the agent is waiting on",
    CommandName.REJECT: "reject it, with a reason the agent revises the plan by",
    CommandName.STOP: "stop the running task for good at the next safe point",
    CommandName.PAUSE: "pause the running task at the next safe point",
    CommandName.RESUME: "resume a paused or waiting task",
    CommandName.RETRY: "start a new attempt that knows the last attempt's history",
    CommandName.STATUS: "show the task's state",
    CommandName.AUTOFIX: "on the bot's change request: `on` or `off` its CI fix rounds",
    CommandName.HELP: "show this list",
}

_FENCE = re.compile(r"^\s*(```|~~~)")


def _live_lines(lines: list[str]) -> Iterator[int]:
    """The indexes of the lines that are neither in a fenced code block nor quoted."""
    in_fence = False
    for index, line in enumerate(lines):
        if _FENCE.match(line):
            in_fence = not in_fence
        elif not in_fence and not line.strip().startswith(">"):
            yield index


def parse_commands(body: str, *, prefix: str) -> list[Command]:
    """Every command line of ``body``, in order."""
    if prefix not in body:
        return []  # the common case, answered without splitting the comment
    lines = body.splitlines()
    commands = (_parse_line(lines[i].strip(), prefix) for i in _live_lines(lines))
    return [command for command in commands if command is not None]


def _parse_line(line: str, prefix: str) -> Command | None:
    if not line.startswith(prefix):
        return None
    rest = line[len(prefix) :]
    if rest and not rest[0].isspace():
        return None  # "/agentfoo" is not our prefix
    parts = rest.strip().split(None, 1)
    if not parts:
        return Command(CommandName.HELP, "", line)
    word = parts[0].lower()
    args = parts[1].strip() if len(parts) > 1 else ""
    try:
        name = CommandName(word)
    except ValueError:
        return Command(CommandName.UNKNOWN, word, line)
    if name is CommandName.UNKNOWN:
        return Command(CommandName.UNKNOWN, word, line)
    return Command(name, args, line)


def mention_text(body: str, *, bot_names: tuple[str, ...]) -> str | None:
    """The text of a comment that mentions the bot (``@name ...``), without the mention.

    Like commands, a mention in a fenced code block or a quoted line does not count.
    """
    folded = body.casefold()
    handles = [name.removesuffix("[bot]") for name in bot_names]
    handles = [handle for handle in handles if f"@{handle}".casefold() in folded]
    if not handles:
        return None  # the common case, answered without splitting the comment
    lines = body.splitlines()
    for handle in handles:
        pattern = re.compile(rf"(?<![\w@])@{re.escape(handle)}(\[bot\])?(?![\w-])", re.IGNORECASE)
        for index in _live_lines(lines):
            if pattern.search(lines[index]):
                lines[index] = pattern.sub("", lines[index], count=1)
                return "\n".join(lines).strip()
    return None


def help_text(prefix: str) -> str:
    return "\n".join(f"- `{prefix} {name.value}`: {text}" for name, text in HELP.items())
