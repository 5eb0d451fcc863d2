"""The evaluation harness's own cost, and the suite's wall time (prints; not a test).

    .venv/bin/python -m bench.eval_harness [--workers 1 4]

Builds the project's suite (``tests/eval/suite.py``: eight small real repositories with
pytest suites) and runs ``bot eval run`` on it through the real command, the scripted model
writing each reference fix, once per worker count. Per task it prints what the harness
itself spent, apart from the model, the agent's work and the tests: the task's remote,
the prediction's diff, the scoring's checkout and patches, the files of the run folder
(``harness_seconds``; the suite's projects set up nothing, so this is the figure with a
set-up already in the cache). Target: under 1 s a task. Then the suite's wall time.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bot.cli import main
from tests.eval.projects import EXPOSE
from tests.eval.suite import build

TARGET = 1.0  # seconds of the harness's own per task


def run_suite(
    base: Path, tasks: Path, scripts: Path, workers: int
) -> tuple[float, list[dict[str, Any]]]:
    config = base / f"config-{workers}.yaml"
    config.write_text(json.dumps({
        "storage": {"data_dir": str(base / "data")},
        "llm": {"provider": "scripted", "script_path": str(scripts)},
        "sandbox": {"expose_paths": EXPOSE, "timeout": 120},
    }))  # fmt: skip
    out = base / f"run-{workers}"
    started = time.monotonic()
    code = main(["--config", str(config), "eval", "run", str(tasks), "--out", str(out),
                 "--workers", str(workers)])  # fmt: skip
    took = time.monotonic() - started
    if code != 0:
        sys.exit(f"bot eval run exited {code}")
    lines = (out / "results.jsonl").read_text().splitlines()
    return took, [json.loads(line) for line in lines]


def main_bench() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 4])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-eval-") as scratch:
        base = Path(scratch)
        tasks = build(base / "suite")
        scripts = base / "suite" / "scripts" / "fix"
        for workers in args.workers:
            took, results = run_suite(base, tasks, scripts, workers)
            resolved = sum(r["resolved"] for r in results)
            own = [r["harness_seconds"] for r in results]
            print(f"workers {workers}: {len(results)} tasks, {resolved} resolved, "
                  f"wall {took:.1f} s")  # fmt: skip
            for name in ("agent_seconds", "test_seconds", "setup_seconds", "harness_seconds"):
                values = [r[name] for r in results]
                print(f"  {name:<16} median {statistics.median(values):6.2f} s  "
                      f"max {max(values):6.2f} s")  # fmt: skip
            verdict = "ok" if max(own) < TARGET else "OVER"
            print(f"  harness's own per task < {TARGET:.0f} s: {verdict}")


if __name__ == "__main__":
    main_bench()
