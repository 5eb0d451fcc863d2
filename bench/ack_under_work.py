"""Webhook acknowledgement while the same process runs tool work (prints figures; not a test).

One process serves webhooks and runs tasks, so tool work must not stall the event loop
that answers webhooks. This starts the real server, `bot serve --role all` (SQLite in a
temp data dir, scripted LLM, GitHub API pointed at a closed loopback port), through this
file's `--serve` mode: that mode runs `bot.cli.main(["serve", ...])` unchanged, after
wrapping `bot.app.create_app` so the app it builds also answers `POST /bench/load` and
`POST /bench/idle`. Those two switch the load on and off inside the server process, on
the server's own event loop.

The load: ``--tasks`` (default 8) concurrent coroutines, each a task with its own
workspace (a real `git clone` of a local repository generated here: 100 Python files of
about 20 KB, 2 MB in all, some with a run of 5,000 "a", plus a 65,000-character file of
"TOKEN" * 13,000 and one of "a" * 65,000), its own `ToolRegistry` of the real workspace
tools (`bot.tools.workspace_tools`) and the settings' secrets. Each task repeats, without
pause, the tool calls an agent makes, through `ToolRegistry.call` (argument validation,
the tool in the offload worker process, redaction of the output):

  1. search_files `def \\w+\\(` (max_hits 1000): a grep over all 2 MB (80,000 lines);
  2. search_files `(a+)+$`: the pathological pattern (RE2 runs it in linear time);
  3. read_many_files `src`: reads every file (output capped at sandbox.max_output_chars);
  4. read_file big/token.txt and big/aaaa.txt: 65,000 characters each, returned whole,
     so the registry redacts 65,000 characters of pathological text;
  5. the redaction of "TOKEN" * 13,000 and "a" * 65,000 as the status comment's reporter
     does it with a large comment body (`bot.offload.redact_text`: `bot.redact.redact` in
     the offload worker process; on the loop itself against the code before that module).

Each task runs in its own offload lane (``bot.offload.join_lane``), as the worker runs
every task.

The flood phase: the same load, and a writer's command of 66,000 characters
(``/agent run`` and fence tags and HTML comments nested 6,000 deep, tests/test_untrusted.py)
arrives while the tasks work. The client sends it as a signed delivery once a second
(its acknowledgements are counted apart), and the server cleans it as a task's planning,
an answer and feedback do, again and again for the whole phase: ``build_context`` with
the command's instructions (a review comment becomes a follow-up's instructions the same
way) over the one FakeForge of the tests, and ``answer_block`` (the fence answers and
feedback get). The server's dispatcher cannot act on the delivery (the GitHub API is a
closed port here, so the writer's permission is never known): the server does that part.

Meanwhile this process sends signed GitHub `issue_comment` deliveries (13 KB, each one
verified, parsed, classified and committed to the inbox before the 202) one at a time
with httpx over loopback for ``--seconds`` (default 8) per phase, in phases idle, load,
flood, idle, load, flood, ... (``--repeat`` rounds, default 3; each load and flood phase
starts with 3 s of warm-up). It prints p50/p99/max per phase, the medians over the
phases, the tool calls done per second under load, the event loop's worst lag (a 5 ms
ticker in the server), and the targets: p99 under load and under the flood at most 2x
the idle p99, and never above 100 ms.

    .venv/bin/python bench/ack_under_work.py [--seconds N] [--repeat N] [--tasks N]

Defaults take about two minutes plus start-up.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import hmac
import inspect
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.test_untrusted import nested  # noqa: E402

SECRET = "bench-secret"
FIXTURE = ROOT / "tests" / "fixtures" / "github" / "issue_comment.created.json"
TOKEN_TEXT = "TOKEN" * 13_000
A_TEXT = "a" * 65_000
STEPS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("search_files", {"pattern": r"def \w+\(", "max_hits": 1000}),
    ("search_files", {"pattern": "(a+)+$"}),
    ("read_many_files", {"paths": ["src"]}),
    ("read_file", {"path": "big/token.txt"}),
    ("read_file", {"path": "big/aaaa.txt"}),
)
WARM_UP = 3.0
FILES = 100
FLOOD = "/agent run " + nested(6_000)  # 66,010 characters
WRITER_EVERY = 1.0  # seconds between the writer's deliveries

Figures = dict[str, float]


# --- the server side: `bot serve --role all` plus the load switch ----------------------------


class Load:
    """``tasks`` coroutines doing tool work on the server's loop, and a loop-lag ticker."""

    def __init__(self, remote: str, workdir: Path) -> None:
        self.remote = remote
        self.workdir = workdir
        self.running: list[asyncio.Task[None]] = []
        self.calls: Counter[str] = Counter()
        self.lags: list[float] = []
        self.started = 0.0

    def start(self, tasks: int, settings: Any, *, flood: bool = False) -> None:
        self.calls.clear()
        self.lags.clear()
        self.started = time.monotonic()
        self.running = [asyncio.create_task(self._ticker())]
        for n in range(tasks):
            self.running.append(asyncio.create_task(self._task(n, settings)))
        if flood:
            self.running.append(asyncio.create_task(self._flood(settings)))

    async def stop(self) -> dict[str, Any]:
        for task in self.running:
            task.cancel()
        await asyncio.gather(*self.running, return_exceptions=True)
        self.running = []
        elapsed = time.monotonic() - self.started
        lags = sorted(self.lags) or [0.0]
        return {
            "calls_per_second": sum(n for k, n in self.calls.items() if k != "flood") / elapsed,
            "calls": dict(self.calls),
            "lag_p99_ms": lags[int(len(lags) * 0.99)] * 1000,
            "lag_max_ms": lags[-1] * 1000,
        }

    async def _ticker(self) -> None:
        while True:
            before = time.monotonic()
            await asyncio.sleep(0.005)
            self.lags.append(time.monotonic() - before - 0.005)

    async def _flood(self, settings: Any) -> None:
        """What the bot does with the writer's command, again and again: the planner's
        context with it as the instructions, and the fence of an answer or feedback."""
        from bot.agent.briefing import build_context
        from bot.agent.people import answer_block
        from tests.fakes import FakeForge

        _lane("writer")
        forge = FakeForge()
        repo = forge.add_repo("acme/bench", {"README.md": "# Bench\n"})
        issue = forge.add_issue(repo, 1, title="Update the docs", body="Explain the set-up.")
        instructions = FLOOD.removeprefix("/agent run ")
        while True:
            await build_context(forge, issue, settings, [], instructions=instructions)
            block = answer_block("writer", instructions)
            if inspect.isawaitable(block):  # the code before bot/untrusted.py: a str
                await block
            self.calls["flood"] += 1
            await asyncio.sleep(0)

    async def _task(self, n: int, settings: Any) -> None:
        from bot.config import secret_values
        from bot.forges.base import CloneAuth
        from bot.sandbox.sandbox import Sandbox
        from bot.sandbox.workspace import Workspace
        from bot.tools.registry import ToolRegistry
        from bot.tools.workspace_tools import workspace_tools

        try:
            from bot.offload import redact_text
        except ImportError:  # the code before bot/offload.py, to compare

            async def redact_text(text: str, *, known: Iterable[str] = ()) -> str:
                from bot.redact import redact

                return redact(text, known=known)

        async def auth() -> CloneAuth:
            return CloneAuth(url=self.remote, username="x-access-token", password="unused")

        _lane(f"task-{n}")
        path = self.workdir / f"ws-{n}"  # cloned in the first load phase, kept after
        ws = Workspace(path, auth=auth, branch=f"agent/{n}-bench", base_branch="main")
        limit = settings.sandbox.max_output_chars
        secrets = secret_values(settings)
        tools = workspace_tools(ws, Sandbox(settings.sandbox), max_output_chars=limit)
        registry = ToolRegistry(tools, secrets=secrets)
        while True:
            for name, arguments in STEPS:
                result = await registry.call(name, arguments, timeout=120)
                if not result.ok:
                    raise SystemExit(f"{name} failed: {result.output}")
                self.calls[name] += 1
            for text in (TOKEN_TEXT, A_TEXT):
                await redact_text(text, known=secrets)
                self.calls["redact"] += 1


