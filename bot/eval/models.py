"""The model a run measures: the configured one (``llm:`` of config.yaml), shared by its
tasks. With ``llm.provider: scripted`` and a folder as ``llm.script_path``, each task has a
script of its own, ``FOLDER/INSTANCE_ID.json`` (or ``.yaml``), so scripted runs stay
deterministic whatever the order and the number of workers (or machines: a queued task's
worker reads its script from its own ``llm.script_path``)."""

from __future__ import annotations

from pathlib import Path

from bot.config import ConfigError, Settings
from bot.llm.base import LLM
from bot.llm.factory import make_llm
from bot.llm.scripted import ScriptedLLM

SUFFIXES = (".json", ".yaml", ".yml")


def model_name(settings: Settings) -> str:
    """The name a run's predictions carry (``model_name_or_path``)."""
    return "scripted" if settings.llm.provider == "scripted" else settings.llm.model


def script_folder(settings: Settings) -> Path | None:
    """The folder of per-task scripts, when the settings name one."""
    script = settings.llm.script_path
    return script if settings.llm.provider == "scripted" and script and script.is_dir() else None


def task_script(folder: Path, instance_id: str, *, skip: int = 0) -> ScriptedLLM:
    """The task's own script (from its answer ``skip``); raises ``ConfigError`` when there
    is none."""
    for suffix in SUFFIXES:
        path = folder / f"{instance_id}{suffix}"
        if path.is_file():
            return ScriptedLLM(path, skip=skip)
    raise ConfigError(f"{folder}: no script for task {instance_id}")


class RunModels:
    """Hands each task its model; ``aclose`` closes the shared one."""

    def __init__(self, settings: Settings) -> None:
        self.folder = script_folder(settings)
        self.shared: LLM | None = None if self.folder else make_llm(settings.llm)
        self.name = model_name(settings)

    def for_task(self, instance_id: str) -> LLM:
        """Raises ``ConfigError`` when a scripted run has no script for the task."""
        if self.shared is not None:
            return self.shared
        assert self.folder is not None
        return task_script(self.folder, instance_id)

    async def aclose(self) -> None:
        if self.shared is not None:
            await self.shared.aclose()
