"""Webhook acknowledgement latency and throughput (prints figures; not a test).

Starts the real bot (`bot serve --role web`, SQLite in a temp data dir) and a bare
Starlette app that only answers 202, each under uvicorn on loopback in its own
process, and fires signed GitHub `issue_comment` deliveries (each one a durable
delivery + inbox write) at 1, 16 and 64 concurrent requests: first with an empty
queue, then again with 10,000 tasks already queued.

    .venv/bin/python bench/webhook_ack.py [--seconds N] [--repeat N]

Each level is measured ``--repeat`` times (default 3), alternating bare and bot runs
(bare, bot, bare, bot, ...) so that slow phases of a shared machine hit both; one run
lasts ``--seconds`` (default 5). Per level it prints the median p50/p99 latency and
median requests per second of each server, the bot/bare ratio of the median req/s,
and in brackets the min-max of the per-pair ratios (e.g. ``59% (52-63%)``). The
throughput ratio of interest is the one at saturation, the c=64 row; all rows are
printed. A closing summary sets figures beside the targets (bot p99 < 50 ms at 64
concurrent, bot throughput >= 50% of bare, no change with queue depth); it only
prints, it never fails.

The load comes from wrk (Debian package ``wrk``) in its own process when it is
installed, else from httpx in this process (``--requests`` per run; slower: the
client then dominates). Defaults take about 3 minutes plus start-up.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import hmac
import itertools
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
SECRET = "bench-secret"
FIXTURE = ROOT / "tests" / "fixtures" / "github" / "issue_comment.created.json"
LEVELS = (1, 16, 64)
QUEUED = 10_000

Figures = dict[str, float]
Runs = list[Figures]

# An OTLP/HTTP receiver that reads each export and drops it (bench/trace_overhead.py,
# bench/webhook_cpu.py --traces): traces on, without a collector's own cost.
RECEIVER = """
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

class Drop(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", "0")))
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass

ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Drop).serve_forever()
"""


BARE_APP = """
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

async def hook(request):
    await request.body()
    return JSONResponse({"status": 202, "message": "queued"}, status_code=202)

