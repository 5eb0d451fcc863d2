"""Webhook bodies: the in-flight budget (503), the read deadline (408) and their release.

First through the real ASGI app (the harness), where a request can be cancelled half-way;
then through a real ``bot serve`` process (uvicorn) with raw sockets: slow and partial
bodies from twenty clients at once, the server's memory and a normal delivery meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx

from tests.harness import GITHUB_SECRET, ROOT, Harness, fixture, github_signature
from tests.test_cli import base_env, free_port, wait_ready

SMALL = {"max_body_bytes": 65536, "max_body_bytes_in_flight": 65536}


def signed_comment() -> tuple[bytes, dict[str, str]]:
    payload = fixture("github", "issue_comment.created.json")
    payload["comment"]["body"] = "Could you also update the changelog?"
    body = json.dumps(payload).encode()
    return body, {
        "X-GitHub-Event": "issue_comment",
        "X-GitHub-Delivery": "d-normal",
        "X-Hub-Signature-256": github_signature(body),
        "Content-Type": "application/json",
    }


async def stalled_body(started: asyncio.Event) -> AsyncIterator[bytes]:
    yield b"{" + b" " * 99
    started.set()
    await asyncio.Event().wait()  # the rest never comes
    yield b"}"


async def start_stalled(bot: Harness) -> tuple[asyncio.Task[httpx.Response], asyncio.Event]:
    started = asyncio.Event()
    headers = {"X-GitHub-Event": "issue_comment", "Content-Length": "60000"}
    request = bot.client.post("/webhooks/github", content=stalled_body(started), headers=headers)
    task = asyncio.ensure_future(request)
    await asyncio.wait_for(started.wait(), 5)
    return task, started


async def test_a_cancelled_read_gives_its_bytes_back(tmp_path: Path) -> None:
    async with Harness(tmp_path, overrides={"server": {**SMALL, "body_timeout": 60}}) as bot:
        stalled, _ = await start_stalled(bot)
        body, headers = signed_comment()
        busy = await bot.client.post("/webhooks/github", content=body, headers=headers)
        assert busy.status_code == 503 and busy.headers["retry-after"] == "60"
        assert busy.headers["connection"] == "close"
        stalled.cancel()  # the client went away while its body was being read
        with contextlib.suppress(asyncio.CancelledError):
            await stalled
        assert bot.app.state.receiver.budget.in_flight == 0
        answer = await bot.client.post("/webhooks/github", content=b"{}", headers=headers)
        assert answer.status_code == 401  # read and judged, not refused for want of room


async def test_a_body_that_comes_too_slowly_gets_408_and_gives_its_bytes_back(
    tmp_path: Path,
) -> None:
    async with Harness(tmp_path, overrides={"server": {**SMALL, "body_timeout": 0.3}}) as bot:
        stalled, _ = await start_stalled(bot)
        response = await asyncio.wait_for(stalled, 5)
        assert response.status_code == 408 and response.headers["connection"] == "close"
        assert bot.app.state.receiver.budget.in_flight == 0
        body, _ = signed_comment()
        assert (await bot.send_github("issue_comment", json.loads(body))).status_code == 202
        assert await bot.store.pending_events() == 1


# --- a real `bot serve` process --------------------------------------------------------------

DECLARED = 25 * 1024 * 1024 - 1024  # just under server.max_body_bytes
SENT = 20 * 1024 * 1024  # then the client stalls
CLIENTS = 20
MB = 1024 * 1024


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


async def slow_client(port: int, sent: asyncio.Event) -> tuple[int, bool]:
    """Declare a 25 MB body, send 20 MB of it and stall; the status and whether the
    server closed the connection afterwards."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    head = (
        f"POST /webhooks/github HTTP/1.1\r\nHost: bot\r\nX-GitHub-Event: issue_comment\r\n"
        f"X-Hub-Signature-256: sha256={'0' * 64}\r\nContent-Length: {DECLARED}\r\n\r\n"
    )
    writer.write(head.encode())
    try:  # a refusal comes at once, before any of the body is sent
        status_line = await asyncio.wait_for(reader.readline(), 2)
    except TimeoutError:
        for _ in range(SENT // MB):
            writer.write(b" " * MB)
            await writer.drain()
        sent.set()
        status_line = await asyncio.wait_for(reader.readline(), 30)
    sent.set()
    with contextlib.suppress(ConnectionError):
        await asyncio.wait_for(reader.read(), 30)  # the rest of the answer, then EOF
    closed = reader.at_eof()
    writer.close()
    with contextlib.suppress(ConnectionError):
        await writer.wait_closed()
    return int(status_line.split()[1]), closed


async def flood(port: int, pid: int) -> tuple[list[tuple[int, bool]], int]:
    before = rss_bytes(pid)
    events = [asyncio.Event() for _ in range(CLIENTS)]
    clients = [asyncio.ensure_future(slow_client(port, event)) for event in events]
    await asyncio.wait_for(asyncio.gather(*(event.wait() for event in events)), 60)
    await asyncio.sleep(0.5)
    growth = rss_bytes(pid) - before  # every body the server took is buffered now
    # Unbounded, the server would hold 20 x 20 MB now.
    assert growth < 150 * MB, f"server RSS grew {growth / MB:.0f} MB"
    body, headers = signed_comment()
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
        normal = await client.post("/webhooks/github", content=body, headers=headers)
    return await asyncio.gather(*clients), normal.status_code


def test_twenty_slow_clients_get_503_or_408_and_memory_stays_bounded(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("server:\n  body_timeout: 8\n")
    port = free_port()
    env = base_env(
        tmp_path, BOT_CONFIG=str(config), GITHUB_WEBHOOK_SECRET=GITHUB_SECRET, GITHUB_TOKEN="t"
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "bot", "serve", "--role", "web", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_ready(port)
        answers, normal = asyncio.run(flood(port, proc.pid))
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    statuses = sorted(status for status, _ in answers)
    # 64 MB in flight hold two bodies declared at 25 MB; the other 18 are refused unread.
    assert statuses == [408] * 2 + [503] * 18, statuses
    assert all(closed for _, closed in answers)
    assert normal == 202  # the normal delivery fitted beside the two slow ones
