"""The ``bot`` command (placeholder until the CLI lands in this issue's next commit)."""

from __future__ import annotations


def main(argv: list[str] | None = None) -> int:
    raise SystemExit("bot: the command line is not built yet")
