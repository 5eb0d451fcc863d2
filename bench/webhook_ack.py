"""Webhook acknowledgement latency and throughput (prints figures; not a test).

Starts the real bot (`bot serve --role web`, SQLite in a temp data dir) and a bare
Starlette app that only answers 202, each under uvicorn on loopback in its own
process, and fires signed GitHub `issue_comment` deliveries (each one a durable
delivery + inbox write) at 1, 16 and 64 concurrent requests. Prints p50/p99
latency, requests per second and the ratio to the bare app; then again with
10,000 tasks already queued.

    .venv/bin/python bench/webhook_ack.py [--seconds N]

The load comes from wrk (Debian package ``wrk``) in its own process when it is
installed, else from httpx in this process (slower: the client then dominates).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import hmac
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
SECRET = "bench-secret"
FIXTURE = ROOT / "tests" / "fixtures" / "github" / "issue_comment.created.json"
LEVELS = (1, 16, 64)

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
local body = io.open(os.getenv("BENCH_BODY"), "rb"):read("*a")
local signature = os.getenv("BENCH_SIGNATURE")
local prefix = os.getenv("BENCH_PREFIX")
local counter = 0
local tid = 0
local threads = 0

function setup(thread)
  threads = threads + 1
  thread:set("tid", threads)
end

function request()
  counter = counter + 1
  local headers = {}
  headers["Content-Type"] = "application/json"
  headers["X-GitHub-Event"] = "issue_comment"
  headers["X-Hub-Signature-256"] = signature
  headers["X-GitHub-Delivery"] = prefix .. "-" .. tid .. "-" .. counter
  return wrk.format("POST", "/webhooks/github", headers, body)
end
"""


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
        BENCH_PREFIX=f"wrk-{port}-{concurrency}-{time.time_ns()}",
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


def run_round(
    label: str,
    bot_port: int,
    bare_port: int,
    total: int,
    body: bytes,
    body_path: Path,
    seconds: int,
) -> None:
    use_wrk = shutil.which("wrk") is not None
    print(f"\n{label} (load from {'wrk' if use_wrk else 'httpx in this process'})")
    print(
        f"{'concurrency':>11} {'bot p50 ms':>10} {'bot p99 ms':>10} {'bot req/s':>9} "
        f"{'bare p50':>8} {'bare p99':>8} {'bare req/s':>10} {'throughput':>10}"
    )
    for level in LEVELS:
        if use_wrk:
            bare = fire_wrk(bare_port, level, seconds, body_path, body)
            bot = fire_wrk(bot_port, level, seconds, body_path, body)
        else:
            count = max(total // 4, 200) if level == 1 else total
            asyncio.run(fire(bare_port, level, min(count, 100), body))  # warm-up
            bare = asyncio.run(fire(bare_port, level, count, body))
            bot = asyncio.run(fire(bot_port, level, count, body))
        ratio = bot["rps"] / bare["rps"]
        print(
            f"{level:>11} {bot['p50']:>10.2f} {bot['p99']:>10.2f} {bot['rps']:>9.0f} "
            f"{bare['p50']:>8.2f} {bare['p99']:>8.2f} {bare['rps']:>10.0f} {ratio:>9.0%}"
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=2000, help="deliveries per level (httpx)")
    parser.add_argument("--seconds", type=int, default=8, help="seconds per level (wrk)")
    args = parser.parse_args()
    body = payload()
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        body_path = workdir / "body.json"
        body_path.write_bytes(body)
        bare_port, bot_port = free_port(), free_port()
        bare = start_bare(workdir, bare_port)
        try:
            for label, queued in (("empty queue", 0), ("10,000 tasks queued", 10_000)):
                data_dir = workdir / f"data-{queued}"
                data_dir.mkdir()
                if queued:
                    asyncio.run(prefill(data_dir, queued))
                bot = start_bot(data_dir, bot_port)
                try:
                    run_round(
                        label, bot_port, bare_port, args.requests, body, body_path, args.seconds
                    )
                finally:
                    bot.terminate()
                    bot.wait(10)
        finally:
            bare.terminate()
            bare.wait(10)
    print(
        "\ntargets: bot p99 < 50 ms at 64 concurrent; bot throughput >= 50% of bare;"
        " no growth with queue depth"
    )


if __name__ == "__main__":
    main()
