import jinja2
import pytest

from bot.comments.labels import label_for, managed, transition
from bot.comments.language import detect_language
from bot.comments.milestones import milestone_body, pause_reason
from bot.comments.render import (
    Marker,
    excerpt,
    find_markers,
    finish,
    quote,
    render,
    template_keys,
)
from bot.comments.status import StatusView
from bot.config import LabelSettings
from bot.run_events import Paused, PauseReason, ProgressEvent, ProgressKind, progress_event
from bot.storage.base import TaskState


def test_english_and_japanese_have_the_same_templates() -> None:
    assert template_keys("en") == template_keys("ja")
    assert len(template_keys("en")) > 30


def test_rendering_is_strict() -> None:
    with pytest.raises(jinja2.UndefinedError):
        render("denied", "en", quote="")


def test_marker_round_trip() -> None:
    marker = Marker("3f2a-b", "revision", 2)
    body = finish("hello", marker=marker, language="en", max_length=1000)
    assert find_markers(body) == [marker]
    assert body.startswith("hello")


def test_long_comments_are_cut_with_a_pointer_to_the_report() -> None:
    text = "```\n" + "x" * 100 + "\n" + "line\n" * 50_000
    body = finish(
        text,
        marker=Marker("t", "status"),
        language="en",
        max_length=65_536,
        report_url="https://bot.example/dashboard/tasks/t",
    )
    assert len(body) <= 65_536
    assert "the full text is in the run report: https://bot.example/dashboard/tasks/t" in body
    assert body.count("```") % 2 == 0
    assert find_markers(body) == [Marker("t", "status")]


def test_finish_redacts_secrets() -> None:
    token = "ghs_" + "A" * 36
    body = finish(
        f"token {token} and hunter22",
        marker=Marker("t", "notice"),
        language="en",
        max_length=1000,
        secrets=("hunter22",),
    )
    assert token not in body and "hunter22" not in body
    assert body.count("[REDACTED]") == 2


@pytest.mark.parametrize(
    ("text", "lang"),
    [
        ("READMEにインストール手順を追加してください", "ja"),
        ("Add install steps to the README", "en"),
        ("バグ修正 for the parser", "ja"),
        ("", "en"),
        ("12345 !!!", "en"),
    ],
)
def test_language_detection(text: str, lang: str) -> None:
    assert detect_language(text) == lang


def test_label_transitions_only_touch_managed_labels() -> None:
    labels = LabelSettings()
    add, remove = transition(labels, ("bug", "coding agent"), TaskState.RUNNING)
    assert add == ["coding agent processing"] and remove == ["coding agent"]
    add, remove = transition(labels, ("bug", "coding agent processing"), TaskState.NEEDS_HUMAN)
    assert add == ["coding agent help needed"] and remove == ["coding agent processing"]
    add, remove = transition(labels, ("coding agent done",), TaskState.DONE)
    assert add == [] and remove == []
    assert label_for(labels, TaskState.AWAITING_APPROVAL) == "coding agent waiting"
    assert len({name for name, _, _ in managed(labels)}) == 7


PLAN = {
    "goal_understanding": {"main_objective": "Add install steps"},
    "task_decomposition": {
        "reasoning": "r",
        "subtasks": [
            {"id": "task_1", "description": "Read the README"},
            {"id": "task_2", "description": "Write the install section"},
        ],
    },
    "action_plan": {"execution_order": ["task_1", "task_2"], "actions": []},
}


def test_status_view_checklist_progress_tokens_links() -> None:
    view = StatusView(state=TaskState.RUNNING)
    view.apply(progress_event(ProgressKind.PLAN, {"plan": PLAN}))
    view.apply(progress_event(ProgressKind.ACTION, {"task_id": "task_1", "status": "done"}))
    view.apply(progress_event(ProgressKind.ACTION, {"task_id": "task_2", "status": "running"}))
    view.apply(progress_event(ProgressKind.USAGE, {"total_tokens": 4321}))
    view.apply(
        progress_event(
            ProgressKind.LINKS,
            {
                "branch": "agent/7-x",
                "change_request_url": "https://pr/1",
                "report_path": "/srv/bot/data/runs/t/report.md",
                "gate": {
                    "result": "failed",
                    "steps": [
                        {"name": "lint", "command": "ruff check .", "status": "passed",
                         "counts": {"errors": 0}},
                        {"name": "test", "command": "pytest -q", "status": "failed",
                         "counts": {"failed": 1, "passed": 3}},
                    ],
                },
            },
        )
    )  # fmt: skip
    text = view.render("en")
    assert "- [x] ✅ Read the README" in text
    assert "- [ ] 🔄 Write the install section" in text
    assert "**1/2**" in text and "4,321" in text
    assert "`agent/7-x`" in text and "https://pr/1" in text
    assert "**Quality gate:** ❌ failed" in text
    assert "- lint `ruff check .`: passed (0 errors)" in text
    assert "- tests `pytest -q`: failed (1 failed, 3 passed)" in text
    assert "/srv/bot" not in text  # never a path on the bot's host
    assert "<details><summary>Plan (JSON)</summary>" in text
    ja = view.render("ja")
    assert "進捗" in ja and "作業中" in ja
    assert (
        "**品質ゲート:** ❌ 不合格" in ja and "- テスト `pytest -q`: 失敗（失敗 1, 成功 3）" in ja
    )


