"""A run's budgets: per task (they become the task's ``planning.budget.max_cost`` and
``llm.max_tokens_per_task``) and for the whole run (no task starts once the finished
ones spent them). Pure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bot.config import Settings


@dataclass(frozen=True)
class Budgets:
    task_cost: float | None = None
    task_tokens: int | None = None
    run_cost: float | None = None
    run_tokens: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"task_cost": self.task_cost, "task_tokens": self.task_tokens,
                "run_cost": self.run_cost, "run_tokens": self.run_tokens}  # fmt: skip

    @classmethod
    def from_dict(cls, data: Any) -> Budgets:
        """Read back from ``run.json`` (what is not a number there is no budget)."""
        data = data if isinstance(data, dict) else {}

        def number(key: str) -> float | None:
            value = data.get(key)
            ok = isinstance(value, int | float) and not isinstance(value, bool)
            return float(value) if ok else None

        tokens = [number("task_tokens"), number("run_tokens")]
        task_tokens, run_tokens = (None if t is None else int(t) for t in tokens)
        return cls(number("task_cost"), task_tokens, number("run_cost"), run_tokens)

    def for_task(self, settings: Settings) -> Settings:
        """The settings a task runs with: its budgets in place of the configured ones."""
        planning = settings.planning
        if self.task_cost is not None:
            budget = planning.budget.model_copy(update={"max_cost": self.task_cost})
            planning = planning.model_copy(update={"budget": budget})
        llm = settings.llm
        if self.task_tokens is not None:
            llm = llm.model_copy(update={"max_tokens_per_task": self.task_tokens})
        return settings.model_copy(update={"planning": planning, "llm": llm})

    def run_spent(self, cost: float, tokens: int) -> str:
        """Why no further task may start when the finished ones spent ``cost`` and
        ``tokens`` ("" while the run's budgets allow)."""
        if self.run_cost is not None and cost >= self.run_cost:
            return f"the run's cost reached ${self.run_cost:g} (--max-run-cost)"
        if self.run_tokens is not None and tokens >= self.run_tokens:
            return f"the run's tokens reached {self.run_tokens:,} (--max-run-tokens)"
        return ""
