"""The comment naming refused planning settings, in English and Japanese."""

from __future__ import annotations

from bot.comments.milestones import milestone_body
from bot.config import PlanningSettings
from bot.config.overrides import Layer, OverrideLayer, merge_planning
from bot.run_events import ProgressEvent, ProgressKind, progress_event


def event() -> ProgressEvent:
    merged = merge_planning(
        PlanningSettings(),
        [
            OverrideLayer(Layer.REPOSITORY, {"revision": {"max_revisions": 1}}),
            OverrideLayer(
                Layer.USER,
                {
                    "revision": {"max_revisions": 2, "require_human_approval": False},
                    "execution": {"early_termination": {"enabled": False}},
                    "strategy": "`@everyone`",
                },
            ),
        ],
    )
    refused = [{**r.as_data(), "user": "alice"} for r in merged.refused]
    return progress_event(ProgressKind.SETTINGS_REFUSED, {"refused": refused, "seq": 0})


def test_the_english_comment_names_each_key_its_source_and_its_bound() -> None:
    body = milestone_body(event(), "en", prefix="/agent", links={})
    assert body is not None
    lines = body.splitlines()
    assert lines[0] == "### ⚠️ Some planning settings were not applied"
    assert lines[1] == (
        "- `planning.revision.max_revisions` = `2` from the personal settings of alice "
        "(user_config_api): refused: at most `1` (the repository's value)"
    )
    assert lines[2] == (
        "- `planning.execution.early_termination.enabled` = `False` from the personal settings "
        "of alice (user_config_api): refused: it may only be switched on"
    )
    # the value cannot close its code span
    assert "- `planning.strategy` = `'@everyone'` from the personal settings" in lines[3]
    assert "refused: invalid (Input should be" in lines[3]


def test_the_japanese_comment_says_the_same() -> None:
    body = milestone_body(event(), "ja", prefix="/agent", links={})
    assert body is not None
    lines = body.splitlines()
    assert lines[0] == "### ⚠️ 一部のプランニング設定を適用しませんでした"
    assert lines[1] == (
        "- alice さんの個人設定（user_config_api） の `planning.revision.max_revisions` = `2`: "
        "拒否: 上限は `1` です（リポジトリの値）"
    )
    assert "有効にする方向にのみ変更できます" in lines[2]


def test_nothing_refused_posts_nothing() -> None:
    empty = progress_event(ProgressKind.SETTINGS_REFUSED, {"refused": []})
    assert milestone_body(empty, "en", prefix="/agent", links={}) is None
