"""Health reports for LLM endpoints, with concrete steps to fix what is wrong.

Everything here is pure: providers list the endpoint's models (see
``transport.fetch_model_ids``), make one small structured request in the dialect
they use (``StructuredCheck``) and hand the outcome to ``health_report``.
``setup_steps`` decides what a person should do next, e.g. install and start
Ollama (or the server the address points at: vLLM, llama.cpp, LM Studio, LiteLLM),
pull the model, set ``LLM_API_KEY``, pick one of the served models or pin
``llm.structured_output``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from bot.llm import server_kind
from bot.llm.base import HealthReport
from bot.llm.server_kind import ServerKind

OLLAMA_PORT = 11434
_LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1", "host.docker.internal"})
_MAX_LISTED = 10


@dataclass(frozen=True, slots=True)
class StructuredCheck:
    """One small structured request in the dialect the bot uses: did it answer?"""

    ok: bool
    dialect: str
    latency_ms: float
    error: str | None = None


def _host_port(base_url: str) -> tuple[str, int | None]:
    try:
        parts = urlsplit(base_url)
        return (parts.hostname or "").lower(), parts.port
    except ValueError:  # malformed URL or port: neither local nor Ollama
        return "", None


def is_local(base_url: str) -> bool:
    """True for endpoints on this machine (or Ollama's port): self-hosted servers."""
    host, port = _host_port(base_url)
    return host in _LOCAL_HOSTS or host.startswith("127.") or port == OLLAMA_PORT


def is_ollama(base_url: str) -> bool:
    host, port = _host_port(base_url)
    return port == OLLAMA_PORT or "ollama" in host


def model_available(model: str, models: Sequence[str]) -> bool:
    """``model`` is served: exactly, as Ollama's ``:latest`` tag, or as a dated snapshot."""
    snapshot = re.compile(re.escape(model) + r"-\d{8}")
    return any(
        served == model or served == f"{model}:latest" or snapshot.fullmatch(served)
        for served in models
    )


def _one_of(models: Sequence[str]) -> str:
    listed = ", ".join(models[:_MAX_LISTED])
    more = len(models) - _MAX_LISTED
    return f"{listed} (and {more} more)" if more > 0 else listed


def _ollama_steps(model: str) -> tuple[str, ...]:
    return (
        "Install Ollama: https://ollama.com/download",
        "Start it: ollama serve",
        f"Pull the model: ollama pull {model}",
    )


def _server_steps(kind: ServerKind, base_url: str, model: str) -> tuple[str, ...] | None:
    """How to start the server the address points at (its name or default port)."""
    if kind is ServerKind.VLLM:
        return (f"Start vLLM: vllm serve {model} (it listens on port 8000, under /v1)",)
    if kind is ServerKind.LLAMACPP:
        return ("Start the llama.cpp server: llama-server -m <model.gguf> --port 8080",)
    if kind is ServerKind.LM_STUDIO:
        return ("Start LM Studio's local server: lms server start (port 1234, under /v1)",)
    if kind is ServerKind.LITELLM:
        return ("Start the LiteLLM proxy: litellm --config <config.yaml> (port 4000)",)
    return None


def _unreachable_steps(provider: str, base_url: str, model: str) -> tuple[str, ...]:
    kind = server_kind.from_address(base_url)
    own = (
        _server_steps(kind, base_url, model)
        if provider == "openai" and is_local(base_url)
        else None
    )
    if own is not None:
        return (*own, f"Check LLM_BASE_URL (currently {base_url})")
    if provider == "openai" and is_ollama(base_url):
        return (*_ollama_steps(model), f"Check LLM_BASE_URL (currently {base_url})")
    if provider == "openai" and is_local(base_url):
        return (
            f"Start the OpenAI-compatible server that should listen on {base_url} "
            f"(e.g. vllm serve {model}, llama-server, LM Studio's local server)",
            *_ollama_steps(model),
            f"Then set LLM_BASE_URL (currently {base_url}) to http://127.0.0.1:11434/v1",
        )
    host = _host_port(base_url)[0] or base_url
    return (
        f"Check that {host} is reachable from this machine (DNS, proxy, firewall)",
        f"Check LLM_BASE_URL (currently {base_url})",
    )


def _refused_steps(provider: str, base_url: str, status: int) -> tuple[str, ...]:
    if status in (401, 403):
        variable = "ANTHROPIC_API_KEY" if provider == "anthropic" else "OPENAI_API_KEY"
        kind = server_kind.from_url(base_url)
        if kind is ServerKind.OPENROUTER:
            return ("Set LLM_API_KEY to an OpenRouter API key (https://openrouter.ai/keys)",)
        if kind is ServerKind.UNKNOWN and server_kind.from_address(base_url) is ServerKind.LITELLM:
            return (f"Set LLM_API_KEY to a LiteLLM proxy key for {base_url}",)
        return (f"Set LLM_API_KEY (or {variable}) to a valid API key for {base_url}",)
    if status == 404:
        if provider == "anthropic":
            return ("Set LLM_BASE_URL to https://api.anthropic.com",)
        hint = base_url.rstrip("/") + "/v1"
        return (
            f"Check LLM_BASE_URL: {base_url} has no model list; "
            f"OpenAI-compatible servers serve under /v1 (try {hint})",
        )
    return (f"The endpoint answered HTTP {status}: check LLM_BASE_URL and the server's logs",)


def _missing_model_steps(base_url: str, model: str, models: Sequence[str]) -> tuple[str, ...]:
    pick = f"set LLM_MODEL to one of: {_one_of(models)}" if models else None
    first = None
    if is_ollama(base_url):
        first = f"Pull the model: ollama pull {model}"
    elif is_local(base_url):
        first = f"Serve the model {model} on the server at {base_url}"
    if first is not None:
        return (first, f"Or {pick}") if pick else (first,)
    if pick is not None:
        return (pick[0].upper() + pick[1:],)
    return (f"The endpoint lists no models: check that {model} exists for this account",)


def unreachable_steps(provider: str, base_url: str, model: str) -> tuple[str, ...]:
    """What to do when ``base_url`` cannot be reached (nothing for the scripted model)."""
    return () if provider == "scripted" else _unreachable_steps(provider, base_url, model)


def setup_steps(
    provider: str,
    base_url: str,
    model: str,
    *,
    reachable: bool,
    models: Sequence[str],
    status: int | None,
) -> tuple[str, ...]:
    """What a person should do so the bot can use ``model`` at ``base_url``; () when fine."""
    if provider == "scripted":
        return ()
    if not reachable or status is None:
        return _unreachable_steps(provider, base_url, model)
    if status >= 400:
        return _refused_steps(provider, base_url, status)
    if not model_available(model, models):
        return _missing_model_steps(base_url, model, models)
    return ()


def _refusing_steps(server: str, base_url: str, check: StructuredCheck) -> tuple[str, ...]:
    who = server or "the server"
    return (
        f"{who} at {base_url} lists the model but did not answer a structured request "
        f"in the {check.dialect} dialect: check the server's logs",
        "If it refuses JSON schemas, pin llm.structured_output to json_object or none",
    )


def health_report(
    provider: str,
    base_url: str,
    model: str,
    *,
    status: int | None,
    models: Sequence[str],
    error: str | None,
    check: StructuredCheck | None = None,
    server: str = "",
    probed: tuple[str, ...] = (),
) -> HealthReport:
    """Build the report from a model listing and the structured request, if one was
    made; ``status`` None means unreachable."""
    reachable = status is not None
    listed = status is not None and status < 400 and error is None
    available = model_available(model, models) if listed else None
    if available is False:
        error = f"model {model!r} is not served by {base_url}"
    if status is not None and status < 400 and not listed:
        steps: tuple[str, ...] = (
            f"Check LLM_BASE_URL: {base_url} answered, but not with a model list",
        )
    else:
        steps = setup_steps(
            provider, base_url, model, reachable=reachable, models=models, status=status
        )
    if check is not None and not check.ok:
        error = check.error
        steps = _refusing_steps(server, base_url, check)
    return HealthReport(
        reachable=reachable,
        provider=provider,
        base_url=base_url,
        model=model,
        models=tuple(models),
        model_available=available,
        error=error,
        setup_steps=steps,
        server=server,
        dialect=check.dialect if check is not None else None,
        answered=check.ok if check is not None else None,
        latency_ms=round(check.latency_ms, 1) if check is not None else None,
        probed=probed,
    )
