"""Redact secrets from everything the bot posts or logs. Pure.

Every pattern runs in time linear in the text: the text comes from outside (comments,
file contents, command output, model answers), so a quantifier that can rescan what it
already read is bounded (``{0,64}``), possessive (``{6,}+``) or anchored to a word
start. tests/adversarial/ feeds each one the inputs that made the old patterns
quadratic."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable

REDACTED = "[REDACTED]"

_PATTERNS: tuple[re.Pattern[str], ...] = (
    re.compile(
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----.*?"
        r"(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----|\Z)",
        re.DOTALL,
    ),
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,255}\b"),
    re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,255}\b"),
    re.compile(r"\bglpat-[A-Za-z0-9_\-]{20,}\b"),
    re.compile(r"\bgl(?:oas|dt|rt|ptt|ft|imt|soat|cbt|agent)-[A-Za-z0-9_\-]{20,}\b"),
    re.compile(r"\bsk-ant-[A-Za-z0-9_\-]{20,}\b"),
    re.compile(r"\bsk-(?:proj-)?[A-Za-z0-9_\-]{20,}\b"),
    re.compile(r"\bxox[abpors]-[A-Za-z0-9\-]{10,}\b"),
    re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    re.compile(r"\beyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}\b"),
)
# Credentials in URLs: scheme://user:password@host -> scheme://[REDACTED]@host
_URL_CREDENTIALS = re.compile(
    r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.\-]{0,31}://)[^/\s:@]{1,512}:[^/\s@]{1,512}@"
)
_BEARER = re.compile(r"(?i)\b(authorization:\s{0,16}(?:bearer|token|basic)\s{1,16})[^\s\"']++")
_ASSIGNMENT = re.compile(
    # A key name standing alone (not a path such as /etc/passwd or a.token attribute).
    r"(?i)(?<![\w/.\-])"
    r"([A-Z0-9_]{0,128}?(?:TOKEN|SECRET|PASSWORD|PASSWD|API_KEY|PRIVATE_KEY)[A-Z0-9_]{0,128})"
    r"(\s{0,16}[=:]\s{0,16})(['\"]?)([^\s'\"]{6,}+)\3"
)


def redact(text: str, *, known: Iterable[str] = ()) -> str:
    """``text`` with tokens, keys, private-key blocks and URL credentials replaced."""
    for secret in sorted({s for s in known if s and len(s) >= 6}, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    for pattern in _PATTERNS:
        text = pattern.sub(REDACTED, text)
    text = _URL_CREDENTIALS.sub(lambda m: f"{m.group('scheme')}{REDACTED}@", text)
    text = _BEARER.sub(lambda m: f"{m.group(1)}{REDACTED}", text)
    text = _ASSIGNMENT.sub(
        lambda m: f"{m.group(1)}{m.group(2)}{m.group(3)}{REDACTED}{m.group(3)}", text
    )
    return text


class RedactingFilter(logging.Filter):
    """A logging filter that redacts every record's message."""

    def __init__(self, known: Iterable[str] = ()) -> None:
        super().__init__()
        self.known = tuple(known)

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact(message, known=self.known)
        if cleaned != message:
            record.msg = cleaned
            record.args = None
        return True
