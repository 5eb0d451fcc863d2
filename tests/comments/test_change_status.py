"""The status comment's section about the change request, and the replies in review
threads: English and Japanese, the rounds' figures added to the task's own."""

from __future__ import annotations

import pytest

from bot.comments.change_status import MAX_CHECKS_SHOWN, after_text, checks_line, thread_reply
from bot.events import Check, CheckState, ForgeKind, IssueRef, RepoRef, RoundKind, TaskState
from bot.followup.record import ChangeRecord, CiNote, RoundRecord

CHANGE = IssueRef(
    RepoRef(ForgeKind.GITHUB, "o/r"),
    7,
    is_change_request=True,
    web_url="https://github.example/o/r/pull/7",
)


def record() -> ChangeRecord:
    found = ChangeRecord()
    found.show_checks(
        "a" * 40, [Check("lint", CheckState.PASSED), Check("test", CheckState.FAILED)]
    )
    found.say(CiNote.FIX, ["test"])
    found.rounds.append(
        RoundRecord(
            RoundKind.CI, 1, "a" * 40, "t", TaskState.RUNNING, about="test", tokens=1500, cost=0.25
        )
    )
    return found


@pytest.mark.parametrize("language", ["en", "ja"])
def test_the_section_shows_checks_decision_rounds_and_totals(language: str) -> None:
    text = after_text(
        record(), CHANGE, language, prefix="/agent", limit=3, base="main", own=(1000, 0.5)
    )
    assert CHANGE.web_url in text and "`aaaaaaa`" in text
    assert "✅ lint · ❌ test" in text
    assert "2,500" in text and "$0.75" in text  # the task's own figures and the rounds'
    if language == "en":
        assert "🔧 Failing: test. CI fix round 1 of 3 started." in text
        assert "- CI fix round 1 on `aaaaaaa`: 🛠️ Working — test · 1,500 tokens" in text


def test_many_checks_are_cut_and_names_are_one_line() -> None:
    checks = [Check(f"job {n}\nsecond line", CheckState.PASSED) for n in range(30)]
    line = checks_line(checks)
    assert line.endswith(f"+{30 - MAX_CHECKS_SHOWN}") and "\n" not in line


def test_a_thread_reply_says_what_changed_or_why_nothing_did() -> None:
    assert thread_reply("en", commit="c" * 40, reply="renamed") == f"Changed in {'c' * 12}: renamed"
    assert thread_reply("en", commit=None, reply="") == (
        "No change for this thread: the round did not say why."
    )
    assert thread_reply("ja", commit=None, reply="x").startswith("このスレッドでは変更していません")
