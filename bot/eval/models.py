"""The model a run measures: the configured one (``llm:`` of config.yaml), shared by its
tasks. With ``llm.provider: scripted`` and a folder as ``llm.script_path``, each task has a
script of its own, ``FOLDER/INSTANCE_ID.json`` (or ``.yaml``), so scripted runs stay
deterministic whatever the order and the number of workers."""

from __future__ import annotations

from bot.config import ConfigError, Settings
from bot.llm.base import LLM
from bot.llm.factory import make_llm
from bot.llm.scripted import ScriptedLLM

SUFFIXES = (".json", ".yaml", ".yml")


class RunModels:
    """Hands each task its model; ``aclose`` closes the shared one."""

    def __init__(self, settings: Settings) -> None:
        script = settings.llm.script_path
        self.folder = (
            script if settings.llm.provider == "scripted" and script and script.is_dir() else None
        )
        self.shared: LLM | None = None if self.folder else make_llm(settings.llm)
        self.name = "scripted" if settings.llm.provider == "scripted" else settings.llm.model

    def for_task(self, instance_id: str) -> LLM:
        """Raises ``ConfigError`` when a scripted run has no script for the task."""
        if self.shared is not None:
            return self.shared
        assert self.folder is not None
        for suffix in SUFFIXES:
            path = self.folder / f"{instance_id}{suffix}"
            if path.is_file():
                return ScriptedLLM(path)
        raise ConfigError(f"{self.folder}: no script for task {instance_id}")

    async def aclose(self) -> None:
        if self.shared is not None:
            await self.shared.aclose()
