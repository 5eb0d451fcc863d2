"""The settings page's reading of ``config.yaml`` (pure): each key's description from the
comments beside it, and a changed value written in its own line with the comment kept."""

from __future__ import annotations

from pathlib import Path

from bot.dashboard.settings_view import descriptions, host_only, sections, with_values

TEXT = """\
# the file's own header
server:
  port: 8080                 # bot serve --port
worker:
  lease_seconds: 60          # a task whose worker stops renewing
                             # for this long is re-queued
  max_workers: 2
labels:
  done: coding agent done
mcp_servers: []
planning:
  security:
    allowed:
      - read_file
"""


def test_descriptions_come_from_the_comments_beside_each_key() -> None:
    found = descriptions(TEXT)
    assert found["server.port"] == "bot serve --port"
    assert found["worker.lease_seconds"] == (
        "a task whose worker stops renewing for this long is re-queued"
    )
    assert "worker.max_workers" not in found and "server" not in found
    shipped = descriptions((Path(__file__).resolve().parent.parent / "config.yaml").read_text())
    assert "re-queued" in shipped["worker.lease_seconds"]


def test_a_changed_value_is_written_in_its_line_and_the_rest_kept() -> None:
    text, problems = with_values(TEXT, {"worker.lease_seconds": "90", "labels.done": "finished"})
    assert problems == []
    assert text == TEXT.replace(
        "  lease_seconds: 60          #", "  lease_seconds: 90          #"
    ).replace("done: coding agent done", "done: finished")


def test_what_cannot_be_changed_in_one_line_is_refused_by_key() -> None:
    text, problems = with_values(
        TEXT,
        {
            "worker.max_workers": "3 # three",
            "planning.security.allowed": "[x]",
            "labels.failed": "broke",
            "labels.done": "a\nb: c",
        },
    )
    assert text == TEXT
    assert [key for key, _ in problems] == [
        "worker.max_workers", "planning.security.allowed", "labels.failed", "labels.done",
    ]  # fmt: skip


def test_sections_mark_the_keys_only_the_host_file_may_change() -> None:
    grouped = dict(sections({"server": {"port": 8080}, "llm": {"base_url": "x", "model": "m"}},
                            {"llm.model": "the model"}))  # fmt: skip
    assert [(r.key, r.value, r.host_only) for r in grouped["llm"]] == [
        ("llm.base_url", "x", True), ("llm.model", "m", False),
    ]  # fmt: skip
    assert grouped["llm"][1].description == "the model"
    assert host_only("server.port") and host_only("mcp_servers") and not host_only("labels.done")
