"""What traces cost, off and on, side by side (prints figures; not a test).

    .venv/bin/python bench/trace_overhead.py [--seconds N] [--repeat N] [--baseline REF]

1. The ack path: ``bot serve --role web`` (SQLite, a fresh data dir each) with traces off,
   with traces on (sampling 1.0, batches exported over OTLP/HTTP to a local receiver in a
   process of its own that reads and drops them), and the same server at ``--baseline``
   (default: the commit before traces came in; ``none`` to skip), under wrk at 16 and 64
   concurrent signed deliveries, the servers taking turns (``--repeat`` rounds of
   ``--seconds`` each). Per level: median req/s, p50, p99 and the server's CPU time per
   request (all its threads, from /proc: what bounds its throughput, and steadier than
   req/s on a shared machine), then on/off and off/baseline (the ratio of the medians,
   with the per-round min-max). Targets: off costs nothing measurable (off/baseline within
   the rounds' own spread), on at most 5% (req/s >= 95%, CPU per request <= 105%). With
   traces on, the export process's CPU time per request too (it shares the machine).
   ``--compare DIR``: another checkout's server with traces on joins the turns.
2. A task: the README task of bench/agent_tokens and a plan of ``--actions`` instant actions
   (the real coordinator, prompts, tools, SQLite, the FakeForge, scripted answers), run with
   traces off and on (sampling 1.0, OTLP/HTTP to the receiver) in turns; median wall time
   per task and per action, and the spans each task exports.
3. The no-op: one ``with tracing.span(...)`` while off, in nanoseconds, beside an ack.

Needs wrk (Debian package ``wrk``) for part 1; about 4 minutes with the defaults.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.agent_overhead import ByPhaseLLM, _completion, _plan, _quiet_planning, _tool  # noqa: E402
from bench.agent_tokens import open_env, run_task, simple_script  # noqa: E402
from bench.webhook_ack import SECRET, drop_receiver, fire_wrk, free_port, payload, wait_ready  # noqa: E402
from bot import tracing  # noqa: E402

LEVELS = (16, 64)


def baseline_ref() -> str | None:
    """The commit before bot/tracing/ was added (None when it cannot be found)."""
    found = subprocess.run(
        ["git", "log", "--format=%H", "--diff-filter=A", "--", "bot/tracing/__init__.py"],
        cwd=ROOT, capture_output=True, text=True, check=False,
    ).stdout.split()  # fmt: skip
    return f"{found[-1]}^" if found else None


def checkout(ref: str, into: Path) -> Path:
    """The tree at ``ref`` as plain files (git archive): the server as it was."""
    into.mkdir()
    archive = subprocess.run(["git", "archive", ref], cwd=ROOT, capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into


def cpu_seconds(pid: int) -> float:
    """The CPU time a process (all its threads) has used, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children_cpu_seconds(pid: int) -> float:
    """The CPU time of a process's children (the export process of delivery spans)."""
    total = 0.0
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            with contextlib.suppress(OSError):
                total += cpu_seconds(int(child))
    return total


def measured(pid: int, port: int, level: int, args: argparse.Namespace, body_path: Path,
             body: bytes) -> dict[str, float]:  # fmt: skip
    """One wrk run, with the server's CPU time per request (all its threads): what bounds
    its throughput, and far steadier than req/s on a shared machine; beside it, its export
    process's CPU time per request (one span each at sampling 1.0)."""
    before, before_export = cpu_seconds(pid), children_cpu_seconds(pid)
    got = fire_wrk(port, level, args.seconds, body_path, body)
    requests = got["rps"] * args.seconds
    got["cpu_us"] = (cpu_seconds(pid) - before) / requests * 1e6
    got["export_us"] = (children_cpu_seconds(pid) - before_export) / requests * 1e6
    return got


@contextlib.contextmanager
def serving(root: Path, data_dir: Path, port: int, **extra: str) -> Iterator[int]:
    """``bot serve --role web`` from the sources at ``root`` (the package there comes
    first on the path, before the installed one)."""
    data_dir.mkdir()
    env = dict(os.environ)
    env.update(
        BOT_DATA_DIR=str(data_dir), BOT_CONFIG=str(root / "config.yaml"),
        GITHUB_WEBHOOK_SECRET=SECRET, GITHUB_TOKEN="bench-token-not-used",
        BOT_LOG_LEVEL="WARNING", PYTHONPATH=str(root), **extra,
    )  # fmt: skip
    cmd = [sys.executable, "-m", "bot", "serve", "--role", "web", "--port", str(port)]
    proc = subprocess.Popen(cmd, env=env, cwd=root)
    try:
        wait_ready(port, proc)
        yield proc.pid
    finally:
        proc.terminate()
        proc.wait(15)


