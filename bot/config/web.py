"""The ``web:`` section: the agent's optional ``web_search`` and ``fetch_url`` tools.

Both are off by default. The server turns them on and names the domains pages may be
fetched from; a repository's ``.agent.yaml`` may only narrow that (``bot/tools/web_policy.py``).
``normalize_domain`` is the one spelling of an allow-list entry, for the server's list
and a repository's alike. Pure: nothing here opens a connection.
"""

from __future__ import annotations

import re
from typing import Literal

import httpx
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

ANY_DOMAIN = "*"
_LABEL = re.compile(r"^(?!-)[a-z0-9-]{1,63}(?<!-)$")


def normalize_domain(entry: str) -> str:
    """``entry`` as an allow-list entry: ``*`` or a host name, lower case, IDNA-encoded
    (``Bücher.example`` is ``xn--bcher-kva.example``), without a trailing dot. Raises
    ``ValueError`` naming what is wrong: a scheme, a path, a port or an empty label."""
    text = entry.strip().lower().rstrip(".")
    if text == ANY_DOMAIN:
        return text
    if not text or any(c in text for c in "/:@?#[] *"):
        raise ValueError(f"{entry!r} is not a host name (give docs.python.org, not a URL)")
    try:  # httpx's IDNA encoding: the one a URL's host gets when it is matched
        ascii_name = httpx.URL(f"http://{text}/").raw_host.decode("ascii")
    except (httpx.InvalidURL, UnicodeError):
        raise ValueError(f"{entry!r} is not a valid host name") from None
    if len(ascii_name) > 253 or not all(_LABEL.match(p) for p in ascii_name.split(".")):
        raise ValueError(f"{entry!r} is not a valid host name")
    return ascii_name


class _Section(BaseModel):
    # Errors never carry the input: by validation, secrets are merged into it.
    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)


class WebFetchSettings(_Section):
    """``fetch_url``: one page of an allowed domain, as text."""

    enabled: bool = False
    # Host names; an entry allows the host and its subdomains; "*" allows every host. Pages
    # on loopback, private, link-local and other non-public addresses are refused whatever
    # this says (docs/tools.md, "The web").
    allowed_domains: tuple[str, ...] = ()
    max_bytes: int = Field(1_048_576, ge=1024, le=16 * 1_048_576)  # body bytes read, at most
    max_chars: int = Field(20_000, ge=1000, le=200_000)  # characters of text returned
    timeout: float = Field(20.0, gt=0, le=300)  # seconds for the whole fetch, redirects too
    max_redirects: int = Field(5, ge=0, le=20)

    @field_validator("allowed_domains")
    @classmethod
    def _domains(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(dict.fromkeys(normalize_domain(entry) for entry in value))

    @model_validator(mode="after")
    def _some_domain(self) -> WebFetchSettings:
        if self.enabled and not self.allowed_domains:
            raise ValueError(
                'web.fetch.allowed_domains must name at least one domain (or "*") when '
                "web.fetch.enabled is true"
            )
        return self


class WebSearchSettings(_Section):
    """``web_search``: a query to the operator's search service."""

    enabled: bool = False
    provider: Literal["searxng"] = "searxng"
    # The service's base URL, e.g. http://127.0.0.1:8888 (SearXNG: GET <url>/search?q=...
    # &format=json). The operator's own service: it may be on a private address.
    url: str = ""
    max_results: int = Field(5, ge=1, le=20)
    timeout: float = Field(10.0, gt=0, le=120)

    @model_validator(mode="after")
    def _url_when_enabled(self) -> WebSearchSettings:
        if self.enabled and not self.url.startswith(("http://", "https://")):
            raise ValueError("web.search.url must be an http(s) URL when web.search.enabled")
        return self


class WebSettings(_Section):
    fetch: WebFetchSettings = WebFetchSettings()
    search: WebSearchSettings = WebSearchSettings()
    user_agent: str = Field("coding-agent-bot (web tools)", min_length=1, max_length=200)