def test_a_gate_with_no_checks_configured_is_not_shown_as_passed() -> None:
    view = StatusView(state=TaskState.DONE)
    steps = [{"name": n, "command": "", "status": "not_configured", "counts": {}}
             for n in ("lint", "test")]  # fmt: skip
    view.apply(progress_event(ProgressKind.LINKS, {"gate": {"result": "not_configured",
                                                           "steps": steps}}))  # fmt: skip
    text = view.render("en")
    assert "**Quality gate:** ⚪ no checks configured" in text and "passed" not in text
    assert "- lint: not configured" in text


def test_waiting_shows_in_the_status() -> None:
    view = StatusView(state=TaskState.AWAITING_APPROVAL)
    view.apply(progress_event(ProgressKind.APPROVAL_REQUEST, {"what": "the revised plan"}))
    assert "Waiting on you:** the revised plan" in view.render("en")


def test_milestones_render_in_both_languages() -> None:
    events = [
        progress_event(
            ProgressKind.REVISION,
            {"number": 1, "limit": 3, "reason": "404", "changes": ["list files first"]},
        ),
        progress_event(
            ProgressKind.REFLECTION,
            {
                "action": "get file",
                "status": "failure",
                "evaluation": "missing",
                "issues": ["path"],
            },
        ),
        progress_event(ProgressKind.CLARIFICATION, {"questions": ["Which file?"]}),
        progress_event(ProgressKind.APPROVAL_REQUEST, {"what": "plan", "timeout": 3600}),
        progress_event(ProgressKind.PAUSED, {"reason": "llm_unavailable", "endpoint": "http://x"}),
        progress_event(
            ProgressKind.COMPLETION,
            {
                "summary": {
                    "goal_achieved": True,
                    "tasks_completed": 2,
                    "tasks_failed": 0,
                    "key_outcomes": ["done"],
                }
            },
        ),
        progress_event(
            ProgressKind.HUMAN_INTERVENTION,
            {"summary": {"reason": "limit", "recommendations": ["check the path"]}},
        ),
    ]
    for lang in ("en", "ja"):
        for event in events:
            body = milestone_body(event, lang, prefix="/agent", links={})
            assert body, event.kind
    en = milestone_body(events[3], "en", prefix="/agent", links={})
    assert en is not None and "`/agent approve`" in en and "1 h" in en
    assert (
        milestone_body(progress_event(ProgressKind.USAGE, {}), "en", prefix="/a", links={}) is None
    )


def test_a_quote_is_short_and_pings_nobody() -> None:
    text = "x" * 65_000 + "\n" + "\n".join(f"@alice line {n}" for n in range(50))
    lines = quote(text).splitlines()
    assert lines[0] == "> " + "x" * 200 + "\u2026"
    assert lines[1:5] == [f"> @\u200balice line {n}" for n in range(4)]
    assert lines[5:] == ["> \u2026", ""]
    assert quote("mail a@b.c, cc @bob-x and @@carol") == (
        "> mail a@b.c, cc @\u200bbob-x and @@\u200bcarol\n\n"
    )
    assert excerpt("why:\n  @team/leads  said so " + "y" * 300, limit=20) == (
        "why: @\u200bteam/leads sai\u2026"
    )


@pytest.mark.parametrize("language", ["en", "ja"])
def test_each_pause_reason_has_its_own_words_and_a_persons_words_are_kept(
    language: str,
) -> None:
    said = {
        reason: pause_reason(Paused(reason=reason.value, endpoint="E"), language, prefix="/x")
        for reason in PauseReason
    }
    assert len(set(said.values())) == len(PauseReason)  # three different texts
    assert "E" in said[PauseReason.LLM_UNAVAILABLE]
    assert "/x" in said[PauseReason.APPROVAL_TIMEOUT] and "/x" in said[PauseReason.PERSON]
    assert pause_reason(Paused(reason="maintenance window"), language, prefix="/x") == (
        "maintenance window"
    )