def median(runs: list[dict[str, float]], key: str) -> float:
    return statistics.median(run[key] for run in runs)


def ratio(top: list[dict[str, float]], bottom: list[dict[str, float]], key: str = "rps") -> str:
    pairs = [a[key] / b[key] for a, b in zip(top, bottom, strict=True)]
    middle = median(top, key) / median(bottom, key)
    return f"{middle:.1%} ({min(pairs):.1%}-{max(pairs):.1%})"


def ack_path(args: argparse.Namespace, workdir: Path, receiver_url: str) -> None:
    if shutil.which("wrk") is None:
        print("part 1 skipped: wrk is not installed (apt-get install wrk)")
        return
    servers: dict[str, tuple[Path, dict[str, str]]] = {
        "off": (ROOT, {}),
        "on": (ROOT, {"BOT_TRACES_ENABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": receiver_url,
                      "OTEL_SERVICE_NAME": "bench-web"}),
    }  # fmt: skip
    if args.compare is not None:  # another checkout's server, traces on, in the same turns
        servers["other on"] = (args.compare.resolve(), servers["on"][1])
    ref = baseline_ref() if args.baseline == "auto" else args.baseline
    if ref and ref != "none":
        servers = {"baseline": (checkout(ref, workdir / "baseline"), {}), **servers}
    body_path = workdir / "body.json"
    body_path.write_bytes(payload())
    body = body_path.read_bytes()
    ports = {name: free_port() for name in servers}
    pids: dict[str, int] = {}
    with contextlib.ExitStack() as stack:
        for name, (root, extra) in servers.items():
            data = workdir / f"data-{name}"
            pids[name] = stack.enter_context(serving(root, data, ports[name], **extra))
        print(f"\n1. the ack path (wrk, {args.seconds} s runs, {args.repeat} rounds, servers "
              f"in turns; baseline: {ref or 'none'})")  # fmt: skip
        print(f"{'concurrency':>11} {'server':>8} {'req/s':>8} {'p50 ms':>7} {'p99 ms':>7} "
              f"{'CPU us/req':>10} {'export us/req':>13}")  # fmt: skip
        for level in LEVELS:
            runs: dict[str, list[dict[str, float]]] = {name: [] for name in servers}
            for _ in range(args.repeat):
                for name in servers:
                    got = measured(pids[name], ports[name], level, args, body_path, body)
                    runs[name].append(got)
            for name, got in runs.items():
                print(f"{level:>11} {name:>8} {median(got, 'rps'):>8.0f} "
                      f"{median(got, 'p50'):>7.2f} {median(got, 'p99'):>7.2f} "
                      f"{median(got, 'cpu_us'):>10.1f} "
                      f"{median(got, 'export_us'):>13.1f}")  # fmt: skip
            print(f"{'':>11} on/off: req/s {ratio(runs['on'], runs['off'])}, CPU per request "
                  f"{ratio(runs['on'], runs['off'], 'cpu_us')} (target: req/s >= 95%, CPU "
                  "<= 105%)")  # fmt: skip
            if "other on" in runs:
                print(f"{'':>11} other on/off: req/s {ratio(runs['other on'], runs['off'])}, "
                      f"CPU per request {ratio(runs['other on'], runs['off'], 'cpu_us')} "
                      f"({args.compare})")  # fmt: skip
            if "baseline" in runs:
                print(f"{'':>11} off/baseline: req/s {ratio(runs['off'], runs['baseline'])}, "
                      f"CPU per request {ratio(runs['off'], runs['baseline'], 'cpu_us')} "
                      "(target: within the rounds' spread)")  # fmt: skip


def counting_processor() -> Any:
    """A span processor that counts the spans that end."""
    from opentelemetry.sdk.trace import SpanProcessor

    class Counting(SpanProcessor):
        ended = 0

        def on_end(self, span: Any) -> None:
            self.ended += 1

    return Counting()