app = Starlette(routes=[Route("/webhooks/github", hook, methods=["POST"])])
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_ready(port: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"server exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.1)
    raise SystemExit("server did not start")


def start_bot(data_dir: Path, port: int) -> subprocess.Popen[bytes]:
    env = dict(os.environ)
    env.update(
        BOT_DATA_DIR=str(data_dir),
        BOT_CONFIG=str(ROOT / "config.yaml"),
        GITHUB_WEBHOOK_SECRET=SECRET,
        GITHUB_TOKEN="bench-token-not-used",
        BOT_LOG_LEVEL="WARNING",
    )
    cmd = [sys.executable, "-m", "bot", "serve", "--role", "web", "--port", str(port)]
    proc = subprocess.Popen(cmd, env=env, cwd=ROOT)
    wait_ready(port, proc)
    return proc


@contextlib.contextmanager
def drop_receiver() -> Iterator[str]:
    """``RECEIVER`` in a process of its own; yields its base URL."""
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "receiver.py"
        script.write_text(RECEIVER)
        receiver = subprocess.Popen([sys.executable, str(script), str(port)])
        try:
            wait_ready(port, receiver)
            yield f"http://127.0.0.1:{port}"
        finally:
            receiver.terminate()
            receiver.wait(10)


def start_bare(workdir: Path, port: int) -> subprocess.Popen[bytes]:
    (workdir / "bare_app.py").write_text(BARE_APP)
    cmd = [
        sys.executable,
        "-m",
        "uvicorn",
        "bare_app:app",
        "--port",
        str(port),
        "--log-level",
        "warning",
        "--no-access-log",
    ]
    proc = subprocess.Popen(cmd, cwd=workdir)
    wait_ready(port, proc)
    return proc


def signed(body: bytes) -> str:
    return "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()


WRK_SCRIPT = """
-- GitHub names each delivery with a GUID (X-GitHub-Delivery). Ours are GUID-shaped
-- too, random in front (as the bot's unique index sees real ones) and unique by the
-- thread number and a counter at the end. `tid` is the global that setup() gives each
-- thread (a local of that name would hide it, and every thread would send the same ids).
local body = io.open(os.getenv("BENCH_BODY"), "rb"):read("*a")
local signature = os.getenv("BENCH_SIGNATURE")
local run = tonumber(os.getenv("BENCH_RUN"))
local counter = 0
local threads = 0

function setup(thread)
  threads = threads + 1
  thread:set("tid", threads)
end

function init(args)
  math.randomseed(run * 1000 + tid)
end

function request()
  counter = counter + 1
  local headers = {}
  headers["Content-Type"] = "application/json"
  headers["X-GitHub-Event"] = "issue_comment"
  headers["X-Hub-Signature-256"] = signature
  headers["X-GitHub-Delivery"] = string.format(
    "%04x%04x-%04x-%04x-%04x-%04x%08x", math.random(0, 65535), math.random(0, 65535),
    math.random(0, 65535), run % 65536, tid, math.random(0, 65535), counter)
  return wrk.format("POST", "/webhooks/github", headers, body)
end
"""


WRK_RUNS = itertools.count(1)


def _ms(value: str) -> float:
    units = {"us": 0.001, "ms": 1.0, "s": 1000.0}
    for unit in ("us", "ms", "s"):
        if value.endswith(unit):
            return float(value[: -len(unit)]) * units[unit]
    return float(value)


def fire_wrk(
    port: int, concurrency: int, seconds: int, body_path: Path, body: bytes
) -> dict[str, float]:
    """Load from a second process: wrk with unique delivery ids, latency percentiles."""
    script = body_path.with_suffix(".lua")
    script.write_text(WRK_SCRIPT)
    env = dict(
        os.environ,
        BENCH_BODY=str(body_path),
        BENCH_SIGNATURE=signed(body),
        BENCH_RUN=str(next(WRK_RUNS)),  # no two runs send the same delivery ids
    )
    threads = 1 if concurrency == 1 else 2
    out = subprocess.run(
        [
            "wrk",
            "-t",
            str(threads),
            "-c",
            str(concurrency),
            "-d",
            f"{seconds}s",
            "--latency",
            "-s",
            str(script),
            f"http://127.0.0.1:{port}",
        ],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    if "Non-2xx" in out:
        raise SystemExit(f"non-2xx answers during the run:\n{out}")
    figures: dict[str, float] = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] in ("50%", "99%"):
            figures["p" + parts[0].rstrip("%")] = _ms(parts[1])
        if line.startswith("Requests/sec:"):
            figures["rps"] = float(parts[1])
    return figures


async def fire(port: int, concurrency: int, total: int, body: bytes) -> dict[str, float]:
    signature = signed(body)
    latencies: list[float] = []
    counter = iter(range(total))
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", limits=limits) as client:

        async def worker() -> None:
            for n in counter:
                headers = {
                    "X-GitHub-Event": "issue_comment",
                    "X-GitHub-Delivery": f"bench-{port}-{concurrency}-{n}-{time.time_ns()}",
                    "X-Hub-Signature-256": signature,
                    "Content-Type": "application/json",
                }
                started = time.perf_counter()
                response = await client.post("/webhooks/github", content=body, headers=headers)
                latencies.append(time.perf_counter() - started)
                if response.status_code != 202:
                    raise SystemExit(f"unexpected {response.status_code}: {response.text}")

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        elapsed = time.perf_counter() - started
    latencies.sort()
    return {
        "p50": statistics.median(latencies) * 1000,
        "p99": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000,
        "rps": len(latencies) / elapsed,
    }


def payload() -> bytes:
    data = json.loads(FIXTURE.read_text())
    data["comment"]["body"] = "Could you also update the changelog?"
    return json.dumps(data).encode()


async def prefill(data_dir: Path, count: int) -> None:
    sys.path.insert(0, str(ROOT))
    from bot.config import load_settings
    from bot.events import ForgeKind, IssueRef, RepoRef, TaskRequest
    from bot.storage.factory import open_store

    settings = load_settings({"BOT_DATA_DIR": str(data_dir)}, ROOT / "config.yaml")
    store = open_store(settings)
    await store.open()
    repo = RepoRef(ForgeKind.GITHUB, "bench/queue", scope_id="1")
    for n in range(count):
        issue = IssueRef(repo, 100_000 + n, title=f"queued task {n}")
        await store.create_task(TaskRequest(issue=issue, requested_by="bench"))
    await store.close()


def measure(
    port: int, level: int, args: argparse.Namespace, body: bytes, body_path: Path
) -> Figures:
    """One run against one server: wrk when installed, else httpx."""
    if shutil.which("wrk") is not None:
        return fire_wrk(port, level, args.seconds, body_path, body)
    count = max(args.requests // 4, 200) if level == 1 else args.requests
    return asyncio.run(fire(port, level, count, body))


def measure_level(
    level: int,
    bot_port: int,
    bare_port: int,
    args: argparse.Namespace,
    body: bytes,
    body_path: Path,
) -> tuple[Runs, Runs]:
    """`--repeat` pairs at one level, bare then bot in each pair; returns (bare, bot) runs."""
    if shutil.which("wrk") is None:
        asyncio.run(fire(bare_port, level, 100, body))  # warm-up of the client
    bare_runs: Runs = []
    bot_runs: Runs = []
    for _ in range(args.repeat):
        bare_runs.append(measure(bare_port, level, args, body, body_path))
        bot_runs.append(measure(bot_port, level, args, body, body_path))
    return bare_runs, bot_runs


def summarise(bare_runs: Runs, bot_runs: Runs) -> Figures:
    """Medians of each figure, ratio of the median req/s and the min/max per-pair ratio."""
    summary: Figures = {}
    for name, runs in (("bare", bare_runs), ("bot", bot_runs)):
        for key in ("p50", "p99", "rps"):
            summary[f"{name}_{key}"] = statistics.median(run[key] for run in runs)
    pair_ratios = [bot["rps"] / bare["rps"] for bare, bot in zip(bare_runs, bot_runs, strict=True)]
    summary["ratio"] = summary["bot_rps"] / summary["bare_rps"]
    summary["ratio_min"] = min(pair_ratios)
    summary["ratio_max"] = max(pair_ratios)
    return summary


def ratio_text(summary: Figures) -> str:
    low, high = round(summary["ratio_min"] * 100), round(summary["ratio_max"] * 100)
    return f"{summary['ratio']:.0%} ({low}-{high}%)"


def run_round(
    label: str,
    bot_port: int,
    bare_port: int,
    args: argparse.Namespace,
    body: bytes,
    body_path: Path,
) -> dict[int, Figures]:
    """Measure every level against both servers and print one row of medians per level."""
    source = "wrk" if shutil.which("wrk") is not None else "httpx in this process"
    print(f"\n{label} (load from {source}; medians of {args.repeat} runs, bare/bot alternating)")
    print(
        f"{'concurrency':>11} {'bot p50 ms':>10} {'bot p99 ms':>10} {'bot req/s':>9} "
        f"{'bare p50':>8} {'bare p99':>8} {'bare req/s':>10}  throughput (pair min-max)"
    )
    results: dict[int, Figures] = {}
    for level in LEVELS:
        s = summarise(*measure_level(level, bot_port, bare_port, args, body, body_path))
        results[level] = s
        print(
            f"{level:>11} {s['bot_p50']:>10.2f} {s['bot_p99']:>10.2f} {s['bot_rps']:>9.0f} "
            f"{s['bare_p50']:>8.2f} {s['bare_p99']:>8.2f} {s['bare_rps']:>10.0f}  {ratio_text(s)}",
            flush=True,
        )
    return results


def print_summary(empty: dict[int, Figures], queued: dict[int, Figures]) -> None:
    """Figures beside the targets; reports only, never fails."""
    top = max(LEVELS)
    print("\nsummary against targets (figures only)")
    print(
        f"  bot p99 at {top} concurrent (target < 50 ms): "
        f"empty queue {empty[top]['bot_p99']:.2f} ms, "
        f"{QUEUED:,} queued {queued[top]['bot_p99']:.2f} ms"
    )
    print(f"  throughput bot/bare, median req/s (target >= 50%; c={top} is the saturation figure):")
    for label, results in (("empty queue", empty), (f"{QUEUED:,} queued", queued)):
        rows = ", ".join(f"c={level} {ratio_text(results[level])}" for level in LEVELS)
        print(f"    {label:>14}: {rows}")
    print(f"  queue depth at {top} concurrent, round with {QUEUED:,} queued / empty round:")
    for who in ("bot", "bare"):
        rps = queued[top][f"{who}_rps"] / empty[top][f"{who}_rps"]
        p99 = queued[top][f"{who}_p99"] / empty[top][f"{who}_p99"]
        note = "(target ~100%)" if who == "bot" else "(no queue: the machine's own drift)"
        print(f"    {who:>4}: req/s {rps:.0%}, p99 {p99:.0%} {note}")


def serve_round(
    workdir: Path, queued: int, bot_port: int, bare_port: int, args: argparse.Namespace
) -> dict[int, Figures]:
    """Start the bot on a fresh data dir (prefilled with `queued` tasks) and run one round."""
    data_dir = workdir / f"data-{queued}"
    data_dir.mkdir()
    if queued:
        asyncio.run(prefill(data_dir, queued))
    label = f"{queued:,} tasks queued" if queued else "empty queue"
    body_path = workdir / "body.json"
    bot = start_bot(data_dir, bot_port)
    try:
        return run_round(label, bot_port, bare_port, args, body_path.read_bytes(), body_path)
    finally:
        bot.terminate()
        bot.wait(10)


def positive(value: str) -> int:
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {number}")
    return number


def main() -> None:
    parser = argparse.ArgumentParser(description="Webhook acknowledgement benchmark.")
    parser.add_argument("--seconds", type=positive, default=5, help="seconds per run (wrk)")
    parser.add_argument("--repeat", type=positive, default=3, help="runs per server and level")
    parser.add_argument(
        "--requests", type=positive, default=2000, help="deliveries per run (httpx)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        (workdir / "body.json").write_bytes(payload())
        bare_port, bot_port = free_port(), free_port()
        bare = start_bare(workdir, bare_port)
        try:
            empty = serve_round(workdir, 0, bot_port, bare_port, args)
            queued = serve_round(workdir, QUEUED, bot_port, bare_port, args)
        finally:
            bare.terminate()
            bare.wait(10)
    print_summary(empty, queued)


if __name__ == "__main__":
    main()
