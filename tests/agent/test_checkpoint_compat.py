"""Checkpoints written by earlier versions (tests/agent/checkpoints/*.json) still resume.

Each fixture is a real checkpoint an older version stored at a resting point (waiting
for an approval or answers, paused, crashed mid-task, finished); the current code
loads it and runs the task to the end its scenario expects.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import pytest

from bot import run_events
from bot.record.snapshot import status_snapshot
from bot.run_events import EVENT_TYPES, ProgressKind, progress_event
from tests.agent.checkpoint_scenarios import CHECKPOINTS, SCENARIOS, harness_for, resume


def fixture(name: str) -> dict[str, Any]:
    data = json.loads((CHECKPOINTS / f"{name}.json").read_text(encoding="utf-8"))
    assert data["scenario"] == name and isinstance(data["checkpoint"], dict)
    return dict(data)


def stored(name: str) -> dict[str, Any]:
    return dict(fixture(name)["checkpoint"])


def test_every_scenario_has_a_stored_checkpoint_and_every_fixture_a_scenario() -> None:
    assert {p.stem for p in CHECKPOINTS.glob("*.json")} == {s.name for s in SCENARIOS}


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
async def test_a_stored_checkpoint_resumes_to_its_expected_end(
    scenario: Any, tmp_path: Path, stack: contextlib.AsyncExitStack
) -> None:
    harness = await harness_for(scenario, tmp_path, stack)
    await resume(scenario, stored(scenario.name), harness)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_the_status_view_of_a_stored_checkpoint_is_what_it_was(scenario: Any) -> None:
    data = fixture(scenario.name)
    snapshot = status_snapshot(data["checkpoint"])
    assert snapshot is not None and snapshot == data["status_snapshot"]
    assert snapshot["plan"] or scenario.name == "waiting_for_answers"


def test_a_stored_closing_event_of_every_kind_reads_back_as_its_class() -> None:
    """``progress_event`` finds each kind's class: the one the module names (the slotted
    dataclass, not the class its body made first), and keys it does not have are left out."""
    assert set(EVENT_TYPES) == set(ProgressKind)
    for kind, cls in EVENT_TYPES.items():
        assert cls.kind is kind and getattr(run_events, cls.__name__) is cls
        assert "__dict__" not in dir(cls)
    notice = progress_event("notice", {"text": "hello", "from_a_later_version": 1})
    assert notice == run_events.Notice(text="hello") and type(notice) is run_events.Notice