def _lane(name: str) -> None:
    """This asyncio task's offload lane (the code before lanes has none)."""
    from bot import offload

    join = getattr(offload, "join_lane", None)
    if join is not None:
        join(name)


def serve(port: int, remote: str, workdir: Path) -> int:
    """`bot serve --role all --port PORT` whose app also answers /bench/load and /bench/idle."""
    from bot import app as bot_app
    from bot import cli

    load = Load(remote, workdir)
    build = bot_app.create_app

    def create_app(runtime: Any, **kwargs: Any) -> Any:
        app = build(runtime, **kwargs)

        async def switch(scope: Any, receive: Any, send: Any) -> None:
            path = scope.get("path", "") if scope["type"] == "http" else ""
            if path not in ("/bench/load", "/bench/idle"):
                await app(scope, receive, send)
                return
            if path == "/bench/load":
                query = dict(
                    pair.split("=", 1) for pair in scope["query_string"].decode().split("&") if pair
                )
                flood = query.get("flood") == "1"
                load.start(int(query.get("tasks", "8")), runtime.settings, flood=flood)
                body = b"{}"
            else:
                body = json.dumps(await load.stop()).encode()
            headers = [(b"content-type", b"application/json")]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": body})

        return switch

    bot_app.create_app = create_app
    return cli.main(["serve", "--role", "all", "--port", str(port)])


