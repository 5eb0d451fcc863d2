"""What the web tools may do for one task: the server's ``web:`` narrowed by the repository.

The server turns ``web_search`` and ``fetch_url`` on and names the allowed domains and
the limits; a repository's ``.agent.yaml`` ``web:`` may turn either off, name fewer
domains (each kept only as far as the server allows it) and lower the limits, never the
reverse: what it asks beyond the server is left out with a note. Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, field_validator

from bot.config.web import ANY_DOMAIN, WebSettings, normalize_domain


def domain_allowed(host: str, allowed: tuple[str, ...]) -> bool:
    """Whether ``host`` (IDNA-encoded, as a URL's ``raw_host``) is an allowed domain or
    one of its subdomains; ``*`` allows every host."""
    name = host.lower().rstrip(".")
    return any(e == ANY_DOMAIN or name == e or name.endswith("." + e) for e in allowed)


def narrow_domains(server: tuple[str, ...], repo: tuple[str, ...]) -> tuple[str, ...]:
    """The domains both lists allow: ``docs.python.org`` under the server's
    ``python.org``; the server's ``docs.python.org`` under the repository's ``python.org``."""
    kept: list[str] = []
    for entry in repo:
        if domain_allowed(entry, server) and entry != ANY_DOMAIN:
            kept.append(entry)
            continue
        kept += [s for s in server if s != ANY_DOMAIN and domain_allowed(s, (entry,))]
        if entry == ANY_DOMAIN and ANY_DOMAIN in server:
            kept.append(ANY_DOMAIN)
    return tuple(dict.fromkeys(kept))


class RepoWeb(BaseModel):
    """A repository's ``web:`` in ``.agent.yaml``: it only narrows the server's."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    search: bool | None = None  # false: no web_search here (true cannot turn it on)
    fetch: bool | None = None  # false: no fetch_url here
    allowed_domains: tuple[str, ...] | None = None  # within the server's list
    max_bytes: int | None = Field(None, ge=1024)
    max_chars: int | None = Field(None, ge=1000)
    timeout: float | None = Field(None, gt=0)
    max_redirects: int | None = Field(None, ge=0)
    max_results: int | None = Field(None, ge=1)

    @field_validator("allowed_domains")
    @classmethod
    def _domains(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        return None if value is None else tuple(normalize_domain(e) for e in value)


@dataclass(frozen=True, slots=True)
class WebLimits:
    """The web tools of one task: which are on, and their bounds."""

    fetch: bool
    search: bool
    allowed_domains: tuple[str, ...]
    max_bytes: int
    max_chars: int
    timeout: float
    max_redirects: int
    search_url: str
    max_results: int
    search_timeout: float
    user_agent: str
    notes: tuple[str, ...] = ()


def _lower(name: str, server: float, repo: float | None, notes: list[str]) -> float:
    if repo is None:
        return server
    if repo > server:
        notes.append(f".agent.yaml web.{name} {repo:g} is above the server's {server:g}: ignored")
        return server
    return repo


def web_limits(web: WebSettings, repo: RepoWeb) -> WebLimits:
    """The server's web settings narrowed by ``repo`` (module docstring)."""
    notes: list[str] = []
    fetch, search = web.fetch, web.search
    for name, on, wanted in (
        ("fetch", fetch.enabled, repo.fetch),
        ("search", search.enabled, repo.search),
    ):
        if wanted and not on:
            notes.append(f".agent.yaml asks for web.{name}, but this server has it off: ignored")
    domains = fetch.allowed_domains
    if repo.allowed_domains is not None:
        domains = narrow_domains(fetch.allowed_domains, repo.allowed_domains)
        left_out = [e for e in repo.allowed_domains if not domain_allowed(e, fetch.allowed_domains)]
        if left_out:
            notes.append(
                ".agent.yaml web.allowed_domains names domains this server does not allow "
                f"({', '.join(left_out)}): only what the server allows is kept"
            )
    return WebLimits(
        fetch=fetch.enabled and repo.fetch is not False,
        search=search.enabled and repo.search is not False,
        allowed_domains=domains,
        max_bytes=int(_lower("max_bytes", fetch.max_bytes, repo.max_bytes, notes)),
        max_chars=int(_lower("max_chars", fetch.max_chars, repo.max_chars, notes)),
        timeout=_lower("timeout", fetch.timeout, repo.timeout, notes),
        max_redirects=int(_lower("max_redirects", fetch.max_redirects, repo.max_redirects, notes)),
        search_url=search.url,
        max_results=int(_lower("max_results", search.max_results, repo.max_results, notes)),
        search_timeout=search.timeout,
        user_agent=web.user_agent,
        notes=tuple(notes),
    )
