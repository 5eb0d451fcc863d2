"""The project's own evaluation suite: eight tiny Python projects, each a real git repository
with a pytest suite, a bug, the patch that fixes it and the test patch that shows it.

    python -m tests.eval.suite OUT      writes OUT/repos/*, OUT/tasks.jsonl and, for the
                                        scripted model, OUT/scripts/{fix,nothing,break,tests}/

Each task's ``FAIL_TO_PASS`` is the new test of its test patch (it fails on the bug);
``PASS_TO_PASS`` the test that was there. The scripts are what a scripted model answers on
each task: ``fix`` writes the reference fix; ``nothing`` reads and changes nothing; ``break``
fixes the bug but breaks the other function (its ``PASS_TO_PASS`` test fails); ``tests``
fixes the bug and also edits the test file the test patch changes (refused by scoring).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.agent import docs
from tests.eval.projects import TEST_COMMAND, diff_of, new_repo


@dataclass(frozen=True)
class Project:
    name: str
    statement: str
    buggy: str  # the module at base_commit
    fixed: str  # after the reference fix
    broken: str  # the bug fixed, the other function broken
    old_test: str  # the test that passes before and after (PASS_TO_PASS)
    new_test: str  # the test the test patch adds (FAIL_TO_PASS)


def _p(name: str, statement: str, bug: str, fix: str, other: str, bad_other: str,
       old_test: str, new_test: str) -> Project:  # fmt: skip
    return Project(name, statement, f"{bug}\n\n{other}", f"{fix}\n\n{other}",
                   f"{fix}\n\n{bad_other}", old_test, new_test)  # fmt: skip


PROJECTS = (
    _p("calc", "add() subtracts its arguments\n\nadd(2, 3) gives -1 instead of 5.",
       "def add(a, b):\n    return a - b\n", "def add(a, b):\n    return a + b\n",
       "def mul(a, b):\n    return a * b\n", "def mul(a, b):\n    return a + b\n",
       "def test_mul():\n    assert mul(3, 4) == 12\n",
       "def test_add():\n    assert add(2, 3) == 5\n"),
    _p("textutil", "title_case() shouts\n\ntitle_case('hello world') gives 'HELLO WORLD'.",
       "def title_case(s):\n    return s.upper()\n",
       "def title_case(s):\n    return ' '.join(w.capitalize() for w in s.split(' '))\n",
       "def reverse(s):\n    return s[::-1]\n", "def reverse(s):\n    return s\n",
       "def test_reverse():\n    assert reverse('abc') == 'cba'\n",
       "def test_title_case():\n    assert title_case('hello world') == 'Hello World'\n"),
    _p("stats", "mean() is too small\n\nmean([2, 4]) gives 2.0, not 3.0.",
       "def mean(xs):\n    return sum(xs) / (len(xs) + 1)\n",
       "def mean(xs):\n    return sum(xs) / len(xs)\n",
       "def total(xs):\n    return sum(xs)\n", "def total(xs):\n    return max(xs)\n",
       "def test_total():\n    assert total([1, 2, 3]) == 6\n",
       "def test_mean():\n    assert mean([2, 4]) == 3.0\n"),
    _p("bounds", "clamp() ignores the upper bound\n\nclamp(15, 0, 10) gives 15.",
       "def clamp(x, lo, hi):\n    return max(lo, x)\n",
       "def clamp(x, lo, hi):\n    return min(hi, max(lo, x))\n",
       "def sign(x):\n    return (x > 0) - (x < 0)\n", "def sign(x):\n    return 1\n",
       "def test_sign():\n    assert [sign(-3), sign(0), sign(2)] == [-1, 0, 1]\n",
       "def test_clamp():\n    assert clamp(15, 0, 10) == 10\n"),
    _p("money", "cents() loses a cent\n\ncents(0.29) gives 28.",
       "def cents(amount):\n    return int(amount * 100)\n",
       "def cents(amount):\n    return round(amount * 100)\n",
       "def show(c):\n    return f'${c / 100:.2f}'\n", "def show(c):\n    return str(c)\n",
       "def test_show():\n    assert show(1234) == '$12.34'\n",
       "def test_cents():\n    assert cents(0.29) == 29\n"),
    _p("words", "count_words() counts runs of spaces\n\ncount_words('a  b') gives 3.",
       "def count_words(s):\n    return len(s.split(' '))\n",
       "def count_words(s):\n    return len(s.split())\n",
       "def first_word(s):\n    return s.split()[0]\n",
       "def first_word(s):\n    return s.split()[-1]\n",
       "def test_first_word():\n    assert first_word('hi there') == 'hi'\n",
       "def test_count_words():\n    assert count_words('a  b') == 2\n"),
    _p("dates", "is_leap() says 1900 was a leap year\n\nCenturies are leap years only "
       "when divisible by 400.",
       "def is_leap(y):\n    return y % 4 == 0\n",
       "def is_leap(y):\n    return y % 4 == 0 and (y % 100 != 0 or y % 400 == 0)\n",
       "def century(y):\n    return (y + 99) // 100\n", "def century(y):\n    return y // 100\n",
       "def test_century():\n    assert century(1901) == 20\n",
       "def test_is_leap():\n    assert not is_leap(1900) and is_leap(2000)\n"),
    _p("listutil", "dedupe() loses the order\n\ndedupe([3, 1, 3, 2]) should be [3, 1, 2].",
       "def dedupe(xs):\n    return sorted(set(xs))\n",
       "def dedupe(xs):\n    return list(dict.fromkeys(xs))\n",
       "def last(xs):\n    return xs[-1]\n", "def last(xs):\n    return xs[0]\n",
       "def test_last():\n    assert last([1, 2, 3]) == 3\n",
       "def test_dedupe():\n    assert dedupe([3, 1, 3, 2]) == [3, 1, 2]\n"),
)  # fmt: skip


def _test_file(project: Project, *tests: str) -> str:
    names = _names(project)
    return f"from {project.name} import {', '.join(names)}\n\n\n" + "\n\n".join(tests)


def _names(project: Project) -> list[str]:
    return [
        line[4:].split("(")[0] for line in project.buggy.splitlines() if line.startswith("def ")
    ]


def _test_id(project: Project, test: str) -> str:
    return f"tests/test_{project.name}.py::{test[4:].split('(')[0]}"


def agent_config() -> str:
    """The projects' ``.agent.yaml``: nothing to set up; the gate runs their tests."""
    return json.dumps({"setup": [], "quality_gate": {"test": [*TEST_COMMAND, "-q"]}}) + "\n"


