"""What the model is shown of the run so far (planning.history, docs/planning.md): the calls
with their results, the older ones folded into one summary, and its memo.

A turn is one tool call with its result: an ``ActionRecord`` that finished. Past
``max_turns`` turns shown in full, the oldest ones (all but the newest ``keep_turns``)
are folded into one summary (``AgentState.history_summary``; their keys go to
``AgentState.folded``). A call still without its result (a write in flight, an action
waiting for approval) is never folded, nor anything after it: a call and its result stay
together. ``Recall.fold`` has the model summarise them with the ``history_summary``
prompt, with the summary so far; an empty answer, or a task without budget for it, gets
the bot's own ``digest`` (one line per call) instead. ``turns_to_fold`` and ``digest``
are pure; the summary and the folded keys live in the checkpoint.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Sequence

from bot.config.planning import HistorySettings
from bot.llm.budget import BudgetExceeded
from bot.llm.calls import PhaseCaller
from bot.llm.tokens import count_tokens
from bot.record.evidence import compact_results, full_entry, one_line
from bot.record.plan import Goal
from bot.record.state import ActionRecord, AgentState

DIGEST_CHARS = 4000  # the bot's own digest, newest lines kept
SUMMARY_TOKENS = 400
CALL_CHARS = 1500  # of each folded call, in the summary prompt


def turns_to_fold(
    records: Sequence[ActionRecord],
    folded: Collection[str],
    *,
    max_turns: int,
    keep_turns: int,
) -> list[ActionRecord]:
    """The records to fold now, oldest first ([] while the shown turns are within
    ``max_turns``, or ``max_turns`` is 0)."""
    shown = [r for r in records if r.key not in folded]
    if not max_turns or len(shown) <= max_turns:
        return []
    whole: list[ActionRecord] = []
    for record in shown[: max(0, len(shown) - keep_turns)]:
        if not record.finished:  # its result is not in: it and what follows stay
            break
        whole.append(record)
    return whole


def shown_records(records: Sequence[ActionRecord], folded: Collection[str]) -> list[ActionRecord]:
    """The records shown as calls (those not folded into the summary)."""
    return [r for r in records if r.key not in folded]


def digest(previous: str, records: Sequence[ActionRecord]) -> str:
    """The earlier summary and one line per folded call, the newest kept when long."""
    lines = [previous.strip()] if previous.strip() else []
    lines += [one_line(r) for r in records]
    text = "\n".join(lines)
    if len(text) <= DIGEST_CHARS:
        return text
    return "..." + text[-(DIGEST_CHARS - 3) :]


class Recall:
    """The calls and the memo for a prompt, from ``state``; ``fence`` makes a text safe
    inside a ``<tool_output>`` block."""

    def __init__(
        self,
        state: AgentState,
        caller: PhaseCaller,
        settings: HistorySettings,
        *,
        budget_tokens: int,
        fence: Callable[[str], str],
        checkpoint: Callable[[], Awaitable[None]],
    ) -> None:
        self.state, self.caller, self.settings = state, caller, settings
        self.budget_tokens, self.fence, self.checkpoint = budget_tokens, fence, checkpoint

    async def fold(self, goal: Goal | None) -> None:
        """Fold the oldest calls into the summary when the shown ones pass the bound."""
        state, fence = self.state, self.fence
        fold = turns_to_fold(list(state.records.values()), set(state.folded),
                             max_turns=self.settings.max_turns,
                             keep_turns=self.settings.keep_turns)  # fmt: skip
        if not fold:
            return
        calls = "\n".join(full_entry(r, CALL_CHARS) for r in fold)
        try:
            text = await self.caller.text("history_summary", limit=SUMMARY_TOKENS, goal=goal,
                                          previous=fence(state.history_summary),
                                          calls=fence(calls))  # fmt: skip
        except BudgetExceeded:
            text = ""
        state.history_summary = text or digest(state.history_summary, fold)
        state.folded.extend(r.key for r in fold)
        await self.checkpoint()

    def results(self, feedback_tokens: int = 0) -> str:
        """The calls so far for a prompt, fenced: the summary of the folded ones, then the
        rest (the newest in full while they fit the budget)."""
        state = self.state
        records = shown_records(list(state.records.values()), set(state.folded))
        summary = state.history_summary.strip()
        head = f"Summary of the {len(state.folded)} earlier calls:\n{summary}\n\n"
        head = head if summary else ""
        budget = max(200, self.budget_tokens - feedback_tokens - count_tokens(head))
        calls = compact_results(records, budget_tokens=budget, count=count_tokens)
        return self.fence(head + calls)

    def memo(self) -> str:
        """The memo's entries for a prompt, fenced ("" when the task has none)."""
        entries = self.state.memo
        return self.fence("\n".join(f"{n}. {e}" for n, e in enumerate(entries, start=1)))
