"""One place where the agent talks to the model: render, budget, ask, account, record.

``PhaseCaller.ask(template, phase, **vars)`` renders ``prompts/{template}.j2``,
checks the budgets, asks for the ``phase`` document (``bot.llm.documents``
validates, repairs and re-asks), and reports the usage. Several templates share a
document type: a plan revision and human feedback are answered as ``reflection``
documents whose ``plan_revision`` holds the new action plan. With a ``journal``
(the task's run log, ``bot.record.runlog.RunLog``) every request and its answer (or
error) is written to ``conversation.jsonl``, and failed calls and invalid answers to
``errors.log``.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from bot import metrics, tracing
from bot.llm.base import LLM, HealthReport, LLMError, LLMRequest, LLMResponse, LLMUnavailable, Usage
from bot.llm.budget import Budget
from bot.llm.documents import CallAsDocument, PhaseAnswer, ask_phase
from bot.llm.prices import FREE, Price
from bot.llm.prompts import PromptLibrary
from bot.llm.tokens import count_messages
from bot.progress import step
from bot.run_events import ErrorCategory
from bot.text import clip

UsageHook = Callable[[str, Usage, int], Awaitable[None]]
CONTENT_CHARS = 4000  # per message in conversation.jsonl
ANSWER_CHARS = 16000


class Journal(Protocol):
    """Where the exchanges go (the run directory's log), redacted."""

    def redact(self, text: str) -> str: ...

    def conversation(self, entry: dict[str, Any]) -> None: ...

    def error(self, category: ErrorCategory, message: str) -> None: ...


async def _no_hook(template: str, usage: Usage, calls: int) -> None:
    return None


def usage_entry(usage: Usage) -> dict[str, int]:
    """A usage as the journal and history write it (cache figures only when there are)."""
    entry = {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens}
    if usage.cached_tokens:
        entry["cached_tokens"] = usage.cached_tokens
    if usage.cache_write_tokens:
        entry["cache_write_tokens"] = usage.cache_write_tokens
    return entry


def exchange(
    template: str,
    request: LLMRequest,
    duration: float,
    response: LLMResponse | None = None,
    error: str = "",
    *,
    clean: Callable[[str], str] = lambda text: text,
) -> dict[str, Any]:
    """One conversation.jsonl entry: long contents cut, after ``clean`` (redaction:
    first, so a cut never leaves the start of a secret that no longer matches)."""
    entry: dict[str, Any] = {
        "phase": template,
        "document": request.phase,
        "messages": [
            {"role": m.role, "content": clip(clean(m.content), CONTENT_CHARS)}
            for m in request.messages
        ],
        "duration": round(duration, 3),
    }
    if response is not None:
        entry["answer"] = clip(clean(response.text), ANSWER_CHARS)
        call = response.function_call
        if call is not None:
            entry["function_call"] = {
                "name": call.name,
                "arguments": clip(clean(call.arguments), ANSWER_CHARS),
            }
        entry["usage"] = usage_entry(response.usage)
        entry["model"] = response.model
    if error:
        entry["error"] = error
    return entry


@dataclass
class _Recorder:
    """The model, with every exchange written to the journal as it happens."""

    llm: LLM
    template: str
    journal: Journal
    monotonic: Callable[[], float]
    price: Price = FREE
    name: str = field(init=False)

    def __post_init__(self) -> None:
        self.name = self.llm.name

    async def complete(self, request: LLMRequest) -> LLMResponse:
        """The call, in a span with the GenAI conventions' attributes (bot.tracing)."""
        model = str(getattr(self.llm, "model", "") or "")
        with tracing.model_span(
            self.name, model, phase=self.template, max_tokens=request.max_tokens,
            temperature=request.temperature, structured=request.schema is not None,
            server=str(getattr(self.llm, "base_url", "") or ""),
        ) as span:  # fmt: skip
            response, entry = await self._complete(request)
            tracing.model_answered(span, self._answer(response), entry)
            return response

    def _answer(self, response: LLMResponse) -> tracing.ModelAnswer:
        usage = response.usage
        cost = self.price.cost(
            usage.prompt_tokens, usage.completion_tokens,
            cached=usage.cached_tokens, cache_write=usage.cache_write_tokens,
        )  # fmt: skip
        return tracing.ModelAnswer(
            response.model, usage.prompt_tokens, usage.completion_tokens, usage.cached_tokens,
            usage.cache_write_tokens, response.finish_reasons, cost,
        )  # fmt: skip

    async def _complete(self, request: LLMRequest) -> tuple[LLMResponse, dict[str, Any]]:
        started = self.monotonic()
        try:
            with step(f"the model ({self.template})"):
                response = await self.llm.complete(request)
        except LLMError as exc:
            took = self.monotonic() - started
            metrics.LLM_LATENCY.labels(self.template).observe(took)
            error = f"{type(exc).__name__}: {exc}"
            entry = exchange(self.template, request, took, error=error, clean=self.journal.redact)
            self.journal.conversation(entry)
            what = "unreachable" if isinstance(exc, LLMUnavailable) else "the call failed"
            self.journal.error(ErrorCategory.MODEL, f"{self.template}: {what}: {error}")
            raise
        took = self.monotonic() - started
        metrics.LLM_LATENCY.labels(self.template).observe(took)
        metrics.LLM_TOKENS.labels(self.template, "prompt").observe(response.usage.prompt_tokens)
        metrics.LLM_TOKENS.labels(self.template, "completion").observe(
            response.usage.completion_tokens
        )
        entry = exchange(self.template, request, took, response, clean=self.journal.redact)
        self.journal.conversation(entry)
        return response, entry

    async def health(self) -> HealthReport:
        return await self.llm.health()

    async def aclose(self) -> None:
        return None  # the model is the runtime's, not this call's


@dataclass
class PhaseCaller:
    llm: LLM
    prompts: PromptLibrary
    budget: Budget
    temperature: float = 0.2
    on_usage: UsageHook = _no_hook
    journal: Journal | None = None
    monotonic: Callable[[], float] = time.monotonic

    def _model(self, template: str) -> LLM:
        if self.journal is None:
            return self.llm
        return _Recorder(self.llm, template, self.journal, self.monotonic, self.budget.price)

    def _invalid(self, template: str, answer: PhaseAnswer) -> None:
        if self.journal is None:
            return
        if answer.data is None:
            self.journal.error(ErrorCategory.MODEL, f"{template}: {answer.error}")
        elif answer.calls > 1:
            self.journal.error(
                ErrorCategory.MODEL,
                f"{template}: the first answer was not a valid {answer.phase} document; "
                "the second one was",
            )

    async def ask(self, template: str, phase: str, **variables: object) -> PhaseAnswer:
        """The ``phase`` document the model gives for ``template``'s prompt (data None:
        still invalid after the re-ask). Raises ``BudgetExceeded``, ``LLMUnavailable``."""
        return await self.ask_offering(template, phase, None, **variables)

    async def ask_offering(
        self, template: str, phase: str, native: CallAsDocument | None, /, **variables: object
    ) -> PhaseAnswer:
        """``ask``, with ``native``'s functions offered to call instead where the endpoint
        supports native calls (``bot.llm.offers``)."""
        messages = self.prompts.messages(template, **variables)
        max_tokens = self.budget.answer_allowance(template, count_messages(messages))
        answer = await ask_phase(
            self._model(template),
            phase,
            messages,
            max_tokens=max_tokens,
            temperature=self.temperature,
            native=native,
        )
        self._invalid(template, answer)
        self.budget.spend(template, answer.usage, answer.calls)
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
        response = await self._model(template).complete(request)
        self.budget.spend(template, response.usage, 1)
        await self.on_usage(template, response.usage, 1)
        return response.text.strip()