def build(out: Path, projects: tuple[Project, ...] = PROJECTS) -> Path:
    """Write the repositories, ``tasks.jsonl`` and the scripts under ``out``; returns the
    tasks file."""
    lines = []
    for project in projects:
        test_path = f"tests/test_{project.name}.py"
        repo, base = new_repo(out / "repos" / project.name, {
            f"{project.name}.py": project.buggy,
            test_path: _test_file(project, project.old_test),
            ".agent.yaml": agent_config(),
        })  # fmt: skip
        task = {
            "instance_id": f"suite__{project.name}-1",
            "repo": f"suite/{project.name}",
            "base_commit": base,
            "problem_statement": project.statement,
            "test_patch": diff_of(repo, {test_path: _test_file(project, project.old_test,
                                                                project.new_test)}),
            "patch": diff_of(repo, {f"{project.name}.py": project.fixed}),
            "FAIL_TO_PASS": [_test_id(project, project.new_test)],
            "PASS_TO_PASS": [_test_id(project, project.old_test)],
            "repo_path": f"repos/{project.name}",
            "test_command": list(TEST_COMMAND),
            "setup": [],
        }  # fmt: skip
        lines.append(json.dumps(task))
        for kind, script in scripts(project).items():
            folder = out / "scripts" / kind
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"{task['instance_id']}.json").write_text(json.dumps(script))
    tasks = out / "tasks.jsonl"
    tasks.write_text("\n".join(lines) + "\n")
    return tasks


def scripts(project: Project) -> dict[str, list[Any]]:
    module = f"{project.name}.py"
    test_path = f"tests/test_{project.name}.py"
    edited_tests = _test_file(project, project.old_test, "def test_more():\n    assert True\n")
    return {
        "fix": _writes(project, {module: project.fixed}),
        "break": _writes(project, {module: project.broken}),
        "tests": _writes(project, {module: project.fixed, test_path: edited_tests}),
        "nothing": _reads_only(project),
    }


def _writes(project: Project, files: dict[str, str]) -> list[Any]:
    read = docs.action("task_1", "read_file", arguments={"path": f"{project.name}.py"},
                       expected="the module")  # fmt: skip
    writes = [
        docs.action(
            f"task_{n}",
            "write_file",
            arguments={"path": path, "content": text},
            purpose=f"Fix {path}",
            dependencies=["task_1"],
        )
        for n, (path, text) in enumerate(files.items(), 2)
    ]
    deps = {w["task_id"]: ["task_1"] for w in writes}
    plan = docs.plan([read, *writes], dependencies=deps, objective=project.statement.split("\n")[0])
    return [plan, docs.completion(achieved=True, done=1 + len(writes))]


def _reads_only(project: Project) -> list[Any]:
    read = docs.action("task_1", "read_file", arguments={"path": f"{project.name}.py"},
                       expected="the module")  # fmt: skip
    plan = docs.plan([read], objective=project.statement.split("\n")[0])
    return [plan, docs.completion(achieved=True, done=1), docs.intervention("nothing changed")]


if __name__ == "__main__":
    print(build(Path(sys.argv[1])))
