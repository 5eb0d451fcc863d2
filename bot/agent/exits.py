"""The one way out of the agent loop: ``Exit`` carries the run's ``Outcome``.

Wherever a run ends (done, needs a person, waiting for people, paused, stopped, budget
spent, the model unusable) the code raises ``Exit(outcome)``; the loop catches it once
and returns the outcome. What kind of end it is lives in the outcome's typed fields:
``state`` (the task's next state) and ``pause`` (why a paused task is paused).
"""

from __future__ import annotations

from bot.agent.context import Outcome


class Exit(Exception):
    def __init__(self, outcome: Outcome) -> None:
        super().__init__(outcome.state.value, outcome.reason)
        self.outcome = outcome
