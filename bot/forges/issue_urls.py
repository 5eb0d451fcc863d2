"""An issue's web address -> the ``IssueRef`` the forge adapters look up. Pure.

GitHub (``https://github.com/OWNER/REPO/issues/N`` or ``/pull/N``) on the web host of
the configured ``github.api_url`` (``api.github.com`` -> ``github.com``; a GitHub
Enterprise Server's ``https://HOST/api/v3`` -> ``HOST``), and GitLab
(``GROUP/SUB/PROJECT/-/issues/N``, ``/-/work_items/N`` or ``/-/merge_requests/N``,
nested groups included) under the configured ``gitlab.url`` (with its path, for an
instance served under one). An address on any other host is refused: the forge
client would look the same path up on the wrong server.
"""

from __future__ import annotations

import re
from urllib.parse import unquote, urlsplit

from bot.config import Settings
from bot.events import ForgeKind, IssueRef, RepoRef

_GITHUB_PATH = re.compile(r"(?P<repo>[\w.-]+/[\w.-]+)/(?P<kind>issues|pull)/(?P<n>[0-9]{1,10})/?")
_GITLAB_PATH = re.compile(
    r"(?P<repo>[\w.-]+(?:/[\w.-]+)+)/-/(?P<kind>issues|work_items|merge_requests)/(?P<n>[0-9]{1,10})/?"
)
MAX_URL_CHARS = 2000


class NotAnIssueUrl(ValueError):
    """The address is not one of an issue or change request on a configured forge."""


def github_web_host(api_url: str) -> str:
    """The host (with its port) people browse for the GitHub behind ``api_url``."""
    netloc = urlsplit(api_url).netloc.lower()
    return netloc.removeprefix("api.")


def parse_issue_url(url: str, settings: Settings) -> IssueRef:
    """The issue or change request ``url`` names; ``NotAnIssueUrl`` says why not."""
    url = url.strip()
    if len(url) > MAX_URL_CHARS:
        raise NotAnIssueUrl(f"the address is longer than {MAX_URL_CHARS} characters")
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise NotAnIssueUrl(f"not a URL: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise NotAnIssueUrl(f"not an http(s) URL: {url!r}")
    base = f"{parts.scheme}://{parts.netloc}"
    gitlab = urlsplit(settings.gitlab.url.rstrip("/"))
    if parts.netloc.lower() == gitlab.netloc.lower():
        root = gitlab.path.rstrip("/")
        if not parts.path.startswith(root + "/"):
            raise NotAnIssueUrl(f"not under the configured GitLab ({settings.gitlab.url})")
        found = _GITLAB_PATH.fullmatch(unquote(parts.path[len(root) + 1 :]))
        if found is None:
            raise NotAnIssueUrl(
                "not a GitLab issue or merge request address (GROUP/PROJECT/-/issues/N, "
                "GROUP/PROJECT/-/merge_requests/N)"
            )
        repo = RepoRef(ForgeKind.GITLAB, found["repo"], web_url=f"{base}{root}/{found['repo']}")
        return IssueRef(repo, int(found["n"]), is_change_request=found["kind"] == "merge_requests")
    if parts.netloc.lower() == github_web_host(settings.github.api_url):
        found = _GITHUB_PATH.fullmatch(unquote(parts.path.lstrip("/")))
        if found is None:
            raise NotAnIssueUrl(
                "not a GitHub issue or pull request address (OWNER/REPO/issues/N, "
                "OWNER/REPO/pull/N)"
            )
        repo = RepoRef(ForgeKind.GITHUB, found["repo"], web_url=f"{base}/{found['repo']}")
        return IssueRef(repo, int(found["n"]), is_change_request=found["kind"] == "pull")
    raise NotAnIssueUrl(
        f"{parts.netloc} is neither the configured GitHub "
        f"({github_web_host(settings.github.api_url)}) nor the configured GitLab "
        f"({gitlab.netloc})"
    )
