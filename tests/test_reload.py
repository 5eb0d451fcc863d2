"""Configuration reload while running (SIGHUP)."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from bot.config import load_settings
from bot.events import ForgeKind
from bot.llm.base import LLMRequest, Message
from bot.llm.factory import make_llm
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


def test_a_refused_reload_logs_no_secret(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A whole-settings error (the input at that level holds the merged secrets) is logged
    with its key and message only."""
    token, key_text = "ghp_" + "S" * 36, "-----BEGIN KEY-----in-a-file-only-0123456789"
    key_file = tmp_path / "app.pem"
    key_file.write_text(key_text)
    config = tmp_path / "config.yaml"
    config.write_text(f"github:\n  private_key_path: {key_file}\n")
    environ = {"BOT_DATA_DIR": str(tmp_path / "d"), "GITHUB_TOKEN": token}
    runtime = runtime_for(config, tmp_path)
    config.write_text(f"github:\n  private_key_path: {key_file}\nworker:\n  stall_seconds: 1\n")

    async def hang_up() -> None:
        runtime.watch_reload_signal(environ)
        try:
            os.kill(os.getpid(), signal.SIGHUP)
            for _ in range(100):
                await asyncio.sleep(0.01)
                if "not reloaded" in caplog.text:
                    break
        finally:
            asyncio.get_running_loop().remove_signal_handler(signal.SIGHUP)

    with caplog.at_level(logging.WARNING, logger="bot"):
        asyncio.run(hang_up())
    assert "configuration not reloaded" in caplog.text and "stall_seconds" in caplog.text
    assert token not in caplog.text and key_text not in caplog.text, caplog.text


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


async def test_a_reload_of_the_llm_section_puts_a_new_model_in_place_for_new_calls(
    tmp_path: Path,
) -> None:
    """Two OpenAI-compatible servers on loopback: a call in flight to the first finishes
    there after the reload; the next call goes to the second, whose dialect is probed
    (not taken from the store, which holds one for it); the first provider is closed
    once its call has ended."""
    asked, release = threading.Event(), threading.Event()

    def first(sent: Sent) -> Reply:
        if sent.method == "GET":
            return Reply(200, model_list_owned("system", "m"))
        if sent.body["messages"][-1]["content"] == "plan":
            asked.set()
            release.wait(20)  # the call in flight while the configuration is reloaded
            return Reply(200, chat_completion('{"from": "first"}'))
        return Reply(200, chat_completion('{"ok": true}'))

    def second(sent: Sent) -> Reply:
        if sent.method == "GET":
            return Reply(200, model_list_owned("system", "m"))
        if sent.body["messages"][-1]["content"] == "plan":
            return Reply(200, chat_completion('{"from": "second"}'))
        return Reply(200, chat_completion('{"ok": true}'))

    env = {"BOT_DATA_DIR": str(tmp_path / "d")}
    request = LLMRequest("planning", (Message("user", "plan"),), schema={"type": "object"})
    config = tmp_path / "config.yaml"
    with model_server(first) as one, model_server(second) as two:
        config.write_text(f"llm:\n  base_url: {one.url}/v1\n  model: m\n")
        settings = load_settings(env, config)
        store = SqliteStore(tmp_path / "d" / "x.sqlite3")
        await store.open()
        runtime = Runtime(
            settings, store=store, forges={}, llm=make_llm(settings.llm, dialects=store)
        )
        old = runtime.provider
        assert isinstance(old, OpenAICompatibleLLM)
        await store.put_llm_dialect(two.url + "/v1", "m", dialect="json_object", server="unknown")
        try:
            in_flight = asyncio.create_task(runtime.llm.complete(request))
            assert await asyncio.to_thread(asked.wait, 20)

            config.write_text(f"llm:\n  base_url: {two.url}/v1\n  model: m\n")
            lines = runtime.reload(env)
            assert f"new calls go to openai m at {two.url}/v1 (base_url changed)" in lines[0]
            assert runtime.settings.llm.base_url == two.url + "/v1"

            answer = await runtime.llm.complete(request)
            assert answer.text == '{"from": "second"}'
            assert not in_flight.done() and not old._http.is_closed  # still answering

            release.set()
            assert (await in_flight).text == '{"from": "first"}'
            for _ in range(100):
                if old._http.is_closed:
                    break
                await asyncio.sleep(0.02)
            assert old._http.is_closed  # closed once its last call ended
        finally:
            release.set()
            await runtime.llm.aclose()
            await store.close()
    posts = [s.body["messages"][-1]["content"] for s in two.requests if s.method == "POST"]
    assert posts == ["Are you there?", "plan"]  # probed again, then the call


