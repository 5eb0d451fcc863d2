"""Every stage move the loop can request is in the stage table (issue 31).

The moves are derived from the code, not listed by hand: which results each review method
can return (read from ``bot/agent/review.py``, following the methods it returns through),
which of those reach ``act_on`` in which stage's handler (read from ``bot/agent/loop.py``),
and what ``act_on`` then moves to (the real function, run on each result at that stage).
The handlers' own moves (a direct ``move``, ``ask``, ``needs_person``, ``revise``) are read
from their bodies. A future helper that returns a new result, or a handler that hands a
result to ``act_on`` in another stage, is checked against ``NEXT_STAGES`` here.
"""

from __future__ import annotations

import ast
import contextlib
import inspect
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from unittest.mock import AsyncMock, MagicMock

import pytest

from bot.agent import loop
from bot.agent.review import AskAuthor, Continue, GiveUp, Review, ReviewResult
from bot.agent.revision import Revise, RevisionSuggestion
from bot.record.state import NEXT_STAGES, AgentState, Stage, Waiting
from bot.run_events import WaitKind

RESULTS = {cls.__name__: cls for cls in (Continue, GiveUp, AskAuthor, Revise)}
# the loop's own functions and the stage each one moves to before anything else happens
ENTRY_MOVES = {"ask": Stage.WAIT, "needs_person": Stage.DONE, "end": Stage.DONE,
               "revise": Stage.REVISE}  # fmt: skip


@dataclass(frozen=True)
class Result:
    kind: str  # a name of RESULTS
    stage: Stage | None = None  # Continue's stage


def _tree(module: Any) -> ast.Module:
    return ast.parse(Path(inspect.getfile(module)).read_text())


def _functions(node: ast.AST) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    return {
        n.name: n
        for n in ast.iter_child_nodes(node)
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
    }


def _stage_of(node: ast.expr) -> Stage:
    assert isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name), ast.dump(node)
    assert node.value.id == "Stage", ast.dump(node)
    return Stage[node.attr]


def _stages(node: ast.expr) -> set[Stage | None]:
    if isinstance(node, ast.IfExp):
        return _stages(node.body) | _stages(node.orelse)
    if isinstance(node, ast.Constant) and node.value is None:
        return {None}
    return {_stage_of(node)}


def _literal(call: ast.Call) -> set[Result]:
    """The results a call builds (none when it is not a result's constructor)."""
    if not isinstance(call.func, ast.Name) or call.func.id not in RESULTS:
        return set()
    if call.func.id != "Continue":
        return {Result(call.func.id)}
    args = [*call.args[:1], *(k.value for k in call.keywords if k.arg == "stage")]
    stages = _stages(args[0]) if args else {None}
    return {Result("Continue", stage) for stage in stages}


def _assigned(func: ast.AST, name: str) -> Iterator[ast.expr]:
    for node in ast.walk(func):
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in node.targets
        ):
            yield node.value


class ReviewResults:
    """The results each method of ``Review`` can return, read from its source."""

    def __init__(self) -> None:
        [cls] = [
            n for n in ast.walk(_tree(inspect.getmodule(Review)))
            if isinstance(n, ast.ClassDef) and n.name == "Review"
        ]  # fmt: skip
        self.methods = _functions(cls)

    def gives_result(self, method: str) -> bool:
        """Whether the method is declared to return a review result (others, such as
        ``resume``, return records the handler passes on)."""
        returns = self.methods[method].returns
        names = {n.id for n in ast.walk(returns) if isinstance(n, ast.Name)} if returns else set()
        return bool(names & {*RESULTS, "ReviewResult"})

    def of(self, method: str, seen: frozenset[str] = frozenset()) -> set[Result]:
        func = self.methods[method]
        found: set[Result] = set()
        for node in ast.walk(func):
            if isinstance(node, ast.Return) and node.value is not None:
                found |= self._expr(func, node.value, seen | {method})
        return found

    def _expr(self, func: ast.AST, expr: ast.expr, seen: frozenset[str]) -> set[Result]:
        if isinstance(expr, ast.Await):
            return self._expr(func, expr.value, seen)
        if isinstance(expr, ast.IfExp):
            return self._expr(func, expr.body, seen) | self._expr(func, expr.orelse, seen)
        if isinstance(expr, ast.Name):
            values = list(_assigned(func, expr.id))
            assert values, f"{expr.id} is returned but never assigned"
            return set().union(*(self._expr(func, v, seen) for v in values))
        assert isinstance(expr, ast.Call), f"a review result the test cannot read: {ast.dump(expr)}"
        literal = _literal(expr)
        if literal:
            return literal
        callee = expr.func
        if (
            isinstance(callee, ast.Attribute)
            and isinstance(callee.value, ast.Name)
            and callee.value.id == "self"
            and callee.attr in self.methods
        ):
            return set() if callee.attr in seen else self.of(callee.attr, seen)
        raise AssertionError(f"a review result the test cannot read: {ast.dump(expr)}")


