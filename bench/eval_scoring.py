"""Scoring one prediction: the harness's own time apart from the tests (prints figures).

    .venv/bin/python -m bench.eval_scoring [--scores N]

A real Python package (a dependency, iniconfig, and a test extra, pytest, from the package
index) in a real git repository; a task whose reference fix is scored N times in the real
sandbox (``bot/eval/scoring.py``). The first score sets the checkout up with network (the
detected set-up: a ``.venv`` with the project installed); the next ones restore it from the
set-up cache. Per score: the whole time, the set-up's (or its restore's), the tests', and
the harness's own (the whole less the tests: checkout, set-up or restore, patches, the
report read, the checkout removed). Needs bubblewrap and the package index.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bot.config import Settings  # noqa: E402
from bot.eval.scoring import Score, score_patch  # noqa: E402
from tests.eval.projects import commit as make_commit  # noqa: E402
from tests.eval.projects import diff_of, new_repo  # noqa: E402

PYPROJECT = """[build-system]
requires = ["flit_core>=3.4,<4"]
build-backend = "flit_core.buildapi"

[project]
name = "tinypkg"
version = "0.1.0"
description = "A tiny package for the scoring bench"
dependencies = ["iniconfig"]

[project.optional-dependencies]
test = ["pytest"]
"""
CODE = '''"""Reads one key of an ini text."""
import iniconfig


def value(text: str, section: str, key: str) -> str:
    return iniconfig.IniConfig("x.ini", data=text)[section][key]


def keys(text: str, section: str) -> list[str]:
    return list(iniconfig.IniConfig("x.ini", data=text)[section])[:1]
'''
TESTS = """import tinypkg


def test_value() -> None:
    assert tinypkg.value("[a]\\nb = c\\n", "a", "b") == "c"
"""
NEW_TESTS = (
    TESTS
    + """

def test_keys() -> None:
    assert tinypkg.keys("[a]\\nb = c\\nd = e\\n", "a") == ["b", "d"]
"""
)


async def main(scores: int) -> int:
    with tempfile.TemporaryDirectory(prefix="bench-eval-") as tmp:
        base = Path(tmp)
        files: dict[str, str | None] = {"tinypkg/__init__.py": CODE, "tests/test_tinypkg.py": TESTS}
        repo, _ = new_repo(base / "repo", files)
        commit = make_commit(repo, {"pyproject.toml": PYPROJECT}, "a package")
        test_patch = diff_of(repo, {"tests/test_tinypkg.py": NEW_TESTS})
        fix = diff_of(repo, {"tinypkg/__init__.py": CODE.replace("[section])[:1]", "[section])")})
        settings = Settings.model_validate({"storage": {"data_dir": str(base / "data")}})
        rows: list[Score] = []
        for n in range(scores):
            score = await score_patch(
                repo=repo, base_commit=commit, model_patch=fix, test_patch=test_patch,
                fail_to_pass=["tests/test_tinypkg.py::test_keys"],
                pass_to_pass=["tests/test_tinypkg.py::test_value"], test_command=None,
                setup=None, settings=settings, work_dir=base / "scores" / str(n),
            )  # fmt: skip
            if not score.resolved:
                raise SystemExit(f"score {n + 1}: unresolved: {score.reason}")
            rows.append(score)
    print(f"{'score':<12}{'whole':>9}{'set-up':>9}{'tests':>9}{'harness':>10}")
    for n, row in enumerate(rows, 1):
        name = "first" if n == 1 else f"cached {n - 1}"
        harness = row.seconds - row.test_seconds
        print(f"{name:<12}{row.seconds:>8.2f}s{row.setup_seconds:>8.2f}s"
              f"{row.test_seconds:>8.2f}s{harness:>9.2f}s")  # fmt: skip
    cached = [row.seconds - row.test_seconds for row in rows[1:]]
    if cached:
        print(f"harness per score with a cached set-up: median {statistics.median(cached):.2f} s"
              f" (target under 1 s)")  # fmt: skip
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scores", type=int, default=4)
    raise SystemExit(asyncio.run(main(parser.parse_args().scores)))