def actions_script(count: int) -> list[Any]:
    return [_plan("instant", count, group=None), _completion(count)]


async def one_task(kind: str, actions: int) -> float:
    """Seconds for one task of ``kind`` (readme or actions), in a fresh environment."""
    with tempfile.TemporaryDirectory() as tmp:
        async with contextlib.AsyncExitStack() as stack:
            if kind == "readme":
                env = await open_env(Path(tmp), stack)
                with tracing.run("task run", {"bench.kind": kind}):
                    body = "Add an Installation section to the README."
                    run = await run_task(env, stack, simple_script(), number=1, title="README",
                                         body=body)  # fmt: skip
            else:
                env = await open_env(Path(tmp), stack, planning=_quiet_planning())
                with tracing.run("task run", {"bench.kind": kind}):
                    run = await run_task(
                        env, stack, [], number=1, title="Steps", body="Run the steps.",
                        extra_tools=(_tool("instant", 0.0),),
                        llm=ByPhaseLLM(actions_script(actions)),
                    )  # fmt: skip
            assert run.outcome.state.value == "done", run.outcome
            return run.seconds


def task_overhead(args: argparse.Namespace, receiver_url: str) -> None:
    from bot.tracing import sdk

    print(f"\n2. a task, traces off and on in turns ({args.tasks} of each; sampling 1.0, "
          "OTLP/HTTP to the receiver)")  # fmt: skip
    for kind in ("readme", "actions"):
        times: dict[str, list[float]] = {"off": [], "on": []}
        spans: list[int] = []
        asyncio.run(one_task(kind, args.actions))  # warm-up: imports, prompt templates
        for _ in range(args.tasks):
            times["off"].append(asyncio.run(one_task(kind, args.actions)))
            provider, _said = sdk.provider(tracing.TraceOptions(endpoint=receiver_url), {})
            counting = counting_processor()
            provider.add_span_processor(counting)
            tracing.install(provider)
            try:
                times["on"].append(asyncio.run(one_task(kind, args.actions)))
            finally:
                tracing.uninstall()
                provider.shutdown()  # the export of what is left, outside the timing
            spans.append(counting.ended)
        off, on = statistics.median(times["off"]), statistics.median(times["on"])
        unit = f"per action over {args.actions}" if kind == "actions" else "per task"
        per = args.actions if kind == "actions" else 1
        print(f"  {kind:>8}: off {off / per * 1000:.2f} ms, on {on / per * 1000:.2f} ms {unit} "
              f"(on/off {on / off:.1%}; rounds off {min(times['off']) / per * 1000:.2f}-"
              f"{max(times['off']) / per * 1000:.2f} ms); {statistics.median(spans):.0f} spans "
              "per task")  # fmt: skip


def no_op_cost() -> None:
    assert not tracing.enabled()
    count = 1_000_000
    started = time.perf_counter()
    for _ in range(count):
        with tracing.span("x", None):
            pass
    each = (time.perf_counter() - started) / count
    print(f"\n3. one span while off: {each * 1e9:.0f} ns (the ack path makes one per delivery)")


def main() -> None:
    parser = argparse.ArgumentParser(description="Traces' cost, off and on.")
    parser.add_argument("--seconds", type=int, default=5, help="seconds per wrk run")
    parser.add_argument("--repeat", type=int, default=5, help="rounds per level")
    parser.add_argument("--baseline", default="auto", help="git ref of the server without "
                        "traces (auto: the commit before bot/tracing/; none: skip)")  # fmt: skip
    parser.add_argument("--tasks", type=int, default=5, help="tasks of each kind, off and on")
    parser.add_argument("--actions", type=int, default=200, help="actions of the long task")
    parser.add_argument("--parts", default="1,2,3", help="which parts to run, e.g. 1 or 2,3")
    parser.add_argument("--compare", type=Path, help="another checkout: its server with "
                        "traces on joins the turns of part 1 (e.g. the main branch)")  # fmt: skip
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, drop_receiver() as url:
        workdir = Path(tmp)
        parts = set(args.parts.split(","))
        if "3" in parts:
            no_op_cost()
        if "2" in parts:
            task_overhead(args, url)
        if "1" in parts:
            ack_path(args, workdir, url)


if __name__ == "__main__":
    main()
