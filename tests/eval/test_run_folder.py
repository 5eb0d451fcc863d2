"""The run folder: a line a crash cut is skipped and closed; a missing prediction mended."""

from __future__ import annotations

import json
from pathlib import Path

from bot.eval.results import RunFolder, TaskResult, read_results


def result(name: str, resolved: bool = True) -> TaskResult:
    return TaskResult(name, resolved, "" if resolved else "no", "done", model_patch=f"+{name}\n")


def test_a_cut_line_is_skipped_and_the_next_result_stands_on_its_own(tmp_path: Path) -> None:
    folder = RunFolder(tmp_path, "m")
    folder.record(result("a"))
    with (tmp_path / "results.jsonl").open("a") as handle:
        handle.write('{"instance_id": "b", "resol')  # the crash came here
    folder.record(result("c", resolved=False))
    assert [r.instance_id for r in read_results(tmp_path)] == ["a", "c"]
    assert read_results(tmp_path)[1] == result("c", resolved=False)


def test_a_prediction_a_crash_kept_from_being_written_is_added_once(tmp_path: Path) -> None:
    folder = RunFolder(tmp_path, "model-x")
    folder.record(result("a"))
    with (tmp_path / "results.jsonl").open("a") as handle:
        handle.write(result("b").to_json() + "\n")  # finished; its prediction not yet written
    assert folder.mend(read_results(tmp_path)) == 1
    assert folder.mend(read_results(tmp_path)) == 0
    lines = [json.loads(x) for x in (tmp_path / "predictions.jsonl").read_text().splitlines()]
    assert lines == [
        {"instance_id": "a", "model_name_or_path": "model-x", "model_patch": "+a\n"},
        {"instance_id": "b", "model_name_or_path": "model-x", "model_patch": "+b\n"},
    ]
