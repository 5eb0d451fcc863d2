"""``OLLAMA_HOST``, as the specification names Ollama's endpoint: the model's base URL when
``LLM_BASE_URL`` is not set (``LLM_BASE_URL`` wins when both are)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.config import load_settings
from bot.config.env import ollama_base_url, without_overrides

REPO_CONFIG = Path(__file__).resolve().parent.parent / "config.yaml"


@pytest.mark.parametrize(
    ("given", "base_url"),
    [
        ("localhost", "http://localhost:11434/v1"),
        ("127.0.0.1:11500", "http://127.0.0.1:11500/v1"),
        ("http://gpu.lan:8000/", "http://gpu.lan:8000/v1"),
        ("https://ollama.example", "https://ollama.example/v1"),
        ("http://gpu.lan:11434/v1", "http://gpu.lan:11434/v1"),
        ("[::1]", "http://[::1]:11434/v1"),
    ],
)
def test_ollama_host_is_read_as_ollama_reads_it(given: str, base_url: str) -> None:
    assert ollama_base_url(given) == base_url
    settings = load_settings({"OLLAMA_HOST": given}, REPO_CONFIG)
    assert settings.llm.base_url == base_url


def test_llm_base_url_wins_over_ollama_host() -> None:
    both = {"OLLAMA_HOST": "gpu.lan", "LLM_BASE_URL": "http://other.lan:9000/v1"}
    assert load_settings(both, REPO_CONFIG).llm.base_url == "http://other.lan:9000/v1"
    plain = load_settings({}, REPO_CONFIG).llm.base_url
    assert load_settings({"OLLAMA_HOST": ""}, REPO_CONFIG).llm.base_url == plain
    assert without_overrides({"OLLAMA_HOST": "gpu.lan", "PATH": "/bin"}) == {"PATH": "/bin"}
