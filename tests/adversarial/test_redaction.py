"""Redaction sees text from outside (comments, files, command output, model answers):
it must take time linear in the text, whatever the text, and hide what it must."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.redact import REDACTED, redact

SIZE = 65_000  # a GitHub comment's limit

# Each of these made one of the earlier patterns scan the text again from every
# position: 4 to 18 s for 65,000 characters on the event loop.
PATHOLOGICAL = {
    "a key name that never ends": "TOKEN" * (SIZE // 5),
    "a scheme that never ends": "a" * SIZE,
    "a user name that never ends": "x://" + "a" * SIZE,
    "assignments back to back": "TOKEN=" * (SIZE // 6),
    "schemes back to back": "x://" * (SIZE // 4),
    "spaces after a key name": "A_TOKEN" + " " * SIZE,
    "an authorization header of spaces": "Authorization: bearer" + " " * SIZE,
    "user and password pairs": "u:p@" * (SIZE // 4),
    "key prefixes": "glpat-" * (SIZE // 6),
    "private key headers": "-----BEGIN PRIVATE KEY-----" * (SIZE // 27),
}


@pytest.mark.parametrize("text", list(PATHOLOGICAL.values()), ids=list(PATHOLOGICAL))
def test_pathological_text_is_redacted_in_linear_time(text: str) -> None:
    started = time.perf_counter()
    redact(text)
    assert time.perf_counter() - started < 0.5  # was 4-18 s; linear is ~0.01 s


def test_what_the_bounded_patterns_still_hide() -> None:
    text = (
        "clone https://bot:s3cr3tpassw0rd@git.example/x.git\n"
        "Authorization: Bearer abcdef123456\n"
        "GITHUB_TOKEN=ghx_not_a_known_prefix_123456\n"
        "export MY_SERVICE_API_KEY='value-with-quotes-123'\n"
    )
    clean = redact(text)
    for secret in ("s3cr3tpassw0rd", "abcdef123456", "ghx_not_a_known_prefix_123456",
                   "value-with-quotes-123"):  # fmt: skip
        assert secret not in clean
    assert clean.count(REDACTED) == 4
    assert "git.example/x.git" in clean and "/etc/passwd" in redact("/etc/passwd")


@settings(max_examples=200, deadline=None)
@given(
    st.text(max_size=400),
    st.text(min_size=8, max_size=40).filter(lambda s: s.strip() == s and s not in REDACTED),
)
def test_a_known_secret_never_survives_whatever_surrounds_it(noise: str, secret: str) -> None:
    text = f"{noise}{secret}{noise}"
    assert secret not in redact(text, known=[secret])


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from("TOKEN=:/@ -_'\"aZ9\n"), max_size=2000))
def test_redaction_of_any_text_ends_quickly_and_is_stable(text: str) -> None:
    started = time.perf_counter()
    once = redact(text)
    assert time.perf_counter() - started < 0.5
    assert redact(once) == once
