"""Setup steps and health reports: pure decisions."""

from __future__ import annotations

import pytest

from bot.llm.health import health_report, is_local, is_ollama, model_available, setup_steps

OLLAMA = "http://127.0.0.1:11434/v1"


def steps(
    base_url: str,
    *,
    provider: str = "openai",
    model: str = "qwen2.5-coder",
    reachable: bool = True,
    models: tuple[str, ...] = (),
    status: int | None = 200,
) -> tuple[str, ...]:
    return setup_steps(provider, base_url, model, reachable=reachable, models=models, status=status)


def test_unreachable_ollama_install_start_pull() -> None:
    assert steps(OLLAMA, reachable=False, status=None) == (
        "Install Ollama: https://ollama.com/download",
        "Start it: ollama serve",
        "Pull the model: ollama pull qwen2.5-coder",
        f"Check LLM_BASE_URL (currently {OLLAMA})",
    )


@pytest.mark.parametrize(
    ("base_url", "first"),
    [
        ("http://localhost:8000/v1", "Start vLLM: vllm serve qwen2.5-coder"),
        ("http://127.0.0.1:8080/v1", "Start the llama.cpp server: llama-server -m <model.gguf>"),
        ("http://127.0.0.1:1234/v1", "Start LM Studio's local server: lms server start"),
        ("http://localhost:4000", "Start the LiteLLM proxy: litellm --config <config.yaml>"),
        ("http://vllm.internal:9000/v1", None),  # not local: check the network instead
    ],
)
def test_unreachable_server_named_by_its_default_port(base_url: str, first: str | None) -> None:
    result = steps(base_url, reachable=False, status=None)
    if first is None:
        assert result[0].startswith("Check that vllm.internal is reachable")
    else:
        assert result[0].startswith(first)
        assert result[-1] == f"Check LLM_BASE_URL (currently {base_url})"


def test_unreachable_other_local_server() -> None:
    result = steps("http://localhost:9000/v1", reachable=False, status=None)
    assert result[0].startswith("Start the OpenAI-compatible server that should listen on")
    assert "vllm serve qwen2.5-coder" in result[0]
    assert "Install Ollama: https://ollama.com/download" in result
    assert "Pull the model: ollama pull qwen2.5-coder" in result


def test_unreachable_hosted_endpoint() -> None:
    assert steps("https://llm.example.com/v1", reachable=False, status=None) == (
        "Check that llm.example.com is reachable from this machine (DNS, proxy, firewall)",
        "Check LLM_BASE_URL (currently https://llm.example.com/v1)",
    )


def test_missing_model_on_ollama_with_others_available() -> None:
    assert steps(OLLAMA, models=("llama3.2:latest",)) == (
        "Pull the model: ollama pull qwen2.5-coder",
        "Or set LLM_MODEL to one of: llama3.2:latest",
    )


def test_missing_model_on_ollama_with_nothing_pulled() -> None:
    assert steps(OLLAMA) == ("Pull the model: ollama pull qwen2.5-coder",)


def test_missing_model_on_other_local_server() -> None:
    assert steps("http://127.0.0.1:8000/v1", models=("Qwen/Qwen2.5-Coder-7B",)) == (
        "Serve the model qwen2.5-coder on the server at http://127.0.0.1:8000/v1",
        "Or set LLM_MODEL to one of: Qwen/Qwen2.5-Coder-7B",
    )


def test_missing_model_hosted_lists_at_most_ten() -> None:
    models = tuple(f"gpt-{n}" for n in range(12))
    (only,) = steps("https://api.openai.com/v1", model="gpt-x", models=models)
    assert only.startswith("Set LLM_MODEL to one of: gpt-0, gpt-1,")
    assert only.endswith("gpt-9 (and 2 more)")


def test_hosted_without_models() -> None:
    assert steps("https://api.openai.com/v1", model="gpt-x") == (
        "The endpoint lists no models: check that gpt-x exists for this account",
    )


@pytest.mark.parametrize(
    ("provider", "status", "expected"),
    [
        ("openai", 401, "Set LLM_API_KEY (or OPENAI_API_KEY) to a valid API key for {url}"),
        ("openai", 403, "Set LLM_API_KEY (or OPENAI_API_KEY) to a valid API key for {url}"),
        ("anthropic", 401, "Set LLM_API_KEY (or ANTHROPIC_API_KEY) to a valid API key for {url}"),
        ("anthropic", 404, "Set LLM_BASE_URL to https://api.anthropic.com"),
        (
            "openai",
            404,
            "Check LLM_BASE_URL: {url} has no model list; OpenAI-compatible "
            "servers serve under /v1 (try {url}/v1)",
        ),
        ("openai", 500, "The endpoint answered HTTP 500: check LLM_BASE_URL and the server's logs"),
    ],
)
def test_refusals(provider: str, status: int, expected: str) -> None:
    url = "https://llm.example.com"
    assert steps(url, provider=provider, status=status) == (expected.format(url=url),)


def test_nothing_to_do_when_fine_or_scripted() -> None:
    assert steps(OLLAMA, models=("qwen2.5-coder:latest",)) == ()
    assert steps("", provider="scripted", reachable=False, status=None) == ()


def test_model_available_matching() -> None:
    assert model_available("qwen2.5-coder", ["qwen2.5-coder:latest"])
    assert model_available("qwen2.5-coder:7b", ["qwen2.5-coder:7b"])
    assert not model_available("qwen2.5-coder:7b", ["qwen2.5-coder:latest"])
    assert model_available("claude-sonnet-4-5", ["claude-sonnet-4-5-20250929"])
    assert not model_available("gpt-4o", ["gpt-4o-mini"])
    assert not model_available("gpt-4o", [])


def test_locality() -> None:
    assert is_local("http://localhost:8080/v1") and is_local("http://127.0.0.2/v1")
    assert is_local("http://gpu-box:11434/v1") and is_ollama("http://gpu-box:11434/v1")
    assert is_ollama("http://ollama:8080/v1") and not is_local("https://api.openai.com/v1")
    assert not is_local("http://[bad")


def test_health_report_fields() -> None:
    report = health_report(
        "openai", OLLAMA, "qwen2.5-coder", status=200, models=("llama3.2",), error=None
    )
    assert report.to_dict() == {
        "ready": False,
        "server": "",
        "dialect": None,
        "answered": None,
        "latency_ms": None,
        "probed": [],
        "reachable": True,
        "provider": "openai",
        "base_url": OLLAMA,
        "model": "qwen2.5-coder",
        "models": ["llama3.2"],
        "model_available": False,
        "error": f"model 'qwen2.5-coder' is not served by {OLLAMA}",
        "setup_steps": [
            "Pull the model: ollama pull qwen2.5-coder",
            "Or set LLM_MODEL to one of: llama3.2",
        ],
    }
    down = health_report("openai", OLLAMA, "m", status=None, models=(), error="refused")
    assert (down.reachable, down.model_available, down.error) == (False, None, "refused")
    assert down.setup_steps[0] == "Install Ollama: https://ollama.com/download"


def test_a_refused_key_names_the_service_it_is_for() -> None:
    assert steps("https://openrouter.ai/api/v1", status=401) == (
        "Set LLM_API_KEY to an OpenRouter API key (https://openrouter.ai/keys)",
    )
    assert steps("http://127.0.0.1:4000", status=401) == (
        "Set LLM_API_KEY to a LiteLLM proxy key for http://127.0.0.1:4000",
    )
    assert steps("https://api.openai.com/v1", status=401) == (
        "Set LLM_API_KEY (or OPENAI_API_KEY) to a valid API key for https://api.openai.com/v1",
    )