def test_status_shows_cached_tokens_apart_in_both_languages() -> None:
    view = StatusView(state=TaskState.RUNNING)
    view.apply(progress_event(ProgressKind.USAGE, {"total_tokens": 4321}))
    assert view.render("en").endswith("Tokens: 4,321")  # nothing cached: nothing said
    view.apply(progress_event(ProgressKind.USAGE, {"total_tokens": 9000, "cached_tokens": 3072}))
    assert "Tokens: 9,000 (3,072 cached)" in view.render("en")
    assert "トークン: 9,000（うちキャッシュ 3,072）" in view.render("ja")
    restored = StatusView(state=TaskState.RUNNING)
    restored.restore({"total_tokens": 9000, "cached_tokens": 3072})
    assert "Tokens: 9,000 (3,072 cached)" in restored.render("en")


def test_a_failed_set_up_shows_its_command_and_output_tail_in_english_and_japanese() -> None:
    tail = "Collecting nosuchpkg\nERROR: ```no``` matching distribution"
    event = progress_event(
        ProgressKind.HUMAN_INTERVENTION,
        {
            "summary": {"reason": "the set-up command failed"},
            "setup": {"command": "make `setup`", "exit_code": 2, "timed_out": False, "tail": tail},
        },
    )
    en = milestone_body(event, "en", prefix="/agent", links={})
    ja = milestone_body(event, "ja", prefix="/agent", links={})
    assert en is not None and ja is not None
    assert "**Set-up failed:** `make 'setup'` (exit code 2)" in en
    assert "**セットアップに失敗しました:** `make 'setup'`（終了コード 2）" in ja
    for body in (en, ja):
        # the output's own ``` cannot close the block: the fence is longer
        assert f"````text\n{tail}\n````" in body
    timed_out = progress_event(
        ProgressKind.HUMAN_INTERVENTION,
        {"summary": {"reason": "r"}, "setup": {"command": "x", "timed_out": True, "tail": "t"}},
    )
    assert "(timed out)" in (milestone_body(timed_out, "en", prefix="/a", links={}) or "")
    assert "（時間切れ）" in (milestone_body(timed_out, "ja", prefix="/a", links={}) or "")
    plain = milestone_body(events_without_setup(), "en", prefix="/a", links={})
    assert plain is not None and "Set-up" not in plain


def events_without_setup() -> ProgressEvent:
    return progress_event(ProgressKind.HUMAN_INTERVENTION, {"summary": {"reason": "limit"}})


def test_a_request_for_a_person_shows_criteria_partial_plan_work_and_the_report() -> None:
    data = {
        "reason": "the task could not be decomposed: no tool can publish",
        "summary": {
            "reason": "the task could not be decomposed: no tool can publish",
            "criteria": ["? The release is on PyPI — no evidence in the record"],
            "recommendations": ["Review the unfinished work pushed to https://pr/3"],
        },
        "tried": [],
        "partial_plan": {
            "feasible_subtasks": [{"id": "task_1", "description": "update the changelog"}],
            "infeasible_subtasks": ["publish to PyPI"],
            "alternative_approaches": ["a maintainer runs the release"],
        },
        "report": "# Run report: Release\n\n**Outcome:** needs a person",
    }
    links = {"branch": "agent/3-release", "change_request_url": "https://pr/3"}
    event = progress_event(ProgressKind.HUMAN_INTERVENTION, data)
    body = milestone_body(event, "en", prefix="/agent", links=links)
    assert body is not None
    assert "**Success criteria and their evidence:**\n- ? The release is on PyPI" in body
    assert (
        "**What of the plan could be done:**\n- feasible: update the changelog\n"
        "- not feasible: publish to PyPI\n- alternative: a maintainer runs the release"
    ) in body
    assert "The work so far: Branch: `agent/3-release` · Change request: https://pr/3" in body
    assert body.rstrip().endswith(
        "<details><summary>Run report</summary>\n\n# Run report: Release\n\n"
        "**Outcome:** needs a person\n</details>"
    )
    ja = milestone_body(event, "ja", prefix="/agent", links=links)
    assert ja is not None and "実行可能: update the changelog" in ja and "実行レポート" in ja


def test_the_done_comment_lists_each_criterion_with_its_evidence() -> None:
    summary = {
        "goal_achieved": True,
        "tasks_completed": 2,
        "tasks_failed": 0,
        "criteria": ["✔ README has an Installation section — quality gate test: passed"],
    }
    event = progress_event(ProgressKind.COMPLETION, {"summary": summary, "report": "r"})
    body = milestone_body(event, "en", prefix="/agent", links={})
    assert body is not None and body.startswith("### ✅ Done\n")
    assert "not fully achieved" not in body
    assert "- ✔ README has an Installation section — quality gate test: passed" in body
