"""Token and time budgets and usage accounting.

``Budget`` decides how many answer tokens a call may ask for (the prompt and the
answer must fit ``llm.max_tokens_per_call``; every call must fit what is left of
``llm.max_tokens_per_task``) and raises ``BudgetExceeded`` with an explanation
when they do not, or when the task has used up ``planning.execution.total_timeout``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from bot import metrics
from bot.llm.base import Usage
from bot.llm.prices import FREE, Price, dollars

# A call whose answer could not hold this many tokens is not worth making.
MIN_ANSWER_TOKENS = 256


class BudgetKind(StrEnum):
    COST = "cost"
    TOKENS = "tokens"
    CALL_TOKENS = "call_tokens"
    TIME = "time"
    STEPS = "steps"  # the open tool loop's calls (planning.enabled: false)


_SETTINGS = {
    BudgetKind.COST: "planning.budget.max_cost",
    BudgetKind.TOKENS: "llm.max_tokens_per_task",
    BudgetKind.CALL_TOKENS: "llm.max_tokens_per_call",
    BudgetKind.TIME: "planning.execution.total_timeout",
    BudgetKind.STEPS: "planning.max_subtasks",
}


class BudgetExceeded(Exception):
    """A budget ran out (``kind``)."""

    def __init__(self, kind: BudgetKind, reason: str) -> None:
        super().__init__(reason)
        self.kind = kind
        self.reason = reason

    @property
    def setting(self) -> str:
        """The configuration key that sets the budget that ran out."""
        return _SETTINGS[self.kind]


@dataclass
class UsageLedger:
    """Tokens and calls so far, in total and per phase (kept in the checkpoint)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    calls: int = 0
    by_phase: dict[str, dict[str, int]] = field(default_factory=dict)
    cached_tokens: int = 0  # of prompt_tokens, read from the provider's prompt cache
    cache_write_tokens: int = 0  # of prompt_tokens, written to it
    cost: float = 0.0  # US dollars, at llm.prices (bot/llm/prices.py)

    @property
    def total(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def add(self, phase: str, usage: Usage, calls: int, *, price: Price = FREE) -> None:
        spent = price.cost(
            usage.prompt_tokens,
            usage.completion_tokens,
            cached=usage.cached_tokens,
            cache_write=usage.cache_write_tokens,
        )
        self.cost += spent
        self.prompt_tokens += usage.prompt_tokens
        self.completion_tokens += usage.completion_tokens
        self.cached_tokens += usage.cached_tokens
        self.cache_write_tokens += usage.cache_write_tokens
        self.calls += calls
        entry = self.by_phase.setdefault(phase, {"prompt": 0, "completion": 0, "calls": 0})
        entry["prompt"] += usage.prompt_tokens
        entry["completion"] += usage.completion_tokens
        entry["calls"] += calls
        if usage.cached_tokens:
            entry["cached"] = entry.get("cached", 0) + usage.cached_tokens

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "calls": self.calls,
            "by_phase": {k: dict(v) for k, v in self.by_phase.items()},
        }
        if self.cached_tokens or self.cache_write_tokens:  # only where a cache was used
            data["cached_tokens"] = self.cached_tokens
            data["cache_write_tokens"] = self.cache_write_tokens
        if self.cost:  # only where the model has a price
            data["cost"] = round(self.cost, 6)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> UsageLedger:
        data = data or {}
        return cls(
            prompt_tokens=int(data.get("prompt_tokens", 0)),
            completion_tokens=int(data.get("completion_tokens", 0)),
            calls=int(data.get("calls", 0)),
            by_phase={k: dict(v) for k, v in data.get("by_phase", {}).items()},
            cached_tokens=int(data.get("cached_tokens", 0)),
            cache_write_tokens=int(data.get("cache_write_tokens", 0)),
            cost=float(data.get("cost", 0.0)),
        )


@dataclass
class Budget:
    max_tokens_per_task: int
    max_tokens_per_call: int
    total_timeout: float
    ledger: UsageLedger = field(default_factory=UsageLedger)
    price: Price = FREE
    max_cost: float | None = None  # US dollars (planning.budget.max_cost)

    def spend(self, phase: str, usage: Usage, calls: int) -> None:
        """Count a call's tokens and what they cost."""
        before = self.ledger.cost
        self.ledger.add(phase, usage, calls, price=self.price)
        if self.ledger.cost > before:
            metrics.LLM_COST.labels(phase).inc(self.ledger.cost - before)

    @property
    def remaining(self) -> int:
        return self.max_tokens_per_task - self.ledger.total

    def answer_allowance(self, phase: str, prompt_tokens: int) -> int:
        """How many answer tokens a ``phase`` call with this prompt may ask for."""
        self._check_cost(phase, prompt_tokens)
        if self.remaining < prompt_tokens + MIN_ANSWER_TOKENS:
            raise BudgetExceeded(
                BudgetKind.TOKENS,
                f"the task has used {self.ledger.total} of llm.max_tokens_per_task "
                f"({self.max_tokens_per_task}); the next {phase} call needs about "
                f"{prompt_tokens + MIN_ANSWER_TOKENS}",
            )
        room = self.max_tokens_per_call - prompt_tokens
        if room < MIN_ANSWER_TOKENS:
            raise BudgetExceeded(
                BudgetKind.CALL_TOKENS,
                f"a {phase} prompt needs {prompt_tokens} tokens, which leaves less than "
                f"{MIN_ANSWER_TOKENS} for the answer within llm.max_tokens_per_call "
                f"({self.max_tokens_per_call})",
            )
        return min(room, self.remaining - prompt_tokens)

    def _check_cost(self, phase: str, prompt_tokens: int) -> None:
        if self.max_cost is None:
            return
        least = self.price.cost(prompt_tokens, MIN_ANSWER_TOKENS)  # the next call, at least
        if self.ledger.cost + least > self.max_cost:
            raise BudgetExceeded(
                BudgetKind.COST,
                f"the task has spent {dollars(self.ledger.cost)} of planning.budget.max_cost "
                f"({dollars(self.max_cost)}); the next {phase} call costs at least "
                f"{dollars(least)}",
            )

    def check_time(self, elapsed: float) -> None:
        if elapsed > self.total_timeout:
            raise BudgetExceeded(
                BudgetKind.TIME,
                f"the task has run for {elapsed:.0f} s, more than "
                f"planning.execution.total_timeout ({self.total_timeout:g} s)",
            )
