"""Property-based: whatever JSON a (signed) delivery carries, the webhook parsers give a
``ForgeEvent`` or a ``PayloadError`` naming what is wrong: never another exception,
which the server would answer with a 500 (and GitHub would not redeliver)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.events import ForgeEvent
from bot.webhooks import github, gitlab
from bot.webhooks.errors import PayloadError

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
GITHUB = {  # file name -> (event, documented payload)
    path.stem: (path.stem.split(".")[0], json.loads(path.read_text()))
    for path in sorted((FIXTURES / "github").glob("*.json"))
}
GITLAB_INDEX = json.loads((FIXTURES / "gitlab" / "index.json").read_text())
GITLAB = {
    item["event"]: json.loads((FIXTURES / "gitlab" / item["file"]).read_text())
    for item in GITLAB_INDEX
    if (FIXTURES / "gitlab" / item["file"]).exists()
}

scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


def mutate(payload: Any, data: st.DataObject) -> Any:
    """The documented payload with some of its keys replaced by arbitrary values,
    removed, or given the wrong type, at any depth."""
    if isinstance(payload, dict):
        out = {}
        for key, value in payload.items():
            choice = data.draw(st.integers(0, 9))
            if choice == 0:
                continue  # removed
            out[key] = data.draw(values) if choice == 1 else mutate(value, data)
        return out
    if isinstance(payload, list):
        return [mutate(item, data) for item in payload[:3]]
    return data.draw(values) if data.draw(st.integers(0, 9)) == 0 else payload


def parses_or_refuses(parse: Any, event: str, body: bytes) -> None:
    try:
        result = parse(event, "d-1", body)
    except PayloadError as exc:
        assert str(exc)  # a message that says what is wrong
        return
    assert isinstance(result, ForgeEvent)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(GITHUB)), st.data())
def test_github_parser_on_mutated_documented_payloads(name: str, data: st.DataObject) -> None:
    event, payload = GITHUB[name]
    body = json.dumps(mutate(payload, data)).encode()
    parses_or_refuses(github.parse_event, event, body)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(GITLAB)), st.data())
def test_gitlab_parser_on_mutated_documented_payloads(event: str, data: st.DataObject) -> None:
    body = json.dumps(mutate(GITLAB[event], data)).encode()
    parses_or_refuses(gitlab.parse_event, event, body)


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(
        ["issues", "issue_comment", "pull_request", "ping", "check_run", "check_suite",
         "workflow_run", "status", "pull_request_review"]
    ),
    st.binary(max_size=300),
)  # fmt: skip
def test_github_parser_on_arbitrary_bytes(event: str, body: bytes) -> None:
    parses_or_refuses(github.parse_event, event, body)


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(["Note Hook", "Issue Hook", "Merge Request Hook", "Pipeline Hook", "Job Hook"]),
    st.binary(max_size=300),
)
def test_gitlab_parser_on_arbitrary_bytes(event: str, body: bytes) -> None:
    parses_or_refuses(gitlab.parse_event, event, body)


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(["issue_comment", "issues"]),
    st.binary(max_size=40).filter(lambda raw: b'"' not in raw and b"\\" not in raw),
    st.integers(0, 6000),
)
def test_github_parser_on_bytes_inside_strings_and_deep_nesting(
    event: str, raw: bytes, depth: int
) -> None:
    """Bytes that are not UTF-8 inside a JSON string, and objects nested deeper than the
    decoder's recursion limit."""
    parses_or_refuses(github.parse_event, event, b'{"action":"' + raw + b'"}')
    nested = b'{"action":"created","issue":' + b'{"a":' * depth + b"1" + b"}" * (depth + 1)
    parses_or_refuses(github.parse_event, event, nested)
