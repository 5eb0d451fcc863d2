"""The example workflow of docs/github-action.md: its concurrency group, evaluated for the
events it runs on, keeps a run of someone without access out of the maintainers' queue
(GitHub keeps one pending run per group and cancels it for the next: a stranger's comment
must never cancel a maintainer's `/agent approve`)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

DOC = Path(__file__).resolve().parents[2] / "docs" / "github-action.md"
_NAME = re.compile(r"\b(?:github|inputs)(?:\.[A-Za-z_]+)+")


def workflow() -> dict[str, Any]:
    text = DOC.read_text(encoding="utf-8")
    block = text.split("```yaml\n", 1)[1].split("```", 1)[0]
    loaded = yaml.safe_load(block)
    assert isinstance(loaded, dict)
    return loaded


def _lookup(context: dict[str, Any], name: str) -> Any:
    value: Any = context
    for part in name.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def _contains(items: Any, item: Any) -> bool:
    """GitHub's ``contains``: an array holding the item, strings compared ignoring case."""
    return isinstance(item, str) and item.lower() in [str(i).lower() for i in items]


def evaluate(template: str, context: dict[str, Any]) -> str:
    """Fill each ``${{ }}`` of ``template`` as GitHub's expression language would, for the
    operators this workflow uses (``||``, ``&&``, ``contains``, ``fromJSON``, literals)."""

    def one(match: re.Match[str]) -> str:
        expr = _NAME.sub(lambda m: f"_lookup(ctx, {m.group(0)!r})", match.group(1))
        expr = expr.replace("||", " or ").replace("&&", " and ")
        expr = expr.replace("fromJSON(", "json.loads(").replace("contains(", "_contains(")
        scope = {"ctx": context, "_lookup": _lookup, "_contains": _contains, "json": json}
        value = eval(expr, scope)  # noqa: S307 - the docs' own expression, in a test
        return "" if value is None else str(value)

    return re.sub(r"\$\{\{(.*?)\}\}", one, template, flags=re.S)


def group(event: dict[str, Any], run_id: int, inputs: dict[str, Any] | None = None) -> str:
    concurrency = workflow()["concurrency"]
    assert concurrency["cancel-in-progress"] is False
    context = {"github": {"event": event, "run_id": run_id}, "inputs": inputs or {}}
    return evaluate(concurrency["group"], context)


def comment(association: str) -> dict[str, Any]:
    return {"issue": {"number": 7}, "comment": {"author_association": association}}


def test_members_runs_of_one_issue_share_one_group() -> None:
    groups = {
        group(comment("OWNER"), 1),
        group(comment("MEMBER"), 2),
        group(comment("COLLABORATOR"), 3),
        group({"issue": {"number": 7}, "label": {"name": "coding agent"}}, 4),  # labelled
        group({}, 5, inputs={"issue": 7}),  # started by hand
        group({"pull_request": {"number": 7}, "review": {"author_association": "MEMBER"}}, 6),
    }
    assert groups == {"coding-agent-7-members"}
    assert group(comment("OWNER"), 1) != group({"issue": {"number": 8}, "comment": {
        "author_association": "OWNER"}}, 1)  # fmt: skip


def test_a_strangers_run_never_shares_the_maintainers_group() -> None:
    member = group(comment("OWNER"), 1)
    strangers = [
        group(comment(association), run)
        for run, association in enumerate(
            ["NONE", "CONTRIBUTOR", "FIRST_TIME_CONTRIBUTOR", "FIRST_TIMER", "MANNEQUIN"], 10
        )
    ]
    review = {"pull_request": {"number": 7}, "review": {"author_association": "NONE"}}
    strangers.append(group(review, 20))
    assert member not in strangers
    assert len(set(strangers)) == len(strangers)  # nor each other's: none cancels another
