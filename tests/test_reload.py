"""Configuration reload while running (SIGHUP)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from bot.config import load_settings
from bot.events import ForgeKind
from bot.llm.base import LLMRequest, Message
from bot.llm.openai import OpenAICompatibleLLM
from bot.llm.scripted import ScriptedLLM
from bot.runtime import Runtime
from bot.storage.sqlite import SqliteStore
from tests.fakes import FakeForge
from tests.llm.model_server import Reply, Sent, model_server
from tests.llm.payloads import chat_completion, model_list_owned

ROOT = Path(__file__).resolve().parent.parent


def runtime_for(config: Path, tmp_path: Path) -> Runtime:
    settings = load_settings({"BOT_DATA_DIR": str(tmp_path / "d")}, config)
    return Runtime(
        settings,
        store=SqliteStore(tmp_path / "d" / "x.sqlite3"),
        forges={ForgeKind.GITHUB: FakeForge()},
        llm=ScriptedLLM([]),
    )


def test_reload_applies_live_sections_and_keeps_restart_ones(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("planning:\n  revision:\n    max_revisions: 3\n")
    runtime = runtime_for(config, tmp_path)
    config.write_text(
        "planning:\n  revision:\n    max_revisions: 5\nlabels:\n  done: finished\n"
        "server:\n  port: 9999\n"
    )
    lines = runtime.reload({"BOT_DATA_DIR": str(tmp_path / "d")})
    assert runtime.settings.planning.revision.max_revisions == 5
    assert runtime.settings.labels.done == "finished"
    assert runtime.settings.server.port == 8080
    assert "server: changed, but takes effect only after a restart" in lines
    assert "planning: reloaded" in lines and "labels: reloaded" in lines


def test_an_invalid_file_changes_nothing(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("comments:\n  language: en\n")
    runtime = runtime_for(config, tmp_path)
    config.write_text("comments:\n  languag: ja\n")
    [line] = runtime.reload({})
    assert line.startswith("configuration not reloaded") and "comments.languag" in line
    assert runtime.settings.comments.language == "en"


def test_sighup_reloads_a_running_server(tmp_path: Path) -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    config = tmp_path / "config.yaml"
    config.write_text("labels:\n  done: done-1\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "GITLAB_"))}
    env.update(BOT_DATA_DIR=str(tmp_path / "data"), BOT_CONFIG=str(config))
    proc = subprocess.Popen(
        [sys.executable, "-m", "bot", "serve", "--port", str(port), "--role", "web"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1)
                break
            except httpx.HTTPError:
                assert time.monotonic() < deadline
                time.sleep(0.2)
        config.write_text("labels:\n  done: done-2\n")
        proc.send_signal(signal.SIGHUP)
        time.sleep(1.0)
    finally:
        proc.terminate()
        output, _ = proc.communicate(timeout=20)
    assert "reload: labels: reloaded" in output


async def test_a_reload_makes_the_model_endpoint_be_probed_again(tmp_path: Path) -> None:
    def answer(sent: Sent) -> Reply:
        if sent.method == "GET":
            return Reply(200, model_list_owned("system", "m"))
        return Reply(200, chat_completion('{"ok": true}'))

    config = tmp_path / "config.yaml"
    config.write_text("labels:\n  done: finished\n")
    runtime = runtime_for(config, tmp_path)
    request = LLMRequest("planning", (Message("user", "plan"),), schema={"type": "object"})
    with model_server(answer) as server:
        llm = OpenAICompatibleLLM(base_url=server.url + "/v1", model="m")
        runtime.llm = llm
        try:
            await llm.complete(request)
            await llm.complete(request)
            probes = len([s for s in server.requests if s.path.endswith("/chat/completions")])
            runtime.reload({"BOT_DATA_DIR": str(tmp_path / "d")})
            await llm.complete(request)
        finally:
            await llm.aclose()
    posts = [s.body["messages"][-1]["content"] for s in server.requests if s.method == "POST"]
    assert probes == 3 and posts == ["Are you there?", "plan", "plan", "Are you there?", "plan"]
