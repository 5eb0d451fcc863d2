"""Reading tasks: SWE-bench's fields, and a malformed task refused with its id and field."""

from __future__ import annotations

import json
from pathlib import Path

from bot.eval.tasks import load_tasks
from tests.eval.projects import new_repo


def instance(repo: Path, **changes: object) -> dict[str, object]:
    task: dict[str, object] = {
        "instance_id": "octo__calc-1",
        "repo": "octo/calc",
        "base_commit": "a" * 40,
        "problem_statement": "add() subtracts\n\nIt should add.",
        "test_patch": "diff --git a/t.py b/t.py\n",
        "FAIL_TO_PASS": '["tests/test_calc.py::test_add"]',  # JSON text, as SWE-bench ships it
        "PASS_TO_PASS": [],
        "repo_path": str(repo),
    }
    task.update(changes)
    return {k: v for k, v in task.items() if v is not None}


def test_good_tasks_are_read_and_bad_ones_named_by_id_and_field(tmp_path: Path) -> None:
    repo, _ = new_repo(tmp_path / "repo", {"calc.py": "x = 1\n"})
    lines = [
        json.dumps(instance(repo)),
        json.dumps(instance(repo, instance_id="octo__calc-2", FAIL_TO_PASS="[]")),
        json.dumps(instance(repo, instance_id="octo__calc-3", base_commit="main")),
        json.dumps(instance(repo, instance_id="octo__calc-4", repo_path=None)),
        json.dumps(instance(repo, instance_id="octo__calc-5", repo_path=str(tmp_path))),
        json.dumps(instance(repo, instance_id="octo__calc-6", setup="pip install .")),
        json.dumps(instance(repo)),  # the same id again
        "{not json",
        json.dumps(["a list"]),
        "",
        json.dumps(instance(repo, instance_id="octo__calc-7", test_command="python -m pytest -x",
                            hints_text="look at add", statement="commit")),
    ]  # fmt: skip
    source = tmp_path / "tasks.jsonl"
    source.write_text("\n".join(lines) + "\n")
    tasks, refused = load_tasks(source)
    assert [t.instance_id for t in tasks] == ["octo__calc-1", "octo__calc-7"]
    first, last = tasks
    assert first.fail_to_pass == ("tests/test_calc.py::test_add",) and first.pass_to_pass == ()
    assert first.title == "add() subtracts" and first.repo_path == repo
    assert last.test_command == ("python", "-m", "pytest", "-x") and last.hints_text
    assert last.extra == {"statement": "commit"}
    assert [str(r) for r in refused] == [
        "tasks.jsonl:2: task octo__calc-2: FAIL_TO_PASS: names no test",
        "tasks.jsonl:3: task octo__calc-3: base_commit: a commit id (7 to 64 hex digits)",
        "tasks.jsonl:4: task octo__calc-4: repo_path: neither repo_path nor repo_url says where "
        "the source is",
        f"tasks.jsonl:5: task octo__calc-5: repo_path: {tmp_path} is not a git repository",
        "tasks.jsonl:6: task octo__calc-6: setup: a list of commands, each one line "
        "(never given to a shell)",
        "tasks.jsonl:7: task octo__calc-1: instance_id: appears twice",
        "tasks.jsonl:8: task (no instance_id): instance: expected a JSON object, got text that "
        "is not JSON (Expecting property name enclosed in double quotes: line 1 column 2 "
        "(char 1))",
        "tasks.jsonl:9: task (no instance_id): instance: expected a JSON object, got list",
    ]


def test_a_folder_of_json_files_is_read_with_relative_paths_from_it(tmp_path: Path) -> None:
    new_repo(tmp_path / "tasks" / "repos" / "calc", {"calc.py": "x = 1\n"})
    (tmp_path / "tasks" / "b.json").write_text(json.dumps(instance(Path("repos/calc"))))
    one = instance(Path("repos/calc"), instance_id="octo__calc-0", repo_url="file:///x.git")
    (tmp_path / "tasks" / "a.json").write_text(json.dumps(one))
    tasks, refused = load_tasks(tmp_path / "tasks")
    assert refused == []
    assert [t.instance_id for t in tasks] == ["octo__calc-0", "octo__calc-1"]
    assert tasks[0].repo_path == tmp_path / "tasks" / "repos" / "calc"
