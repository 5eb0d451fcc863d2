"""The LLM protocol: one chat completion that names the phase it expects.

Providers (``openai.py``, ``anthropic.py``, ``scripted.py``) turn an ``LLMRequest``
into a call to their endpoint and return the raw text with token usage. Parsing,
validation, repair and re-asking live in ``bot/llm/documents.py`` and are the same
for every provider.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

Role = Literal["system", "user", "assistant"]
OutputMode = Literal["json_schema", "json_object", "text"]
NativeTools = Literal["auto", "on", "off"]


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
class FunctionSpec:
    """A function the model may call natively (OpenAI ``tools``, Anthropic ``tool_use``).
    ``name`` matches ``^[a-zA-Z0-9_-]{1,64}$``, as both APIs require."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True, slots=True)
class FunctionCall:
    """The model's native call: ``arguments`` is JSON text as the endpoint gave it (OpenAI
    sends a string that may be broken; Anthropic's parsed ``input`` is dumped back)."""

    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class LLMRequest:
    phase: str
    messages: tuple[Message, ...]
    schema: dict[str, Any] | None = None
    max_tokens: int = 2048
    temperature: float = 0.2
    # Offered for native calling where the endpoint supports it; the provider may ignore
    # them and ask for the ``schema`` document instead (``LLMResponse.function_call`` None).
    functions: tuple[FunctionSpec, ...] = ()


@dataclass(frozen=True, slots=True)
class Usage:
    """``prompt_tokens`` counts the whole prompt, cached parts included; ``cached_tokens``
    of it were read from the provider's prompt cache, ``cache_write_tokens`` written to it
    (Anthropic's ``cache_creation_input_tokens``)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.cached_tokens + other.cached_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
        )


@dataclass(frozen=True, slots=True)
class LLMResponse:
    text: str
    usage: Usage = Usage()
    model: str = ""
    mode: OutputMode = "json_schema"
    function_call: FunctionCall | None = None  # a native call instead of the document
    # Why the model stopped, as the endpoint said it (OpenAI finish_reason, Anthropic
    # stop_reason); empty when it said nothing.
    finish_reasons: tuple[str, ...] = ()


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