def _handlers() -> dict[Stage, ast.AsyncFunctionDef]:
    tree = _tree(loop)
    functions = _functions(tree)
    [table] = [
        n.value for n in tree.body
        if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
        and n.target.id == "HANDLERS"
    ]  # fmt: skip
    assert isinstance(table, ast.Dict)
    out = {}
    for key, value in zip(table.keys, table.values, strict=True):
        assert key is not None and isinstance(value, ast.Name)
        handler = functions[value.id]
        assert isinstance(handler, ast.AsyncFunctionDef)
        out[_stage_of(key)] = handler
    assert set(out) == set(loop.HANDLERS)
    return out


def _calls(func: ast.AST, name: str) -> list[ast.Call]:
    return [
        n for n in ast.walk(func)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == name
    ]  # fmt: skip


def _fed_to_act_on(handler: ast.AsyncFunctionDef, results: ReviewResults) -> set[Result]:
    """The results a handler hands to ``act_on``: of the review methods it calls there, and
    the results it builds itself."""
    found: set[Result] = set()

    def collect(expr: ast.expr) -> None:
        for node in ast.walk(expr):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute):
                if node.value.attr == "review" and results.gives_result(node.attr):
                    found.update(results.of(node.attr))
            elif isinstance(node, ast.Call) and _literal(node):
                found.update(_literal(node))
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                for value in _assigned(handler, node.id):
                    collect(value)

    for call in _calls(handler, "act_on"):
        collect(call.args[1])
    return found


def _own_moves(handler: ast.AsyncFunctionDef) -> set[Stage]:
    """Where a handler moves by itself: ``move(run, Stage.X)`` and the loop's functions
    that move first thing (``revise``'s second move, to execute, is checked from revise)."""
    targets: set[Stage] = set()
    for call in _calls(handler, "move"):
        targets |= {stage for stage in _stages(call.args[1]) if stage is not None}
    for name, stage in ENTRY_MOVES.items():
        if _calls(handler, name):
            targets.add(stage)
    return targets


def _instance(result: Result) -> ReviewResult:
    match result.kind:
        case "Continue":
            return Continue(result.stage)
        case "GiveUp":
            return GiveUp("a person is needed")
        case "AskAuthor":
            return AskAuthor(Waiting(WaitKind.JUDGEMENT, what="a result"))
        case _:
            return Revise(RevisionSuggestion("revise"))


def _fake_run(stage: Stage) -> loop.Run:
    state = AgentState()
    state.stage = stage
    session = MagicMock(state=state, show=AsyncMock(), checkpoint=AsyncMock())
    finish = MagicMock(intervention=AsyncMock(), close=AsyncMock())
    reviser = MagicMock(revise=AsyncMock(return_value=None))
    reviser.over_limit.return_value = None
    people = MagicMock(ask=AsyncMock())
    delivery = MagicMock(save_work=AsyncMock(return_value={}))
    return loop.Run(session, MagicMock(), people, MagicMock(), MagicMock(), reviser, delivery,
                    finish)  # fmt: skip


async def _moves_of_act_on(
    stage: Stage, result: ReviewResult, monkeypatch: pytest.MonkeyPatch
) -> list[tuple[Stage, Stage]]:
    moves: list[tuple[Stage, Stage]] = []
    real = loop.can_move

    def recording(current: Stage, target: Stage) -> bool:
        moves.append((current, target))
        return real(current, target)

    monkeypatch.setattr(loop, "can_move", recording)
    monkeypatch.setattr(loop, "ends", SimpleNamespace(keep_ending=lambda *_: None,
                                                      announce=AsyncMock()))  # fmt: skip
    # the refused move is in ``moves``
    with contextlib.suppress(loop.Exit, loop.InvalidTransition):
        await loop.act_on(_fake_run(stage), result)
    return moves


def test_the_review_methods_results_are_read_from_the_code() -> None:
    results = ReviewResults()
    after_batch = results.of("after_batch")
    # what the issue was about: a result nobody could judge asks its author
    assert Result("AskAuthor") in after_batch
    assert {Result("GiveUp"), Result("Revise"), Result("Continue", Stage.EXECUTE),
            Result("Continue", Stage.DELIVER)} <= after_batch  # fmt: skip
    assert results.of("feedback") == {Result("Continue"), Result("Revise")}
    assert results.of("disagreement") == {Result("Revise")}


async def test_every_move_the_loop_can_request_is_in_the_stage_table(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    results = ReviewResults()
    refused: list[str] = []
    checked = 0
    for stage, handler in _handlers().items():
        for target in _own_moves(handler):
            checked += 1
            if target not in NEXT_STAGES[stage]:
                refused.append(f"{handler.name}: {stage.value} -> {target.value}")
        for result in sorted(_fed_to_act_on(handler, results), key=repr):
            for current, target in await _moves_of_act_on(stage, _instance(result), monkeypatch):
                checked += 1
                if target not in NEXT_STAGES[current]:
                    refused.append(
                        f"{handler.name} -> act_on({result.kind}"
                        f"{'' if result.stage is None else ' ' + result.stage.value}): "
                        f"{current.value} -> {target.value}"
                    )
    # people's answers and approvals act only on a pending request: only while waiting
    for target in _own_moves(_functions(_tree(loop))["safe_point"]):  # type: ignore[arg-type]
        checked += 1
        if target not in NEXT_STAGES[Stage.WAIT]:
            refused.append(f"safe_point: wait -> {target.value}")
    assert checked > 20
    assert refused == [], "moves the stage table refuses:\n" + "\n".join(refused)
