"""The set-up steps a paused task's comment gives when the model cannot be reached."""

from __future__ import annotations

import asyncio

import pytest

from bot.agent import finish
from bot.config import LLMSettings
from bot.llm.base import HealthReport
from bot.llm.scripted import ScriptedLLM

OLLAMA = LLMSettings(base_url="http://127.0.0.1:11434/v1", model="qwen2.5-coder")


class Probe(ScriptedLLM):
    """The scripted model, whose health probe hangs or fails as a down server's may."""

    def __init__(self, how: str) -> None:
        super().__init__([])
        self.how = how

    async def health(self) -> HealthReport:
        if self.how == "hangs":
            await asyncio.sleep(3600)
        raise OSError("connection reset")


@pytest.mark.parametrize("how", ["hangs", "fails"])
async def test_a_probe_that_hangs_or_fails_gives_the_steps_for_an_unreachable_endpoint(
    how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(finish, "OUTAGE_PROBE_SECONDS", 0.05)
    steps = await asyncio.wait_for(finish.outage_steps(Probe(how), OLLAMA), 5)
    assert "Pull the model: ollama pull qwen2.5-coder" in steps
    assert steps[-1] == "Check LLM_BASE_URL (currently http://127.0.0.1:11434/v1)"


async def test_a_model_that_answers_again_needs_no_steps() -> None:
    assert await finish.outage_steps(ScriptedLLM([]), OLLAMA) == ()