# --- the client side -------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def make_repository(base: Path) -> str:
    """A bare repository of 100 Python files (~20 KB each) and two pathological files."""
    seed = base / "seed"
    (seed / "src").mkdir(parents=True)
    (seed / "big").mkdir()
    for n in range(FILES):
        lines = [f"def function_{n}_{i}(value):\n    return value + {i}\n" for i in range(400)]
        if n % 10 == 0:
            lines.append("a" * 5000 + "!\n")
        (seed / "src" / f"module_{n:03}.py").write_text("".join(lines))
    (seed / "big" / "token.txt").write_text(TOKEN_TEXT)
    (seed / "big" / "aaaa.txt").write_text(A_TEXT)
    git("init", "--quiet", "--initial-branch=main", cwd=seed)
    git("add", ".", cwd=seed)
    git("-c", "user.name=b", "-c", "user.email=b@b", "commit", "--quiet", "-m", "seed", cwd=seed)
    bare = base / "remote.git"
    git("clone", "--quiet", "--bare", str(seed), str(bare), cwd=base)
    return f"file://{bare}"


def start_server(workdir: Path, port: int, remote: str) -> subprocess.Popen[bytes]:
    script = workdir / "script.json"
    script.write_text("[]")
    config = workdir / "config.yaml"
    closed = free_port()  # nothing listens: forge calls from the dispatcher fail at once
    config.write_text(
        f"github:\n  api_url: http://127.0.0.1:{closed}\n"
        f"llm:\n  provider: scripted\n  script_path: {script}\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "GITLAB_"))}
    env.update(
        BOT_DATA_DIR=str(workdir / "data"),
        BOT_CONFIG=str(config),
        GITHUB_WEBHOOK_SECRET=SECRET,
        GITHUB_TOKEN="ghp_" + "B" * 36,
    )
    env.setdefault("BOT_LOG_LEVEL", "ERROR")
    cmd = [sys.executable, __file__, "--serve", str(port), remote, str(workdir)]
    log = (workdir / "server.log").open("wb")
    proc = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"server exited: {(workdir / 'server.log').read_text()}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.2)
    raise SystemExit("server did not start")


def payload(text: str = "Could you also update the changelog?") -> bytes:
    data = json.loads(FIXTURE.read_text())
    data["comment"]["body"] = text
    return json.dumps(data).encode()


async def deliver(client: httpx.AsyncClient, body: bytes) -> float:
    """One signed delivery; its latency in ms."""
    headers = {
        "X-GitHub-Event": "issue_comment",
        "X-GitHub-Delivery": str(uuid.uuid4()),
        "X-Hub-Signature-256": "sha256="
        + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest(),
        "Content-Type": "application/json",
    }
    started = time.perf_counter()
    response = await client.post("/webhooks/github", content=body, headers=headers)
    if response.status_code != 202:
        raise SystemExit(f"unexpected {response.status_code}: {response.text}")
    return (time.perf_counter() - started) * 1000


async def writer(client: httpx.AsyncClient, latencies: list[float]) -> None:
    """The writer's 66,000-character command, delivered once a second until cancelled."""
    body = payload(FLOOD)
    while True:
        latencies.append(await deliver(client, body))
        await asyncio.sleep(WRITER_EVERY)


async def acknowledge(client: httpx.AsyncClient, body: bytes, seconds: float) -> Figures:
    """Signed deliveries one at a time for ``seconds``; latency percentiles in ms."""
    latencies: list[float] = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        latencies.append(await deliver(client, body))
    latencies.sort()
    return {
        "p50": statistics.median(latencies),
        "p99": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))],
        "max": latencies[-1],
        "n": float(len(latencies)),
    }


