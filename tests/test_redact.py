import logging

import pytest

from bot.redact import REDACTED, RedactingFilter, redact

SECRETS = [
    "ghp_" + "a1B2" * 9,
    "ghs_" + "Z" * 36,
    "github_pat_" + "11ABCDEFG0" * 5,
    "glpat-" + "x1y2z3" * 4,
    "sk-proj-" + "Q" * 40,
    "sk-ant-api03-" + "w" * 40,
    "AKIAIOSFODNN7EXAMPLE",
    "xoxb-1234567890-abcdefghij",
]


@pytest.mark.parametrize("secret", SECRETS)
def test_known_token_shapes_are_redacted(secret: str) -> None:
    out = redact(f"before {secret} after")
    assert secret not in out and REDACTED in out
    assert out.startswith("before ") and out.endswith(" after")


def test_private_key_blocks() -> None:
    block = "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\nabc\n-----END RSA PRIVATE KEY-----"
    assert redact(f"x\n{block}\ny") == f"x\n{REDACTED}\ny"
    assert "MIIE" not in redact("-----BEGIN OPENSSH PRIVATE KEY-----\nMIIE cut off")


def test_credentials_in_urls_and_headers_and_assignments() -> None:
    assert redact("https://x-access-token:s3cr3t@github.com/o/r.git") == (
        f"https://{REDACTED}@github.com/o/r.git"
    )
    assert redact("Authorization: Bearer abc.def") == f"Authorization: Bearer {REDACTED}"
    assert redact("GITHUB_TOKEN=abcdef123456") == f"GITHUB_TOKEN={REDACTED}"
    assert redact('api_key: "zzzzzzzz"') == f'api_key: "{REDACTED}"'


@pytest.mark.parametrize(
    "text",
    [
        "Fixed the README; see https://github.com/o/r/pull/1 and task_1.",
        "/etc/passwd: absolute paths outside the workspace are not allowed",
        "settings.webhook_secret: SecretStr is used for the header check",
    ],
)
def test_plain_text_is_untouched(text: str) -> None:
    assert redact(text) == text


def test_known_values_and_logging_filter(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("test.redact")
    handler_filter = RedactingFilter(["my-webhook-secret"])
    logger.addFilter(handler_filter)
    try:
        with caplog.at_level(logging.INFO, logger="test.redact"):
            logger.info("secret is %s", "my-webhook-secret")
    finally:
        logger.removeFilter(handler_filter)
    assert "my-webhook-secret" not in caplog.text
    assert REDACTED in caplog.text
