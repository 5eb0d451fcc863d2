"""The evaluation harness's own cost, and the suite's wall time (prints; not a test).

    .venv/bin/python -m bench.eval_harness [--workers 1 4] [--queue N]

Builds the project's suite (``tests/eval/suite.py``: eight small real repositories with
pytest suites) and runs ``bot eval run`` on it through the real command, the scripted model
writing each reference fix, once per worker count. Per task it prints what the harness
itself spent, apart from the model, the agent's work and the tests: the task's remote,
the prediction's diff, the scoring's checkout and patches, the files of the run folder
(``harness_seconds``; the suite's projects set up nothing, so this is the figure with a
set-up already in the cache). Target: under 1 s a task. Then the suite's wall time.

``--queue N`` also runs the suite on the bot's queue (``bot eval run --queue``): a real
throwaway PostgreSQL (``tests/pg.py``) and N ``bot serve --role worker`` processes of one
slot each, from the command until the last worker has written the summary; printed beside
the in-process run with N workers (which it runs too), with their ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bot.cli import main
from tests.eval.projects import EXPOSE
from tests.eval.suite import build
from tests.pg import postgres_server

ROOT = Path(__file__).resolve().parent.parent

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


def run_queued(base: Path, tasks: Path, scripts: Path, workers: int, dsn: str) -> float:
    """The suite on the queue with ``workers`` worker processes; its wall time."""
    env = {**os.environ, "BOT_POSTGRES_DSN": dsn}
    configs = []
    for name in ["command", *(f"worker-{n}" for n in range(workers))]:
        config = base / f"queue-{name}.yaml"
        config.write_text(json.dumps({
            "storage": {"backend": "postgres", "data_dir": str(base / f"queue-{name}")},
            "llm": {"provider": "scripted", "script_path": str(scripts)},
            "sandbox": {"expose_paths": EXPOSE, "timeout": 120},
            "worker": {"max_workers": 1, "poll_interval": 0.2},
        }))  # fmt: skip
        configs.append(config)
    serve = [sys.executable, "-m", "bot", "--config"]
    quiet = subprocess.DEVNULL
    processes = [
        subprocess.Popen(
            [*serve, str(c), "serve", "--role", "worker"],
            env=env,
            cwd=ROOT,
            stdout=quiet,
            stderr=quiet,
        )
        for c in configs[1:]
    ]
    out = base / f"queue-run-{workers}"
    try:
        time.sleep(3)  # the workers started: what is timed is the run, not their start-up
        started = time.monotonic()
        subprocess.run([sys.executable, "-m", "bot", "--config", str(configs[0]), "eval", "run",
                        str(tasks), "--out", str(out), "--queue"], env=env, cwd=ROOT,
                       check=True, stdout=subprocess.DEVNULL)  # fmt: skip
        while not (out / "summary.json").is_file():
            if any(p.poll() is not None for p in processes):
                sys.exit("a worker stopped")
            time.sleep(0.2)
        return time.monotonic() - started
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait(30)


def main_bench() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--queue", type=int, default=0, help="worker processes on the queue")
    args = parser.parse_args()
    counts = list(args.workers)
    if args.queue and args.queue not in counts:
        counts.append(args.queue)
    walls: dict[int, float] = {}
    with tempfile.TemporaryDirectory(prefix="bench-eval-") as scratch:
        base = Path(scratch)
        tasks = build(base / "suite")
        scripts = base / "suite" / "scripts" / "fix"
        for workers in counts:
            took, results = run_suite(base, tasks, scripts, workers)
            walls[workers] = took
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
        if args.queue:
            with postgres_server() as dsn:
                took = run_queued(base, tasks, scripts, args.queue, dsn)
            same = walls[args.queue]
            print(f"queue, {args.queue} worker processes: wall {took:.1f} s; in-process, "
                  f"{args.queue} workers: {same:.1f} s; ratio {took / same:.2f}")  # fmt: skip


if __name__ == "__main__":
    main_bench()