async def phases(port: int, args: argparse.Namespace) -> dict[str, list[Figures]]:
    body = payload()
    runs: dict[str, list[Figures]] = {"idle": [], "load": [], "flood": []}
    print(f"{'phase':>6} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'acks':>6}  load")
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=300) as client:
        await acknowledge(client, body, 1.0)  # warm-up of both ends
        for _ in range(args.repeat):
            figures = await acknowledge(client, body, args.seconds)
            runs["idle"].append(figures)
            print(f"{'idle':>6} {row(figures)}", flush=True)
            for phase in ("load", "flood"):
                runs[phase].append(await busy_phase(client, body, args, flood=phase == "flood"))
    return runs


async def busy_phase(
    client: httpx.AsyncClient, body: bytes, args: argparse.Namespace, *, flood: bool
) -> Figures:
    """The tasks at work (and, with ``flood``, the writer's command arriving): acks timed."""
    await client.post(f"/bench/load?tasks={args.tasks}&flood={int(flood)}")
    written: list[float] = []
    sending = asyncio.create_task(writer(client, written)) if flood else None
    await asyncio.sleep(WARM_UP)  # the clones, and the load in full swing
    figures = await acknowledge(client, body, args.seconds)
    if sending is not None:
        sending.cancel()
        await asyncio.gather(sending, return_exceptions=True)
    stats = (await client.post("/bench/idle")).json()
    figures.update(
        calls=stats["calls_per_second"], lag=stats["lag_max_ms"], lag99=stats["lag_p99_ms"]
    )
    note = ""
    if flood:
        cleaned = stats["calls"].get("flood", 0)
        note = f"; flood cleaned {cleaned} times, its {len(written)} deliveries "
        note += f"max {max(written, default=0):.1f} ms"
    name = "flood" if flood else "load"
    print(
        f"{name:>6} {row(figures)}  {stats['calls_per_second']:.1f} tool calls/s, "
        f"loop lag p99 {stats['lag_p99_ms']:.1f} ms, max {stats['lag_max_ms']:.1f} ms{note}",
        flush=True,
    )
    return figures


def row(figures: Figures) -> str:
    return (
        f"{figures['p50']:>8.2f} {figures['p99']:>8.2f} {figures['max']:>8.2f} {figures['n']:>6.0f}"
    )


def summary(runs: dict[str, list[Figures]], tasks: int) -> None:
    def median(phase: str, key: str) -> float:
        return statistics.median(run[key] for run in runs[phase])

    idle_p99 = median("idle", "p99")
    print(f"\nmedians over {len(runs['idle'])} phases each")
    print(f"  idle worker:   p50 {median('idle', 'p50'):.2f} ms, p99 {idle_p99:.2f} ms")
    titles = {"load": f"{tasks} tasks busy", "flood": "busy + flood"}
    for phase, title in titles.items():
        print(
            f"  {title}: p50 {median(phase, 'p50'):.2f} ms, p99 {median(phase, 'p99'):.2f} ms "
            f"({median(phase, 'calls'):.1f} tool calls/s, "
            f"loop lag max {median(phase, 'lag'):.1f} ms)"
        )
    print("targets (figures only)")
    for phase, title in titles.items():
        ratio = median(phase, "p99") / idle_p99
        worst = max(run["p99"] for run in runs[phase])
        print(f"  {title}: p99 / idle p99 (target <= 2x): {ratio:.1f}x; ", end="")
        print(f"worst phase p99 (target <= 100 ms): {worst:.2f} ms")


def main() -> None:
    if len(sys.argv) == 5 and sys.argv[1] == "--serve":
        sys.exit(serve(int(sys.argv[2]), sys.argv[3], Path(sys.argv[4])))
    parser = argparse.ArgumentParser(description="Webhook acks while tasks run tool work.")
    parser.add_argument("--seconds", type=float, default=8.0, help="seconds per phase")
    parser.add_argument("--repeat", type=int, default=3, help="idle/load/flood rounds")
    parser.add_argument("--tasks", type=int, default=8, help="concurrent tasks under load")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        remote = make_repository(workdir)
        port = free_port()
        server = start_server(workdir, port, remote)
        try:
            runs = asyncio.run(phases(port, args))
        finally:
            server.terminate()
            server.wait(20)
            if os.environ.get("BENCH_KEEP_LOG"):
                print((workdir / "server.log").read_text()[-20000:])
    summary(runs, args.tasks)


if __name__ == "__main__":
    main()
