"""Per-repository and per-person ``planning:`` overrides, merged under the server's bounds.

A repository's ``.agent.yaml`` and a person's settings from ``user_config_api`` may change
some ``planning`` keys of a task, never past what the server allows. One table (``RULES``)
says how far each key may move; ``merge_planning`` applies the layers in order (server,
then repository, then person), each bounded by the value in force before it, so a
repository's tightening holds for every person. Everything else (``security``,
``user_config_api``, unknown keys, invalid values) is refused and named.

Pure: no I/O. The worker and the API call it with what they read.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from pydantic import ValidationError

from bot.config.planning import PlanningSettings
from bot.config.sections import Settings


class Layer(StrEnum):
    """Where a value comes from, in the order they apply."""

    SERVER = "server"
    REPOSITORY = "repository"
    USER = "user"


class Bound(StrEnum):
    """How far a layer may move a key from the value in force."""

    FREE = "free"  # any valid value
    AT_MOST = "at_most"  # a number not above the value in force (None: no limit)
    ONLY_TRUE = "only_true"  # may switch on, never off
    ONLY_FALSE = "only_false"  # may switch off, never on


# Keys below ``planning``. Not listed: server only (``security``, ``user_config_api``).
RULES: Mapping[str, Bound] = {
    "enabled": Bound.ONLY_FALSE,
    "strategy": Bound.FREE,
    "decomposition_level": Bound.FREE,
    "auto_adjust_level": Bound.FREE,
    "max_subtasks": Bound.AT_MOST,
    "complexity_threshold.simple": Bound.FREE,
    "complexity_threshold.moderate": Bound.FREE,
    "complexity_threshold.complex": Bound.FREE,
    "reflection.enabled": Bound.FREE,
    "reflection.trigger_on_error": Bound.FREE,
    "reflection.trigger_interval": Bound.FREE,
    "reflection.depth": Bound.FREE,
    "reflection.unjudged": Bound.FREE,
    "revision.max_revisions": Bound.AT_MOST,
    "revision.require_human_approval": Bound.ONLY_TRUE,
    "revision.approval_timeout": Bound.AT_MOST,
    "cache.enabled": Bound.FREE,
    "cache.ttl": Bound.AT_MOST,
    "execution.action_timeout": Bound.AT_MOST,
    "execution.total_timeout": Bound.AT_MOST,
    "execution.max_parallel": Bound.AT_MOST,
    "execution.early_termination.enabled": Bound.ONLY_TRUE,
    "execution.early_termination.max_consecutive_failures": Bound.AT_MOST,
    "budget.max_cost": Bound.AT_MOST,  # None: no limit
}
SERVER_ONLY = ("security", "user_config_api")
_SECTIONS = frozenset(
    ".".join(key.split(".")[:depth]) for key in RULES for depth in range(1, key.count(".") + 1)
)


class Refused(StrEnum):
    """Why a value was not applied."""

    ABOVE_LIMIT = "above_limit"
    ONLY_TOWARDS_TRUE = "only_towards_true"
    ONLY_TOWARDS_FALSE = "only_towards_false"
    SERVER_ONLY = "server_only"
    UNKNOWN_KEY = "unknown_key"
    INVALID = "invalid"


@dataclass(frozen=True, slots=True)
class Applied:
    layer: Layer
    key: str  # "planning.revision.max_revisions"
    value: Any
    previous: Any


def _shown(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass(frozen=True, slots=True)
class Refusal:
    layer: Layer
    key: str
    value: Any
    reason: Refused
    limit: Any = None  # the value in force that bounded it (ABOVE_LIMIT, ONLY_TOWARDS_*)
    limit_from: Layer | None = None
    detail: str = ""  # the validation message (INVALID)

    def as_data(self) -> dict[str, Any]:
        return {
            "layer": self.layer.value,
            "key": self.key,
            "value": self.value,
            "reason": self.reason.value,
            "limit": self.limit,
            "limit_from": self.limit_from.value if self.limit_from else None,
            "detail": self.detail,
        }

    def describe(self) -> str:
        """One English line naming the key (logs, the run report, the API)."""
        asked = f"{self.key}: {_shown(self.value)} from the {self.layer.value} settings"
        where = self.limit_from.value if self.limit_from else "server"
        reasons = {
            Refused.ABOVE_LIMIT: f"may be at most {self.limit!r} (the {where}'s value)",
            Refused.ONLY_TOWARDS_TRUE: f"may only be switched on ({where} sets {self.limit!r})",
            Refused.ONLY_TOWARDS_FALSE: f"may only be switched off ({where} sets {self.limit!r})",
            Refused.SERVER_ONLY: "is a server setting",
            Refused.UNKNOWN_KEY: "is not a planning key",
            Refused.INVALID: f"is invalid: {self.detail}",
        }
        return f"{asked} {reasons[self.reason]}: refused"


@dataclass(frozen=True, slots=True)
class OverrideLayer:
    """One source's ``planning`` mapping, as written (nested keys)."""

    layer: Layer
    values: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class EffectivePlanning:
    planning: PlanningSettings
    applied: tuple[Applied, ...] = ()
    refused: tuple[Refusal, ...] = ()
    origin: Mapping[str, Layer] = field(default_factory=dict)

    def values(self) -> dict[str, Any]:
        """Every key a repository or person may set, with its effective value."""
        data = self.planning.model_dump(mode="json")
        return {f"planning.{key}": _get(data, key) for key in RULES}

    def as_data(self) -> dict[str, Any]:
        """The values, what was applied from where and what was refused (JSON-able)."""
        return {
            "values": self.values(),
            "applied": [
                {"key": a.key, "value": a.value, "previous": a.previous, "source": a.layer.value}
                for a in self.applied
            ],
            "refused": [{**r.as_data(), "message": r.describe()} for r in self.refused],
        }

    def report_lines(self) -> list[str]:
        """Markdown lines for the run report: each value and where it came from, then
        what was refused."""
        lines = [
            f"- `{key}` = `{json.dumps(value)}` ({self._origin_of(key).value})"
            for key, value in self.values().items()
        ]
        lines += [f"- refused: {refusal.describe()}" for refusal in self.refused]
        return lines

    def _origin_of(self, key: str) -> Layer:
        return self.origin.get(key.removeprefix("planning."), Layer.SERVER)

    def apply_to(self, settings: Settings) -> Settings:
        """``settings`` with this planning section."""
        return settings.model_copy(update={"planning": self.planning})