def test_a_reload_with_an_unusable_llm_section_keeps_the_model_in_place(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("labels:\n  done: finished\n")
    runtime = runtime_for(config, tmp_path)
    before = runtime.provider
    config.write_text(
        "labels:\n  done: finished\n"
        f"llm:\n  provider: scripted\n  script_path: {tmp_path / 'missing.yaml'}\n"
    )
    lines = runtime.reload({"BOT_DATA_DIR": str(tmp_path / "d")})
    assert len(lines) == 1
    assert lines[0].startswith("llm: not reloaded, the previous model stays in place:")
    assert "missing.yaml" in lines[0]
    assert runtime.provider is before and runtime.settings.llm.provider == "openai"


async def test_the_bot_s_account_ids_are_asked_at_start_and_kept_over_a_reload(
    tmp_path: Path,
) -> None:
    """Issue 27: the bot is known by its account id, asked of each forge once (a forge
    that does not answer leaves it unknown); a reload keeps it while the login stays."""
    from bot.forges.base import ForgeError
    from tests.fakes import BOT_ACCOUNT_ID

    config = tmp_path / "config.yaml"
    config.write_text("labels:\n  done: finished\n")
    settings = load_settings({"BOT_DATA_DIR": str(tmp_path / "d")}, config)
    github, gitlab = FakeForge(), FakeForge(ForgeKind.GITLAB)
    gitlab.fail("bot_account", ForgeError("GET /user: 502"))
    runtime = Runtime(
        settings,
        store=SqliteStore(tmp_path / "d" / "x.sqlite3"),
        forges={ForgeKind.GITHUB: github, ForgeKind.GITLAB: gitlab},
        llm=ScriptedLLM([]),
    )
    await runtime.start()
    try:
        assert runtime.settings.bot.github_id == BOT_ACCOUNT_ID
        assert runtime.settings.bot.gitlab_id == ""  # unknown: the exact login decides
        config.write_text("labels:\n  done: done\n")
        runtime.reload({"BOT_DATA_DIR": str(tmp_path / "d")})
        assert runtime.settings.labels.done == "done"
        assert runtime.settings.bot.github_id == BOT_ACCOUNT_ID
        config.write_text("bot:\n  github_login: other-app[bot]\n")
        runtime.reload({"BOT_DATA_DIR": str(tmp_path / "d")})
        assert runtime.settings.bot.github_id == ""  # another account: asked again at start
    finally:
        await runtime.stop()


async def test_a_forge_that_does_not_say_who_the_bot_is_does_not_hold_up_the_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import bot.runtime

    monkeypatch.setattr(bot.runtime, "ACCOUNT_TIMEOUT", 0.2)
    config = tmp_path / "config.yaml"
    config.write_text("labels:\n  done: finished\n")
    runtime = runtime_for(config, tmp_path)
    github = runtime.forges[ForgeKind.GITHUB]
    assert isinstance(github, FakeForge)
    github.hang("bot_account")
    started = time.monotonic()
    await runtime.start()
    try:
        assert time.monotonic() - started < 5
        assert runtime.settings.bot.github_id == ""
    finally:
        await runtime.stop()
