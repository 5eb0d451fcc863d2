"""Prompt templates: one jinja2 template per phase in ``prompts/``, never inlined in code.

Templates render with ``StrictUndefined``: a variable the caller forgot is an error,
not an empty string. ``PromptLibrary.messages(phase, **vars)`` gives the system
message (``system.j2``, told which phase it is) and the phase's user message.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2

from bot.llm.base import Message

PHASES = (
    "planning",
    "execution",
    "reflection",
    "revision",
    "completion",
    "human_feedback",
    "summarise",
)
TEMPLATES = ("system", *PHASES)


class PromptError(Exception):
    """A template is missing, broken, or was rendered without one of its variables."""


def default_prompt_dir() -> Path:
    """``prompts/`` next to the ``bot`` package (the repository or the install root)."""
    return Path(__file__).resolve().parents[2] / "prompts"


class PromptLibrary:
    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory or default_prompt_dir()
        if not self.directory.is_dir():
            raise PromptError(f"prompt directory {self.directory} does not exist")
        self._env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(str(self.directory)),
            undefined=jinja2.StrictUndefined,
            # Prompts are plain text for a model, not HTML: nothing to escape.
            autoescape=jinja2.select_autoescape(enabled_extensions=("html",), default=False),
            trim_blocks=True,
            lstrip_blocks=True,
            keep_trailing_newline=False,
        )

    def render(self, name: str, **variables: Any) -> str:
        try:
            template = self._env.get_template(f"{name}.j2")
            return template.render(**variables).strip()
        except jinja2.TemplateNotFound:
            raise PromptError(f"no template {name}.j2 in {self.directory}") from None
        except jinja2.UndefinedError as exc:
            raise PromptError(f"{name}.j2: {exc.message}") from None
        except jinja2.TemplateError as exc:
            raise PromptError(f"{name}.j2: {exc}") from None

    def messages(self, phase: str, **variables: Any) -> list[Message]:
        """The system message for ``phase`` and the phase's user message."""
        if phase not in PHASES:
            raise PromptError(f"unknown phase {phase!r}")
        return [
            Message("system", self.render("system", phase=phase)),
            Message("user", self.render(phase, **variables)),
        ]
