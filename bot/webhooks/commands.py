"""Comment commands: ``/agent <name> [args]``, one per line, several per comment.

Pure. Lines inside fenced code blocks and quoted lines (``> ...``) are not
commands, so quoting a command in a reply never re-triggers it.
"""

from __future__ import annotations

import re

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
    CommandName.HELP: "show this list",
}

_FENCE = re.compile(r"^\s*(```|~~~)")


def parse_commands(body: str, *, prefix: str) -> list[Command]:
    """Every command line of ``body``, in order."""
    commands: list[Command] = []
    in_fence = False
    for line in body.splitlines():
        if _FENCE.match(line):
            in_fence = not in_fence
            continue
        stripped = line.strip()
        if in_fence or stripped.startswith(">"):
            continue
        command = _parse_line(stripped, prefix)
        if command is not None:
            commands.append(command)
    return commands


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
    """The text of a comment that mentions the bot (``@name ...``), without the mention."""
    for name in bot_names:
        handle = name.removesuffix("[bot]")
        pattern = re.compile(rf"(?<![\w@])@{re.escape(handle)}(\[bot\])?(?![\w-])", re.IGNORECASE)
        if pattern.search(body):
            return pattern.sub("", body, count=1).strip()
    return None


def help_text(prefix: str) -> str:
    return "\n".join(f"- `{prefix} {name.value}`: {text}" for name, text in HELP.items())
