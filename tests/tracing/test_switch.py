"""Traces are off by default and free when off (no SDK imported, one shared no-op); on,
they read the settings and the standard OTEL_EXPORTER_OTLP_* variables; without the SDK
the bot works and says so at start; config.yaml never holds a collector's credentials."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest

from bot import tracing
from bot.config import ConfigError, load_settings
from bot.storage.base import TaskState
from bot.tracing import sdk
from tests.e2e.support import gh_labeled, github_repo, settle
from tests.e2e.test_success import readme_script
from tests.harness import ROOT, Harness
from tests.tools.conftest import Remote


def test_while_off_a_span_is_the_shared_no_op_and_nothing_is_kept() -> None:
    assert not tracing.enabled()
    with tracing.span("anything", {"k": "v"}) as first, tracing.span("other") as second:
        assert first is second is tracing.NOOP and not first.recording
        first.set("k", "v")
        first.fail("nothing")
    assert tracing.inject() == {} and tracing.traceparent() == ""
    payload = {"name": "issues"}
    assert tracing.stamp_event(payload, "issues", "labeled", "d-1", "github:1:d-1") is payload
    assert payload == {"name": "issues"}
    with tracing.webhook_span("github", "/webhooks/github") as hook:
        assert hook is tracing.NOOP


def test_the_bot_imports_no_opentelemetry_sdk_while_traces_are_off() -> None:
    probe = (
        "import sys\n"
        "import bot.cli, bot.app, bot.api.routes, bot.receiver, bot.dashboard.views, bot.worker\n"
        "import bot.agent.loop, bot.tools.factory\n"
        "from bot import tracing\n"
        "with tracing.span('x'):\n"
        "    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith(('opentelemetry.sdk', "
        "'opentelemetry.exporter', 'bot.tracing.sdk'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout  # fmt: skip
    assert out.strip() == "[]"


@pytest.mark.sandbox
async def test_traces_on_without_the_sdk_the_bot_says_so_and_works(
    tmp_path: Path,
    remote: Remote,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The SDK cannot be imported, as on a server installed without the traces extra.
    for name in [*sys.modules, "opentelemetry.sdk", "opentelemetry.exporter"]:
        if name.startswith(("opentelemetry.sdk", "opentelemetry.exporter")):
            monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.delitem(sys.modules, "bot.tracing.sdk", raising=False)
    overrides = {"observability": {"traces": tracing_on()}}
    async with Harness(tmp_path, script=readme_script(), overrides=overrides) as bot:
        with caplog.at_level(logging.INFO, logger="bot.runtime"):
            bot.runtime.start_traces({})
        assert not tracing.enabled()
        [said] = [r for r in caplog.records if r.name == "bot.runtime"]
        assert said.levelno == logging.ERROR
        assert "OpenTelemetry SDK is not installed" in said.getMessage()
        assert "running WITHOUT traces" in said.getMessage()
        assert "pip install -e '.[traces]'" in said.getMessage()
        github_repo(bot, remote, labels=("bug", "coding agent"))
        assert (await bot.send_github("issues", gh_labeled())).status_code == 202
        await settle(bot)
        [task] = await bot.tasks()
        assert task.state is TaskState.DONE


def tracing_on() -> object:
    from bot.config import TracesSettings

    return TracesSettings(enabled=True)


def test_the_exporter_reads_the_settings_then_the_standard_variables() -> None:
    http = sdk.HTTP
    plain = tracing.TraceOptions()
    assert sdk.endpoint_of(plain, {}, http) == "http://localhost:4318/v1/traces"
    general = {"OTEL_EXPORTER_OTLP_ENDPOINT": "https://otel.example/api/public/otel"}
    assert sdk.endpoint_of(plain, general, http) == "https://otel.example/api/public/otel/v1/traces"
    signal = {**general, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://tempo:4318/v1/traces"}
    assert sdk.endpoint_of(plain, signal, http) == "http://tempo:4318/v1/traces"
    configured = tracing.TraceOptions(endpoint="http://jaeger:4318/")
    assert sdk.endpoint_of(configured, signal, http) == "http://jaeger:4318/v1/traces"
    assert sdk.endpoint_of(configured, {}, sdk.GRPC) == "http://jaeger:4318/"
    assert sdk.protocol_of(plain, {}) == http
    assert sdk.protocol_of(plain, {"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}) == sdk.GRPC
    with pytest.raises(ValueError, match="is not http/protobuf or grpc"):
        sdk.protocol_of(plain, {"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"})
    headers = {"OTEL_EXPORTER_OTLP_HEADERS": "Authorization=Basic%20cGs6c2s=,x-team=bots"}
    assert sdk.headers_of(headers) == {"authorization": "Basic cGs6c2s=", "x-team": "bots"}
    assert sdk.headers_of({**headers, "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "a=b"}) == {"a": "b"}


def test_a_sampling_ratio_of_zero_keeps_no_new_trace() -> None:
    provider, said = sdk.provider(tracing.TraceOptions(sample_ratio=0.0), {})
    try:
        tracing.install(provider)
        with tracing.span("kept?") as span:
            assert not span.recording
            flags = int(tracing.traceparent().rsplit("-", 1)[1], 16)
            assert flags & 1 == 0  # propagated, not sampled
    finally:
        tracing.uninstall()
        provider.shutdown()
    assert "sampling 0" in said and "localhost:4318/v1/traces" in said


def test_grpc_without_its_package_keeps_traces_off_and_says_why() -> None:
    said = tracing.start(tracing.TraceOptions(protocol="grpc"), {})
    assert not tracing.enabled()
    assert "opentelemetry-exporter-otlp-proto-grpc" in said and "WITHOUT traces" in said


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("observability:\n  traces:\n    headers: {authorization: Bearer x}\n",
         "headers are not read from the configuration file: set OTEL_EXPORTER_OTLP_HEADERS"),
        ("observability:\n  traces:\n    endpoint: https://pk:sk@otel.example\n",
         "must not hold credentials: give them in OTEL_EXPORTER_OTLP_HEADERS"),
        ("observability:\n  traces:\n    endpoint: otel.example:4318\n", "must be an http(s) URL"),
        ("observability:\n  trace_url: http://jaeger:16686/search\n", "must contain {trace_id}"),
        ("observability:\n  trace_url: javascript:alert({trace_id})\n", "must be an http(s) URL"),
        ("observability:\n  traces:\n    sample_ratio: 1.5\n", "sample_ratio"),
    ],
)  # fmt: skip
def test_settings_refuse_what_they_must_not_hold(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_settings({}, write(tmp_path, text))


def test_traces_are_off_by_default_and_the_environment_turns_them_on(tmp_path: Path) -> None:
    path = write(tmp_path, "{}\n")
    assert not load_settings({}, path).observability.traces.enabled
    settings = load_settings({"BOT_TRACES_ENABLED": "true"}, path)
    assert settings.observability.traces.enabled
    linked = write(tmp_path, "observability:\n  trace_url: http://j:16686/trace/{trace_id}\n")
    observability = load_settings({}, linked).observability
    assert observability.trace_link("ab" * 16) == f"http://j:16686/trace/{'ab' * 16}"
    assert observability.trace_link("") is None
