"""The span as the bot's code sees it: ``Span`` records nothing (traces off, or not
sampled), ``LiveSpan`` wraps an OpenTelemetry span; ``NOOP`` and ``_NO_SPAN`` are the one
no-op span and context manager handed out while traces are off."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from enum import Enum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from opentelemetry.trace import Span as OtelSpan

Value = str | bool | int | float | Sequence[str] | Sequence[int] | Sequence[float]


class Kind(Enum):
    INTERNAL = "internal"
    SERVER = "server"
    CLIENT = "client"


class Span:
    """A span as the bot's code sees it. This one records nothing: traces are off, or
    the span was not sampled."""

    __slots__ = ()

    @property
    def recording(self) -> bool:
        return False

    @property
    def trace_id(self) -> str:
        return ""

    def set(self, key: str, value: Value | None) -> None:
        """Set one attribute (None: leave it out)."""

    def update(self, attributes: Mapping[str, Value | None]) -> None:
        """Set several attributes (None values are left out)."""

    def fail(self, error_type: str) -> None:
        """Mark the span failed with a short, low-cardinality ``error.type``."""

    def rename(self, name: str) -> None:
        """Name the span by what it turned out to be (a forge call's route)."""


class LiveSpan(Span):
    __slots__ = ("_span",)

    def __init__(self, span: OtelSpan) -> None:
        self._span = span

    @property
    def recording(self) -> bool:
        return self._span.is_recording()

    @property
    def trace_id(self) -> str:
        return f"{self._span.get_span_context().trace_id:032x}"

    def set(self, key: str, value: Value | None) -> None:
        if value is not None:
            self._span.set_attribute(key, plain_value(value))

    def update(self, attributes: Mapping[str, Value | None]) -> None:
        self._span.set_attributes(plain_attributes(attributes) or {})

    def fail(self, error_type: str) -> None:
        from opentelemetry.trace import Status, StatusCode

        self._span.set_attribute("error.type", error_type)
        self._span.set_status(Status(StatusCode.ERROR, error_type))

    def rename(self, name: str) -> None:
        self._span.update_name(name)


NOOP = Span()


class _NoSpan(AbstractContextManager[Span]):
    """The one context manager ``span`` hands out while traces are off."""

    def __enter__(self) -> Span:
        return NOOP

    def __exit__(self, *exc: object) -> None:
        return None


_NO_SPAN = _NoSpan()


def plain_attributes(attributes: Mapping[str, Value | None] | None) -> dict[str, Value] | None:
    """The attributes with a value, the bot's enums as their plain strings."""
    if not attributes:
        return None
    return {k: plain_value(v) for k, v in attributes.items() if v is not None}


def plain_value(value: Value) -> Value:
    return value.value if isinstance(value, Enum) else value
