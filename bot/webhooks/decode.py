"""Decode a webhook body straight into typed payload structs (msgspec). Pure.

msgspec reads the raw body once and builds only the fields the struct declares,
checking each type on the way; the rest of the (often 10-20 KB) payload is skipped
without being turned into Python objects. Its errors are rewritten into the bot's
own wording, which names the key path: ``payload.issue.number: missing``.
"""

from __future__ import annotations

import re
from typing import Any, TypeVar

import msgspec

from bot.webhooks.errors import PayloadError

T = TypeVar("T")

_MISSING = re.compile(r"Object missing required field `([^`]+)`(?: - at `\$([^`]*)`)?")
_EXPECTED = re.compile(r"Expected `([^`]+)`, got `([^`]+)`(?: - at `\$([^`]*)`)?")
_WANTED = {
    "int": "an integer",
    "str": "a string",
    "object": "an object",
    "array": "an array",
    "bool": "a boolean",
}


class Part(msgspec.Struct, gc=False):
    """The base of the payload structs. ``gc=False``: they hold no reference cycles, so
    the garbage collector need not track the thousands a busy installation decodes."""


def decoder(kind: type[T]) -> msgspec.json.Decoder[T]:
    """A reusable decoder for one payload struct (building one is the costly part)."""
    return msgspec.json.Decoder(kind)


def decode(dec: msgspec.json.Decoder[T], body: bytes) -> T:
    """The body as ``dec``'s struct; ``PayloadError`` naming the key when it is not."""
    try:
        return dec.decode(body)
    except msgspec.ValidationError as exc:
        raise PayloadError(explain(str(exc))) from None
    except msgspec.DecodeError as exc:
        raise PayloadError(f"the body is not JSON: {exc}") from None
    except UnicodeDecodeError as exc:
        where = f"{exc.reason} at byte {exc.start}"
        raise PayloadError(f"the body is not UTF-8 text: {where}") from None
    except RecursionError:
        raise PayloadError("the body is nested too deeply") from None


def convert(value: Any, kind: type[T], where: str) -> T:
    """An already decoded value as ``kind`` (for parts of payloads decoded loosely)."""
    try:
        return msgspec.convert(value, kind)
    except msgspec.ValidationError as exc:
        raise PayloadError(explain(str(exc), root=where)) from None
    except RecursionError:
        raise PayloadError(f"{where} is nested too deeply") from None


def explain(message: str, *, root: str = "payload") -> str:
    """msgspec's validation message in the bot's words: ``<key path>: <what is wrong>``."""
    missing = _MISSING.fullmatch(message)
    if missing:
        field, path = missing.groups()
        return f"{root}{path or ''}.{field}: missing"
    expected = _EXPECTED.fullmatch(message)
    if expected:
        wanted, got, path = expected.groups()
        where = f"{root}{path or ''}"
        if got == "null":
            return f"{where}: missing"
        wanted = wanted.removesuffix(" | null")
        return f"{where}: expected {_WANTED.get(wanted, wanted)}, got {got}"
    return f"{root}: {message}"
