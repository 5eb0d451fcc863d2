"""Merging a repository's and a person's ``planning`` overrides under the server's bounds
(bot/config/overrides.py): what is applied, what is refused and why, naming the key."""

from __future__ import annotations

from typing import Any

from bot.config import PlanningSettings
from bot.config.overrides import (
    RULES,
    EffectivePlanning,
    Layer,
    OverrideLayer,
    Refused,
    merge_planning,
)

SERVER = PlanningSettings.model_validate(
    {
        "max_subtasks": 50,
        "revision": {"max_revisions": 3, "require_human_approval": False},
        "execution": {"early_termination": {"enabled": True}},
    }
)


def merge(
    repo: dict[str, Any] | None = None,
    user: dict[str, Any] | None = None,
    server: PlanningSettings = SERVER,
) -> EffectivePlanning:
    return merge_planning(
        server,
        [OverrideLayer(Layer.REPOSITORY, repo or {}), OverrideLayer(Layer.USER, user or {})],
    )


def refusals(result: EffectivePlanning) -> dict[str, Refused]:
    return {r.key: r.reason for r in result.refused}


def test_without_overrides_the_server_settings_stand() -> None:
    result = merge()
    assert result.planning == SERVER
    assert result.applied == () and result.refused == ()


def test_a_repository_may_lower_numbers_choose_strategy_and_level_and_ask_for_approval() -> None:
    result = merge(
        {
            "strategy": "hierarchical",
            "decomposition_level": "detailed",
            "max_subtasks": 10,
            "revision": {"max_revisions": 1, "require_human_approval": True},
        }
    )
    planning = result.planning
    assert planning.strategy == "hierarchical" and planning.decomposition_level == "detailed"
    assert planning.max_subtasks == 10
    assert planning.revision.max_revisions == 1
    assert planning.revision.require_human_approval is True
    assert result.refused == ()
    assert {a.key for a in result.applied} == {
        "planning.strategy",
        "planning.decomposition_level",
        "planning.max_subtasks",
        "planning.revision.max_revisions",
        "planning.revision.require_human_approval",
    }
    assert all(a.layer is Layer.REPOSITORY for a in result.applied)


def test_values_past_the_server_bounds_are_refused_naming_the_key_and_the_limit() -> None:
    result = merge(
        {
            "max_subtasks": 500,
            "revision": {"max_revisions": 10},
            "execution": {"early_termination": {"enabled": False}},
        }
    )
    assert result.planning == SERVER  # nothing of it applied
    assert refusals(result) == {
        "planning.max_subtasks": Refused.ABOVE_LIMIT,
        "planning.revision.max_revisions": Refused.ABOVE_LIMIT,
        "planning.execution.early_termination.enabled": Refused.ONLY_TOWARDS_TRUE,
    }
    revisions = next(r for r in result.refused if r.key == "planning.revision.max_revisions")
    assert (revisions.value, revisions.limit, revisions.limit_from) == (10, 3, Layer.SERVER)
    assert revisions.describe() == (
        "planning.revision.max_revisions: 10 from the repository settings "
        "may be at most 3 (the server's value): refused"
    )


def test_approval_can_only_be_switched_on_and_planning_only_off() -> None:
    strict = SERVER.model_copy(
        update={"revision": SERVER.revision.model_copy(update={"require_human_approval": True})}
    )
    result = merge({"revision": {"require_human_approval": False}}, server=strict)
    assert result.planning.revision.require_human_approval is True
    assert refusals(result) == {
        "planning.revision.require_human_approval": Refused.ONLY_TOWARDS_TRUE
    }

    off = SERVER.model_copy(update={"enabled": False})
    assert refusals(merge({"enabled": True}, server=off)) == {
        "planning.enabled": Refused.ONLY_TOWARDS_FALSE
    }
    assert merge(user={"enabled": False}).planning.enabled is False


