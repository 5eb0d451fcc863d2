"""Prompt templates: one jinja2 template per phase in ``prompts/``, never inlined in code.

The folder ships as the package ``bot._prompts`` (mapped in pyproject.toml) and is read with
``importlib.resources``, so a wheel install finds it as well as an editable one.

Templates render with ``StrictUndefined``: a variable the caller forgot is an error,
not an empty string. ``PromptLibrary.messages(phase, **vars)`` gives the system
message (``system.j2``, told which phase it is) and the phase's user message.
"""

from __future__ import annotations

from importlib import resources
from importlib.resources.abc import Traversable
from typing import Any

import jinja2
from jinja2.loaders import split_template_path

from bot.llm.base import Message

PHASES = (
    "planning",
    "execution",
    "open_loop",
    "reflection",
    "revision",
    "completion",
    "human_feedback",
    "summarise",
    "history_summary",
)
TEMPLATES = ("system", *PHASES)
PROMPT_PACKAGE = "bot._prompts"


class PromptError(Exception):
    """A template is missing, broken, or was rendered without one of its variables."""


def default_prompt_dir() -> Traversable:
    """The shipped templates: ``prompts/`` in a checkout, ``bot/_prompts/`` in a wheel."""
    return resources.files(PROMPT_PACKAGE)


class PromptLibrary:
    def __init__(self, directory: Traversable | None = None) -> None:
        self.directory = directory or default_prompt_dir()
        if not self.directory.is_dir():
            raise PromptError(f"prompt directory {self.directory} does not exist")
        self._env = jinja2.Environment(
            loader=jinja2.FunctionLoader(self._source),
            undefined=jinja2.StrictUndefined,
            # Prompts are plain text for a model, not HTML: nothing to escape.
            autoescape=jinja2.select_autoescape(enabled_extensions=("html",), default=False),
            trim_blocks=True,
            lstrip_blocks=True,
            keep_trailing_newline=False,
        )

    def _source(self, name: str) -> tuple[str, str, None] | None:
        """A template's text and its file name (for error messages), or None when missing."""
        path = self.directory
        for part in split_template_path(name):  # refuses ".." like FileSystemLoader
            path = path / part
        if not path.is_file():
            return None
        return path.read_text(encoding="utf-8"), str(path), None

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
