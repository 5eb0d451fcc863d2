"""The one way out of the agent loop: ``Exit`` carries the run's ``Outcome``.

Wherever a run ends (done, needs a person, waiting for people, paused, stopped, budget
spent, the model unusable) the code raises ``Exit(outcome)``; the loop catches it once
and returns the outcome. What kind of end it is lives in the outcome's typed fields:
``state`` (the task's next state) and ``pause`` (why a paused task is paused). A
helper that finds the run cannot go on raises ``NeedsPerson``; the loop turns it into
the request for a person (an ``Exit`` too, in effect).
"""

from __future__ import annotations

from typing import Any

from bot.agent.context import Outcome


class Exit(Exception):
    def __init__(self, outcome: Outcome) -> None:
        super().__init__(outcome.state.value, outcome.reason)
        self.outcome = outcome


class NeedsPerson(Exception):
    """The run cannot go on: the loop asks a person to step in (``Finisher.intervene``)."""

    def __init__(self, reason: str, *, partial_plan: dict[str, Any] | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.partial_plan = partial_plan
