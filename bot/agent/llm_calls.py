"""One place where the agent talks to the model: render, budget, ask, account.

``PhaseCaller.ask(template, phase, **vars)`` renders ``prompts/{template}.j2``,
checks the budgets, asks for the ``phase`` document (``bot.agent.schema``
validates, repairs and re-asks), and reports the usage. Several templates share a
document type: a plan revision and human feedback are answered as ``reflection``
documents whose ``plan_revision`` holds the new action plan.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from bot.agent.budget import Budget
from bot.agent.prompts import PromptLibrary
from bot.agent.schema import PhaseAnswer, ask_phase
from bot.llm.base import LLM, LLMRequest, Usage
from bot.llm.tokens import count_messages

UsageHook = Callable[[str, Usage, int], Awaitable[None]]


async def _no_hook(template: str, usage: Usage, calls: int) -> None:
    return None


@dataclass
class PhaseCaller:
    llm: LLM
    prompts: PromptLibrary
    budget: Budget
    temperature: float = 0.2
    on_usage: UsageHook = _no_hook

    async def ask(self, template: str, phase: str, **variables: object) -> PhaseAnswer:
        """The ``phase`` document the model gives for ``template``'s prompt (data None:
        still invalid after the re-ask). Raises ``BudgetExceeded``, ``LLMUnavailable``."""
        messages = self.prompts.messages(template, **variables)
        max_tokens = self.budget.answer_allowance(template, count_messages(messages))
        answer = await ask_phase(
            self.llm, phase, messages, max_tokens=max_tokens, temperature=self.temperature
        )
        self.budget.ledger.add(template, answer.usage, answer.calls)
        await self.on_usage(template, answer.usage, answer.calls)
        return answer

    async def text(self, template: str, *, limit: int, **variables: object) -> str:
        """A plain-text answer of at most ``limit`` tokens (summaries)."""
        messages = self.prompts.messages(template, **variables)
        allowance = self.budget.answer_allowance(template, count_messages(messages))
        max_tokens = min(allowance, limit)
        request = LLMRequest(
            template, tuple(messages), None, max_tokens=max_tokens, temperature=self.temperature
        )
        response = await self.llm.complete(request)
        self.budget.ledger.add(template, response.usage, 1)
        await self.on_usage(template, response.usage, 1)
        return response.text.strip()
