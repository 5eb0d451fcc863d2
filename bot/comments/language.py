"""Which language to answer in: ``comments.language`` (auto | en | ja)."""

from __future__ import annotations

import re

from bot.config import Settings

# Hiragana, katakana and CJK ideographs; kana alone is decisive for Japanese.
_KANA = re.compile(r"[\u3040-\u30ff\uff66-\uff9f]")
_CJK = re.compile(r"[\u4e00-\u9fff]")


def detect_language(text: str) -> str:
    """ "ja" when the text is mostly Japanese, else "en"."""
    kana = len(_KANA.findall(text))
    cjk = len(_CJK.findall(text))
    letters = sum(1 for ch in text if ch.isalpha())
    if letters == 0:
        return "en"
    if kana >= 2 or (kana + cjk) / letters >= 0.3:
        return "ja"
    return "en"


def choose_language(settings: Settings, text: str) -> str:
    if settings.comments.language != "auto":
        return settings.comments.language
    return detect_language(text)