def _leaves(values: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(dotted key, value) of every leaf; a mapping under a known section is descended."""
    for name, value in values.items():
        key = f"{prefix}{name}"
        if isinstance(value, Mapping) and key in _SECTIONS:
            yield from _leaves(value, f"{key}.")
        else:
            yield key, value


def _get(data: Mapping[str, Any], key: str) -> Any:
    for part in key.split("."):
        data = data[part]
    return data


def _with(data: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    """A copy of ``data`` with ``key`` set (only the path to it copied)."""
    head, _, rest = key.partition(".")
    copy = dict(data)
    copy[head] = _with(dict(data[head]), rest, value) if rest else value
    return copy


def _classify(key: str) -> Refused | None:
    if key in RULES:
        return None
    if key.split(".")[0] in SERVER_ONLY:
        return Refused.SERVER_ONLY
    return Refused.UNKNOWN_KEY


def _out_of_bounds(bound: Bound, value: Any, current: Any) -> Refused | None:
    if bound is Bound.AT_MOST and current is not None and (value is None or value > current):
        return Refused.ABOVE_LIMIT  # None is no limit: above any number
    if bound is Bound.ONLY_TRUE and current and not value:
        return Refused.ONLY_TOWARDS_TRUE
    if bound is Bound.ONLY_FALSE and not current and value:
        return Refused.ONLY_TOWARDS_FALSE
    return None


def merge_planning(server: PlanningSettings, layers: Sequence[OverrideLayer]) -> EffectivePlanning:
    """The server's ``planning`` with each layer's values that keep within the bounds."""
    data: dict[str, Any] = server.model_dump()
    origin: dict[str, Layer] = {}
    applied: list[Applied] = []
    refused: list[Refusal] = []
    for layer in layers:
        for key, value in _leaves(layer.values):
            name = f"planning.{key}"
            if key in _SECTIONS:
                detail = "a mapping of keys is expected"
                refused.append(Refusal(layer.layer, name, value, Refused.INVALID, detail=detail))
                continue
            problem = _classify(key)
            if problem is not None:
                refused.append(Refusal(layer.layer, name, value, problem))
                continue
            current = _get(data, key)
            try:
                candidate = PlanningSettings.model_validate(_with(data, key, value))
            except ValidationError as exc:
                detail = "; ".join(err["msg"] for err in exc.errors())
                refused.append(Refusal(layer.layer, name, value, Refused.INVALID, detail=detail))
                continue
            checked = _get(candidate.model_dump(), key)
            problem = _out_of_bounds(RULES[key], checked, current)
            if problem is not None:
                limit_from = origin.get(key, Layer.SERVER)
                refused.append(Refusal(layer.layer, name, value, problem, current, limit_from))
                continue
            if checked != current:
                applied.append(Applied(layer.layer, name, checked, current))
                origin[key] = layer.layer
            data = candidate.model_dump()
    return EffectivePlanning(
        planning=PlanningSettings.model_validate(data),
        applied=tuple(applied),
        refused=tuple(refused),
        origin=origin,
    )