def test_server_keys_unknown_keys_and_invalid_values_are_refused_by_name() -> None:
    result = merge(
        {
            "security": {"forbidden_tools": []},
            "user_config_api": {"enabled": True},
            "max_revisions": 2,  # belongs under revision:
            "strategy": "guess",
            "reflection": 3,
            "revision": {"max_revisions": -1},
        }
    )
    assert result.planning == SERVER
    assert refusals(result) == {
        "planning.security": Refused.SERVER_ONLY,
        "planning.user_config_api": Refused.SERVER_ONLY,
        "planning.max_revisions": Refused.UNKNOWN_KEY,
        "planning.strategy": Refused.INVALID,
        "planning.reflection": Refused.INVALID,
        "planning.revision.max_revisions": Refused.INVALID,
    }
    strategy = next(r for r in result.refused if r.key == "planning.strategy")
    assert "chain_of_thought" in strategy.detail  # pydantic's message lists the choices


def test_a_person_is_bounded_by_what_the_repository_tightened() -> None:
    result = merge(
        repo={"revision": {"max_revisions": 1, "require_human_approval": True}},
        user={
            "strategy": "simple",
            "revision": {"max_revisions": 2, "require_human_approval": False},
        },
    )
    planning = result.planning
    assert planning.strategy == "simple"
    assert planning.revision.max_revisions == 1
    assert planning.revision.require_human_approval is True
    by_key = {r.key: r for r in result.refused}
    assert set(by_key) == {
        "planning.revision.max_revisions",
        "planning.revision.require_human_approval",
    }
    assert by_key["planning.revision.max_revisions"].layer is Layer.USER
    assert by_key["planning.revision.max_revisions"].limit_from is Layer.REPOSITORY
    assert result.origin == {
        "revision.max_revisions": Layer.REPOSITORY,
        "revision.require_human_approval": Layer.REPOSITORY,
        "strategy": Layer.USER,
    }


def test_a_person_may_loosen_within_the_server_what_the_repository_left_free() -> None:
    result = merge(repo={"strategy": "hierarchical"}, user={"strategy": "simple"})
    assert result.planning.strategy == "simple"
    assert [(a.layer, a.value) for a in result.applied] == [
        (Layer.REPOSITORY, "hierarchical"),
        (Layer.USER, "simple"),
    ]


def test_a_money_budget_may_be_set_where_there_is_none_and_only_lowered() -> None:
    result = merge(repo={"budget": {"max_cost": 2.5}}, user={"budget": {"max_cost": 1.0}})
    assert result.planning.budget.max_cost == 1.0 and result.refused == ()

    capped = merge(repo={"budget": {"max_cost": 2.5}}, user={"budget": {"max_cost": None}})
    assert capped.planning.budget.max_cost == 2.5
    assert refusals(capped) == {"planning.budget.max_cost": Refused.ABOVE_LIMIT}
    assert refusals(merge(user={"budget": {"max_cost": 3.0}}, server=capped.planning)) == {
        "planning.budget.max_cost": Refused.ABOVE_LIMIT
    }


def test_the_specification_example_answer_merges() -> None:
    # seeds/004 9.3: the user_config_api answer's planning part
    example = {
        "enabled": True,
        "strategy": "chain_of_thought",
        "max_subtasks": 100,
        "reflection": {"enabled": True, "trigger_interval": 5},
    }
    result = merge(user=example)
    assert result.planning.reflection.trigger_interval == 5
    assert refusals(result) == {"planning.max_subtasks": Refused.ABOVE_LIMIT}  # server: 50


def test_the_report_lists_every_overridable_key_with_its_origin() -> None:
    result = merge(repo={"revision": {"max_revisions": 2}}, user={"max_subtasks": 99})
    lines = result.report_lines()
    assert len(lines) == len(RULES) + 1
    assert "- `planning.revision.max_revisions` = `2` (repository)" in lines
    assert '- `planning.strategy` = `"chain_of_thought"` (server)' in lines
    assert lines[-1].startswith("- refused: planning.max_subtasks: 99 from the user settings")
    data = result.as_data()
    assert data["values"]["planning.revision.max_revisions"] == 2
    assert data["applied"] == [
        {
            "key": "planning.revision.max_revisions",
            "value": 2,
            "previous": 3,
            "source": "repository",
        }
    ]
    assert data["refused"][0]["reason"] == "above_limit"


def test_every_rule_names_a_real_planning_key() -> None:
    data = PlanningSettings().model_dump()
    for key in RULES:
        value: Any = data
        for part in key.split("."):
            value = value[part]
        assert not isinstance(value, dict), key
