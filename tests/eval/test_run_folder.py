"""The run folder: a line a crash cut is skipped and closed; a missing prediction mended."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path
from typing import Any

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


def _writer(path: str, prefix: str, count: int, start: Any) -> None:
    folder = RunFolder(Path(path), "m")
    start.wait()  # both write at once
    for index in range(count):
        folder.record(result(f"{prefix}{index}"))
        folder.record(result(f"shared{index}"))  # both writers finish the same tasks


def test_writers_in_several_processes_never_mix_lines_or_record_a_task_twice(
    tmp_path: Path,
) -> None:
    """The workers of a queued run append to one folder: under its lock each line stands
    whole, and a task two of them finish is recorded once."""
    context = multiprocessing.get_context("spawn")
    start = context.Barrier(2)
    writers = [context.Process(target=_writer, args=(str(tmp_path), p, 150, start)) for p in "ab"]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(60)
        assert writer.exitcode == 0
    lines = (tmp_path / "results.jsonl").read_text().splitlines()
    ids = [json.loads(line)["instance_id"] for line in lines]  # every line parses whole
    assert len(ids) == len(set(ids)) == 450
    predictions = (tmp_path / "predictions.jsonl").read_text().splitlines()
    assert sorted(json.loads(p)["instance_id"] for p in predictions) == sorted(ids)
