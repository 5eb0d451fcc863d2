"""Secret sources a candidate from outside may name: only those the bot already reads.

A candidate configuration sent over the API names files (``github.private_key_path``,
``gitlab.token_file``, ...) and environment variables (``gitlab.webhook_secrets.*.env``)
that loading it would read. ``refuse_new_secret_sources`` refuses, before anything is
read, each one the running settings do not already use, so the API cannot make the bot
read an arbitrary file or variable. Pure: it compares names, it reads nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bot.config.env import FILE_SECRETS
from bot.config.sections import ConfigError, Settings

CHANGE_ON_HOST = "a secret source the running bot does not use: change it in the file on the host"


def _known_files(running: Settings) -> set[Path]:
    files = {getattr(getattr(running, section), path_key) for section, path_key, _ in FILE_SECRETS}
    files |= {s.file for s in running.gitlab.webhook_secrets.values()}
    return {path for path in files if path is not None}


def _named(block: Any, key: str) -> object:
    return block.get(key) if isinstance(block, dict) else None


def new_secret_sources(raw: dict[str, Any], running: Settings) -> list[str]:
    """The keys of ``raw`` (a parsed candidate) naming a secret file or variable that
    ``running`` does not use; a source named as the running settings name it is kept."""
    files = _known_files(running)
    variables = {s.env for s in running.gitlab.webhook_secrets.values() if s.env}
    found = []
    for section, path_key, _ in FILE_SECRETS:
        value = _named(raw.get(section), path_key)
        if value not in (None, "") and Path(str(value)) not in files:
            found.append(f"{section}.{path_key}")
    sources = _named(raw.get("gitlab"), "webhook_secrets")
    for name, source in sources.items() if isinstance(sources, dict) else ():
        file, env = _named(source, "file"), _named(source, "env")
        if file not in (None, "") and Path(str(file)) not in files:
            found.append(f"gitlab.webhook_secrets.{name}.file")
        if env not in (None, "") and str(env) not in variables:
            found.append(f"gitlab.webhook_secrets.{name}.env")
    return found


def refuse_new_secret_sources(raw: dict[str, Any], running: Settings, where: str) -> None:
    """Raise ``ConfigError`` naming each key of ``new_secret_sources``."""
    found = new_secret_sources(raw, running)
    if found:
        problems = tuple((key, CHANGE_ON_HOST) for key in found)
        lines = [f"{where}: invalid configuration:", *(f"  {k}: {m}" for k, m in problems)]
        raise ConfigError("\n".join(lines), problems)
