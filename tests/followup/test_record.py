"""The after-PR record of a change request: kept as JSON, told apart per head commit."""

from __future__ import annotations

from bot.events import Check, CheckState, RoundKind, TaskState
from bot.followup.record import ChangeRecord, CiNote, RoundRecord


def test_the_record_survives_its_json_form() -> None:
    record = ChangeRecord(head_sha="a" * 40, gate_sha="a" * 40, ready=True)
    record.show_checks("a" * 40, [Check("test", CheckState.FAILED, log_id="9")])
    record.say(CiNote.FIX, ["test"])
    record.rounds.append(
        RoundRecord(
            RoundKind.CI,
            1,
            "a" * 40,
            "t-1",
            TaskState.DONE,
            about="test",
            tokens=12,
            cost=0.5,
            pushed_sha="b" * 40,
        )
    )
    again = ChangeRecord.from_dict(record.to_dict())
    assert again == record
    assert again.rounds_of(RoundKind.CI) == 1 and again.rounds_of(RoundKind.REVIEW) == 0
    assert again.round_of_task("t-1") is again.rounds[0] and again.running() is None
    assert (again.tokens, again.cost) == (12, 0.5)


def test_a_new_head_forgets_what_was_said_of_the_last_one() -> None:
    record = ChangeRecord()
    assert record.show_checks("a" * 40, [Check("test", CheckState.RUNNING)])
    assert not record.show_checks("a" * 40, [Check("test", CheckState.RUNNING)])  # no news
    assert record.say(CiNote.RUNNING) and not record.say(CiNote.RUNNING)
    assert record.show_checks("a" * 40, [Check("test", CheckState.PASSED)])
    record.say(CiNote.GREEN)
    assert record.show_checks("b" * 40, [])
    assert (record.note, record.names) == (CiNote.NONE, [])
