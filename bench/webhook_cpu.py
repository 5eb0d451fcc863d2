"""CPU time per webhook through the app's ASGI callable (prints figures; not a test).

No server, no client, no network: signed GitHub ``issue_comment`` deliveries are handed to
``create_app(...)`` directly, in this process, and the process's CPU time (all threads: the
SQLite writer's too) is divided by the deliveries. Two paths: a wrong signature (401:
routing, reading, verifying; no store write) and a good one (202: parsing, classifying and
the durable inbox write as well). CPU time, unlike wall time, is hardly moved by other
processes on a shared machine, so small differences between two checkouts show.

    .venv/bin/python bench/webhook_cpu.py [--root DIR] [--through-router] [--traces]

``--root`` measures another checkout (its ``bot`` package and ``config.yaml``);
``--through-router`` sends the webhooks through Starlette's middleware stack and router
like every other route (the app answers them before it: this shows what that saves);
``--traces`` starts traces as ``bot serve`` does (sampling 1.0, OTLP/HTTP to a local
receiver that drops the exports) and runs each trial twice, traces off then on, in turns
in the same process: what a delivery's span costs the request path, side by side (the
export process's own CPU is not counted: it is another process).
Each figure is the minimum and the median of ``--trials`` trials of ``--requests``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import hmac
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))  # after --root's checkout, which goes first

from bench.webhook_ack import drop_receiver  # noqa: E402

SECRET = "bench-secret"


def scope(body: bytes, signature: str, delivery: str) -> dict[str, Any]:
    headers = [
        (b"x-github-event", b"issue_comment"),
        (b"x-github-delivery", delivery.encode()),
        (b"x-hub-signature-256", signature.encode()),
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
    ]
    return {
        "type": "http", "method": "POST", "path": "/webhooks/github",
        "raw_path": b"/webhooks/github", "query_string": b"", "headers": headers,
        "root_path": "", "scheme": "http", "server": ("bot", 80), "client": ("192.0.2.1", 1),
        "http_version": "1.1", "asgi": {"version": "3.0"},
    }  # fmt: skip


async def trial(app: Any, body: bytes, signature: str, prefix: str, count: int) -> float:
    """CPU microseconds per delivery over ``count`` deliveries."""

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    statuses: list[int] = []

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])

    started = time.process_time()
    for n in range(count):
        await app(scope(body, signature, f"{prefix}-{n}"), receive, send)
    spent = time.process_time() - started
    if len(set(statuses)) != 1:
        raise SystemExit(f"answers differ within a trial: {sorted(set(statuses))}")
    return spent / count * 1e6


async def main(args: argparse.Namespace) -> None:
    root = args.root.resolve()
    sys.path.insert(0, str(root))
    from bot.app import create_app
    from bot.config import load_settings
    from bot.runtime import Runtime

    body = (root / "tests" / "fixtures" / "github" / "issue_comment.created.json").read_bytes()
    good = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        env = {"BOT_DATA_DIR": tmp, "GITHUB_WEBHOOK_SECRET": SECRET, "GITHUB_TOKEN": "unused"}
        if args.traces:
            env["BOT_TRACES_ENABLED"] = "true"
            os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = stack.enter_context(drop_receiver())
        runtime = Runtime.from_settings(load_settings(env, root / "config.yaml"))
        await runtime.start()
        try:
            app: Any = create_app(runtime, manage_runtime=False)
            if args.through_router:
                app.direct = {}  # the app's plain-ASGI shortcut off: the router answers
            where = Path(sys.modules["bot"].__file__ or "").parent.parent
            print(f"{where} ({'through the router' if args.through_router else 'as served'})")
            for label, signature in (("401 wrong signature", "sha256=0"), ("202 queued", good)):
                if args.traces:
                    await side_by_side(app, body, signature, label, args)
                    continue
                figures = [
                    await trial(app, body, signature, f"{label[:3]}-{t}", args.requests)
                    for t in range(args.trials)
                ]
                print(
                    f"  {label:>19}: {min(figures):6.1f} µs CPU per delivery (min), "
                    f"{statistics.median(figures):6.1f} (median of {args.trials})"
                )
        finally:
            await runtime.stop()


async def side_by_side(
    app: Any, body: bytes, signature: str, label: str, args: argparse.Namespace
) -> None:
    """Trials with traces off and on in turns (the same process, the same app)."""
    from bot.tracing import core

    started = core.active()
    if started is None:
        raise SystemExit("--traces: traces did not start (is the traces extra installed?)")
    figures: dict[str, list[float]] = {"off": [], "on": []}
    try:
        for t in range(args.trials):
            for mode in figures:
                core.activate(started if mode == "on" else None)
                prefix = f"{label[:3]}-{mode}-{t}"
                figures[mode].append(await trial(app, body, signature, prefix, args.requests))
    finally:
        core.activate(started)  # the runtime stops what it started
    off, on = (statistics.median(figures[mode]) for mode in ("off", "on"))
    pairs = [b / a for a, b in zip(figures["off"], figures["on"], strict=True)]
    print(
        f"  {label:>19}: off {off:6.1f}, on {on:6.1f} µs CPU per delivery (medians of "
        f"{args.trials}); on - off {on - off:+.1f} µs, on/off {on / off:.1%} "
        f"(per trial {min(pairs):.1%}-{max(pairs):.1%})"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="CPU time per webhook through the app.")
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout to measure")
    parser.add_argument("--through-router", action="store_true")
    parser.add_argument("--traces", action="store_true", help="traces off and on, in turns")
    parser.add_argument("--trials", type=int, default=12)
    parser.add_argument("--requests", type=int, default=1000)
    asyncio.run(main(parser.parse_args()))
