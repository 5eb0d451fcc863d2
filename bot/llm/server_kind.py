"""Which model server is behind ``llm.base_url``, from documented signals. Pure.

The signals, strongest first: the host of a hosted API (api.openai.com,
openrouter.ai, api.anthropic.com); a header only one server sends (LiteLLM's
``x-litellm-*``, a ``server`` header naming llama.cpp, Ollama or LM Studio); the
``owned_by`` of the model list (vLLM says ``vllm``, llama.cpp ``llamacpp``, LM
Studio ``organization_owner``, Ollama ``library`` or ``ollama``); Ollama's own
``/api/version`` answering; the server's default port (Ollama 11434, LM Studio 1234,
LiteLLM 4000, vLLM 8000, llama.cpp 8080) or its name in the host.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import StrEnum
from urllib.parse import urlsplit


class ServerKind(StrEnum):
    OLLAMA = "ollama"
    VLLM = "vllm"
    LLAMACPP = "llama.cpp"
    LM_STUDIO = "lm-studio"
    LITELLM = "litellm"
    OPENROUTER = "openrouter"
    OPENAI = "openai"
    ANTHROPIC = "anthropic"
    UNKNOWN = "unknown"


LABELS = {
    ServerKind.OLLAMA: "Ollama",
    ServerKind.VLLM: "vLLM",
    ServerKind.LLAMACPP: "llama.cpp server",
    ServerKind.LM_STUDIO: "LM Studio",
    ServerKind.LITELLM: "LiteLLM",
    ServerKind.OPENROUTER: "OpenRouter",
    ServerKind.OPENAI: "OpenAI",
    ServerKind.ANTHROPIC: "Anthropic",
    ServerKind.UNKNOWN: "an OpenAI-compatible server",
}
_HOSTS = {
    "api.openai.com": ServerKind.OPENAI,
    "openrouter.ai": ServerKind.OPENROUTER,
    "api.anthropic.com": ServerKind.ANTHROPIC,
}
_OWNERS = {
    "vllm": ServerKind.VLLM,
    "llamacpp": ServerKind.LLAMACPP,
    "organization_owner": ServerKind.LM_STUDIO,
    "library": ServerKind.OLLAMA,
    "ollama": ServerKind.OLLAMA,
}
_SERVER_HEADER_WORDS = (
    ("llama.cpp", ServerKind.LLAMACPP),
    ("ollama", ServerKind.OLLAMA),
    ("lm studio", ServerKind.LM_STUDIO),
    ("lmstudio", ServerKind.LM_STUDIO),
)
_HOST_WORDS = (
    ("ollama", ServerKind.OLLAMA),
    ("vllm", ServerKind.VLLM),
    ("llama", ServerKind.LLAMACPP),
    ("lmstudio", ServerKind.LM_STUDIO),
    ("litellm", ServerKind.LITELLM),
)
_PORTS = {
    11434: ServerKind.OLLAMA,
    1234: ServerKind.LM_STUDIO,
    4000: ServerKind.LITELLM,
    8000: ServerKind.VLLM,
    8080: ServerKind.LLAMACPP,
}


def _host_port(base_url: str) -> tuple[str, int | None]:
    try:
        parts = urlsplit(base_url)
        return (parts.hostname or "").lower(), parts.port
    except ValueError:
        return "", None


def from_url(base_url: str) -> ServerKind:
    """What the address alone says: a hosted API's host (certain), else UNKNOWN."""
    host, _ = _host_port(base_url)
    for known, kind in _HOSTS.items():
        if host == known or host.endswith("." + known):
            return kind
    return ServerKind.UNKNOWN


def from_headers(headers: Mapping[str, str]) -> ServerKind:
    lowered = {name.lower(): value.lower() for name, value in headers.items()}
    if any(name.startswith("x-litellm") for name in lowered):
        return ServerKind.LITELLM
    server = lowered.get("server", "")
    for word, kind in _SERVER_HEADER_WORDS:
        if word in server:
            return kind
    return ServerKind.UNKNOWN


def from_owners(owners: Iterable[str]) -> ServerKind:
    for owner in owners:
        kind = _OWNERS.get(owner.strip().lower())
        if kind is not None:
            return kind
    return ServerKind.UNKNOWN


def from_address(base_url: str) -> ServerKind:
    """The weakest signal: the server's name in the host or its default port."""
    host, port = _host_port(base_url)
    for word, kind in _HOST_WORDS:
        if word in host:
            return kind
    return _PORTS.get(port or 0, ServerKind.UNKNOWN)


def recognise(
    base_url: str,
    *,
    headers: Mapping[str, str] | None = None,
    owners: Iterable[str] = (),
    ollama_version: bool = False,
) -> ServerKind:
    """The server kind from every signal at hand, strongest first."""
    for kind in (
        from_url(base_url),
        from_headers(headers or {}),
        from_owners(owners),
        ServerKind.OLLAMA if ollama_version else ServerKind.UNKNOWN,
        from_address(base_url),
    ):
        if kind is not ServerKind.UNKNOWN:
            return kind
    return ServerKind.UNKNOWN
