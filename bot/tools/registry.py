"""The tool registry: what the agent can call, with one-line purposes and schemas.

A ``Tool`` is a name, a purpose (shown to the planner), a JSON schema for its
arguments (shown when it is called), a write flag, and an async handler. Handlers
never raise for expected failures: they return ``ToolResult.fail`` with a reason
the agent can reflect on. ``ToolRegistry.call`` validates arguments, applies the
policy, enforces the timeout, and turns unexpected exceptions into failed results.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import jsonschema

from bot import offload, tracing
from bot.progress import step
from bot.tools.policy import PolicyDecision, ToolPolicy


@dataclass(frozen=True, slots=True)
class ToolResult:
    ok: bool
    output: str
    data: dict[str, Any] = field(default_factory=dict)
    changed: bool = False
    duration: float = 0.0

    @classmethod
    def success(cls, output: str, *, changed: bool = False, **data: Any) -> ToolResult:
        return cls(ok=True, output=output, data=data, changed=changed)

    @classmethod
    def fail(cls, reason: str, **data: Any) -> ToolResult:
        return cls(ok=False, output=reason, data=data)


Handler = Callable[[dict[str, Any]], Awaitable[ToolResult]]
PathsOf = Callable[[dict[str, Any]], list[str]]


def arg_paths(*names: str) -> PathsOf:
    """The repository paths a call writes: the string arguments ``names``."""

    def paths(args: dict[str, Any]) -> list[str]:
        return [v for n in names if isinstance(v := args.get(n), str)]

    return paths


@dataclass(frozen=True, slots=True)
class Tool:
    name: str
    purpose: str
    schema: dict[str, Any]
    handler: Handler = field(repr=False)
    writes: bool = False
    paths: PathsOf | None = field(default=None, repr=False)  # what a call writes (a write)
    # The least time a call gets, whatever the caller's timeout: a sandboxed command has its
    # own bound (sandbox.timeout), and cutting it sooner would lose its output.
    min_timeout: float = 0.0

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "purpose": self.purpose, "parameters": self.schema}


def _validator(schema: dict[str, Any]) -> Any:
    """A compiled validator for a tool's schema (checked once), or the schema's error."""
    cls = jsonschema.validators.validator_for(schema)
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError as exc:
        return exc.message
    return cls(schema)


class ApprovalRequired(Exception):
    """The policy wants a human to approve this call before it runs."""

    def __init__(self, tool: str, arguments: dict[str, Any], why: str = "") -> None:
        super().__init__(f"{tool} needs approval")
        self.tool = tool
        self.arguments = arguments
        self.why = why  # e.g. the CI definitions it writes


class ToolRegistry:
    def __init__(
        self,
        tools: Iterable[Tool] = (),
        *,
        policy: ToolPolicy | None = None,
        secrets: tuple[str, ...] = (),
    ) -> None:
        self._secrets = secrets
        self._tools: dict[str, Tool] = {}
        self._validators: dict[str, Any] = {}
        self.policy = policy or ToolPolicy()
        for tool in tools:
            self.add(tool)

    def add(self, tool: Tool) -> None:
        if tool.name in self._tools:
            raise ValueError(f"tool {tool.name} is registered twice")
        self._tools[tool.name] = tool
        self._validators[tool.name] = _validator(tool.schema)

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return sorted(self._tools)

    def usable(self) -> list[Tool]:
        """Tools the policy allows, for the planner."""
        return [t for n, t in sorted(self._tools.items()) if self.policy.decide(n).allowed]

    def check(self, name: str) -> PolicyDecision:
        if name not in self._tools:
            return PolicyDecision(False, False, f"unknown tool {name!r}")
        return self.policy.decide(name)

    def guarded_paths(self, name: str, arguments: dict[str, Any]) -> list[str]:
        """The paths a call to ``name`` would write that need approval."""
        tool = self._tools.get(name)
        if tool is None or tool.paths is None:
            return []
        try:
            paths = tool.paths(arguments)
        except (KeyError, TypeError, AttributeError):  # malformed: validation says why
            return []
        return self.policy.guarded_paths(paths)

    async def call(
        self,
        name: str,
        arguments: dict[str, Any],
        *,
        timeout: float,
        approved: bool = False,
    ) -> ToolResult:
        """Run a tool; every failure comes back as a failed ``ToolResult`` (a call the
        policy wants approved raises ``ApprovalRequired``). In a span (bot.tracing)."""
        with tracing.tool_span(name, arguments, self._secrets) as span:
            try:
                result = await self._call(name, arguments, timeout=timeout, approved=approved)
            except ApprovalRequired:
                tracing.tool_answered(span, "approval_required", "", ok=True)
                raise
            tracing.tool_answered(span, _outcome(result), result.output, ok=result.ok)
            return result

    async def _call(
        self, name: str, arguments: dict[str, Any], *, timeout: float, approved: bool
    ) -> ToolResult:
        started = time.monotonic()
        decision = self.check(name)
        if not decision.allowed:
            return ToolResult.fail(f"refused: {decision.reason}")
        tool = self._tools[name]
        if not approved:
            guarded = self.guarded_paths(name, arguments)
            if guarded:
                why = "it writes " + ", ".join(guarded) + " (CI definitions need approval)"
                raise ApprovalRequired(name, arguments, why)
            if decision.needs_approval:
                raise ApprovalRequired(name, arguments)
        validator = self._validators[name]
        if isinstance(validator, str):
            return ToolResult.fail(f"{name} has an invalid argument schema: {validator}")
        error = jsonschema.exceptions.best_match(validator.iter_errors(arguments))
        if error is not None:
            return ToolResult.fail(f"invalid arguments for {name}: {error.message}")
        limit = max(timeout, tool.min_timeout)
        try:
            with step(f"tool {name}"):
                result = await asyncio.wait_for(tool.handler(arguments), timeout=limit)
        except TimeoutError:
            result = ToolResult.fail(f"{name} timed out after {limit:g} s")
        except Exception as exc:  # a tool bug must not crash the task
            result = ToolResult.fail(f"{name} failed: {type(exc).__name__}: {exc}")
        return ToolResult(
            ok=result.ok,
            # What a tool returns reaches prompts, history, checkpoints and comments;
            # a large output is redacted off the event loop.
            output=await offload.redact_text(result.output, known=self._secrets),
            data=result.data,
            changed=result.changed,
            duration=time.monotonic() - started,
        )


def _outcome(result: ToolResult) -> str:
    """The call's outcome in one word, for its span."""
    if result.ok:
        return "ok"
    if result.output.startswith("refused:"):
        return "refused"
    return "timed_out" if " timed out after " in result.output else "failed"
