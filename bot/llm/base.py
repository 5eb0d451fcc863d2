"""The LLM protocol: one chat completion that names the phase it expects.

Providers (``openai.py``, ``anthropic.py``, ``scripted.py``) turn an ``LLMRequest``
into a call to their endpoint and return the raw text with token usage. Parsing,
validation, repair and re-asking live in ``bot/agent/schema.py`` and are the same
for every provider.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

Role = Literal["system", "user", "assistant"]
OutputMode = Literal["json_schema", "json_object", "text"]


class LLMError(Exception):
    """A call failed for good (after retries)."""


class LLMUnavailable(LLMError):
    """The endpoint cannot be reached or keeps failing: the task should pause, not fail."""


class LLMBadRequest(LLMError):
    """The endpoint refused the request itself (4xx other than 408/429)."""


@dataclass(frozen=True, slots=True)
class Message:
    role: Role
    content: str


@dataclass(frozen=True, slots=True)
class LLMRequest:
    phase: str
    messages: tuple[Message, ...]
    schema: dict[str, Any] | None = None
    max_tokens: int = 2048
    temperature: float = 0.2


@dataclass(frozen=True, slots=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass(frozen=True, slots=True)
class LLMResponse:
    text: str
    usage: Usage = Usage()
    model: str = ""
    mode: OutputMode = "json_schema"


@dataclass(frozen=True, slots=True)
class HealthReport:
    reachable: bool
    provider: str
    base_url: str
    model: str
    models: tuple[str, ...] = ()
    model_available: bool | None = None
    error: str | None = None
    setup_steps: tuple[str, ...] = field(default=())
    server: str = ""  # the kind of server recognised behind base_url, e.g. "Ollama"
    dialect: str | None = None  # the structured-output dialect the bot uses there
    answered: bool | None = None  # a small structured request answered (None: not tried)
    latency_ms: float | None = None  # how long that request took
    probed: tuple[str, ...] = ()  # what each dialect got when the endpoint was probed

    @property
    def ready(self) -> bool:
        """Whether a task's next model call can be expected to work."""
        return self.reachable and self.model_available is not False and self.answered is not False

    def to_dict(self) -> dict[str, Any]:
        return {
            "ready": self.ready,
            "server": self.server,
            "dialect": self.dialect,
            "answered": self.answered,
            "latency_ms": self.latency_ms,
            "probed": list(self.probed),
            "reachable": self.reachable,
            "provider": self.provider,
            "base_url": self.base_url,
            "model": self.model,
            "models": list(self.models),
            "model_available": self.model_available,
            "error": self.error,
            "setup_steps": list(self.setup_steps),
        }


class LLM(Protocol):
    name: str

    async def complete(self, request: LLMRequest) -> LLMResponse:
        """One completion. Retries transient failures itself; raises ``LLMUnavailable``
        when the endpoint stays unreachable and ``LLMError`` for other failures."""
        ...

    async def health(self) -> HealthReport: ...

    async def aclose(self) -> None: ...
