"""Structured-output dialects: the ways an endpoint can be asked for a JSON document.

Pure. A ``Dialect`` names one request shape (the OpenAI ``response_format`` with a
JSON schema, the server-specific schema forms of Ollama, vLLM and llama.cpp, JSON
mode, or the schema in the instructions only); ``ladder`` orders the ones worth
trying on a server, best first, and ``llm.structured_output`` can pin one rung.
What an endpoint accepted is kept per endpoint and model (``DialectStore``: the
bot's store, SQLite or PostgreSQL) so a restart does not probe again.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Literal, Protocol

from bot.llm.base import OutputMode
from bot.llm.server_kind import ServerKind

StructuredOutput = Literal["auto", "json_schema", "json_object", "none"]


class Dialect(StrEnum):
    """One way of asking for a JSON document (the value is what is stored and shown)."""

    JSON_SCHEMA = "json_schema"  # response_format {"type": "json_schema", ...} (OpenAI)
    OLLAMA_FORMAT = "ollama_format"  # Ollama's native /api/chat with "format": <schema>
    GUIDED_JSON = "guided_json"  # vLLM's "guided_json": <schema> beside the OpenAI fields
    LLAMACPP_SCHEMA = "llamacpp_json_schema"  # llama.cpp server's "json_schema": <schema>
    JSON_OBJECT = "json_object"  # response_format {"type": "json_object"} + schema in prompt
    INSTRUCTIONS = "instructions"  # the schema in the system prompt only


# The server's own schema form, tried after the OpenAI form where the server has one.
_OWN_FORM = {
    ServerKind.OLLAMA: Dialect.OLLAMA_FORMAT,
    ServerKind.VLLM: Dialect.GUIDED_JSON,
    ServerKind.LLAMACPP: Dialect.LLAMACPP_SCHEMA,
}
SCHEMA_DIALECTS = frozenset(
    {Dialect.JSON_SCHEMA, Dialect.OLLAMA_FORMAT, Dialect.GUIDED_JSON, Dialect.LLAMACPP_SCHEMA}
)


def output_mode(dialect: Dialect) -> OutputMode:
    """How strongly the dialect holds the model to the schema."""
    if dialect in SCHEMA_DIALECTS:
        return "json_schema"
    return "json_object" if dialect is Dialect.JSON_OBJECT else "text"


def ladder(kind: ServerKind, pinned: StructuredOutput = "auto") -> tuple[Dialect, ...]:
    """The dialects to try on a ``kind`` server, best first; a pinned mode keeps only its
    own rung (the OpenAI schema form and the server's own one for ``json_schema``)."""
    schema = (Dialect.JSON_SCHEMA,) + ((_OWN_FORM[kind],) if kind in _OWN_FORM else ())
    if pinned == "json_schema":
        return schema
    if pinned == "json_object":
        return (Dialect.JSON_OBJECT,)
    if pinned == "none":
        return (Dialect.INSTRUCTIONS,)
    return (*schema, Dialect.JSON_OBJECT, Dialect.INSTRUCTIONS)


def next_dialect(rungs: tuple[Dialect, ...], used: Dialect, current: Dialect) -> Dialect | None:
    """The rung below ``used`` (never above ``current``, which another call may already
    have lowered), or None when ``used`` was the last."""
    position = max(
        rungs.index(used) if used in rungs else -1,
        rungs.index(current) - 1 if current in rungs else -1,
    )
    return rungs[position + 1] if position + 1 < len(rungs) else None


@dataclass(frozen=True, slots=True)
class KnownDialect:
    """What was found for one endpoint and model, and when (epoch seconds)."""

    dialect: Dialect
    server: ServerKind
    found_at: float


class DialectStore(Protocol):
    """Where found dialects are kept (the bot's ``Store`` has these two methods)."""

    async def get_llm_dialect(self, endpoint: str, model: str) -> tuple[str, str, float] | None:
        """(dialect, server kind, found at) for ``endpoint`` and ``model``, if known."""
        ...

    async def put_llm_dialect(
        self, endpoint: str, model: str, *, dialect: str, server: str
    ) -> None: ...


def known_from_row(row: tuple[str, str, float] | None) -> KnownDialect | None:
    """A stored row as a ``KnownDialect``; None for no row or values this version does
    not know (then the endpoint is probed again)."""
    if row is None:
        return None
    try:
        return KnownDialect(Dialect(row[0]), ServerKind(row[1]), float(row[2]))
    except ValueError:
        return None
