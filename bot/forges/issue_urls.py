"""An issue's web address -> the ``IssueRef`` the forge adapters look up. Pure.

GitHub (``https://github.com/OWNER/REPO/issues/N`` or ``/pull/N``) on the web host of
the configured ``github.api_url`` (``api.github.com`` -> ``github.com``; a GitHub
Enterprise Server's ``https://HOST/api/v3`` -> ``HOST``), and GitLab
(``GROUP/SUB/PROJECT/-/issues/N``, ``/-/work_items/N`` or ``/-/merge_requests/N``,
nested groups included) under the configured ``gitlab.url`` (with its path, for an
instance served under one). An address on any other host is refused: the forge
client would look the same path up on the wrong server.

The repository's name is lowercased (GitHub and GitLab find a repository whatever the
case it is typed in), and ``.``/``..``/empty segments are refused: HTTP clients
normalise them away, so ``octo/../issues/1`` would ask another endpoint with the bot's
token. Once the forge answered, ``canonical_issue`` names the repository as the forge
does (from the issue's own address), so the issue's key is the one its webhooks give.
"""

from __future__ import annotations

import re
from urllib.parse import unquote, urlsplit

import msgspec

from bot.config import Settings
from bot.events import ForgeKind, IssueRef, RepoRef
from bot.forges.github_client import split_path

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


def _found(kind: ForgeKind, path: str) -> re.Match[str]:
    """The issue path ``path`` (after the forge's root), its dot segments refused."""
    try:
        split_path(path)
    except ValueError:
        raise NotAnIssueUrl(f"the address has '.' or '..' segments: {path!r}") from None
    if "//" in path.strip("/"):
        raise NotAnIssueUrl(f"the address has an empty segment: {path!r}")
    pattern = _GITLAB_PATH if kind is ForgeKind.GITLAB else _GITHUB_PATH
    found = pattern.fullmatch(path.lstrip("/"))
    if found is None and kind is ForgeKind.GITLAB:
        raise NotAnIssueUrl(
            "not a GitLab issue or merge request address (GROUP/PROJECT/-/issues/N, "
            "GROUP/PROJECT/-/merge_requests/N)"
        )
    if found is None:
        raise NotAnIssueUrl(
            "not a GitHub issue or pull request address (OWNER/REPO/issues/N, OWNER/REPO/pull/N)"
        )
    return found


def _gitlab_root(settings: Settings) -> str:
    return urlsplit(settings.gitlab.url.rstrip("/")).path.rstrip("/")


def _issue_ref(kind: ForgeKind, found: re.Match[str], name: str, web_root: str) -> IssueRef:
    change = found["kind"] == ("merge_requests" if kind is ForgeKind.GITLAB else "pull")
    repo = RepoRef(kind, name, web_url=f"{web_root}/{name}")
    return IssueRef(repo, int(found["n"]), is_change_request=change)


def parse_issue_url(url: str, settings: Settings) -> IssueRef:
    """The issue or change request ``url`` names; ``NotAnIssueUrl`` says why not. The
    repository's name is lowercased: one issue, one key, however its address is typed."""
    url = url.strip()
    if len(url) > MAX_URL_CHARS:
        raise NotAnIssueUrl(f"the address is longer than {MAX_URL_CHARS} characters")
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise NotAnIssueUrl(f"not a URL: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise NotAnIssueUrl(f"not an http(s) URL: {url!r}")
    base = f"{parts.scheme}://{parts.netloc.lower()}"
    gitlab = urlsplit(settings.gitlab.url.rstrip("/"))
    if parts.netloc.lower() == gitlab.netloc.lower():
        root = _gitlab_root(settings)
        if not parts.path.startswith(root + "/"):
            raise NotAnIssueUrl(f"not under the configured GitLab ({settings.gitlab.url})")
        found = _found(ForgeKind.GITLAB, unquote(parts.path[len(root) + 1 :]))
        return _issue_ref(ForgeKind.GITLAB, found, found["repo"].lower(), f"{base}{root}")
    if parts.netloc.lower() == github_web_host(settings.github.api_url):
        found = _found(ForgeKind.GITHUB, unquote(parts.path))
        return _issue_ref(ForgeKind.GITHUB, found, found["repo"].lower(), base)
    raise NotAnIssueUrl(
        f"{parts.netloc} is neither the configured GitHub "
        f"({github_web_host(settings.github.api_url)}) nor the configured GitLab "
        f"({gitlab.netloc})"
    )


def canonical_issue(asked: IssueRef, answer: IssueRef, settings: Settings) -> IssueRef:
    """``answer`` (what the forge sent for ``asked``) with its repository named as the
    forge names it, read from the issue's own address (GitHub's ``html_url``, GitLab's
    ``web_url``; its host is the forge's to choose): the key its webhooks give.
    ``NotAnIssueUrl`` when that address is missing or names another issue."""
    kind = asked.repo.forge
    parts = urlsplit(answer.web_url)
    root = _gitlab_root(settings) if kind is ForgeKind.GITLAB else ""
    if not answer.web_url or not parts.path.startswith(root + "/"):
        raise NotAnIssueUrl(f"the forge gave no address of this issue: {answer.web_url!r}")
    found = _found(kind, unquote(parts.path[len(root) + 1 :]))
    named = _issue_ref(kind, found, found["repo"], f"{parts.scheme}://{parts.netloc}{root}")
    # GitHub numbers issues and pull requests together (``/issues/N`` of a pull request
    # is that pull request); GitLab apart, so there the kind must be the same too
    same = (
        named.repo.full_name.lower() == asked.repo.full_name.lower()
        and named.number == asked.number
        and (kind is ForgeKind.GITHUB or named.is_change_request == answer.is_change_request)
    )
    if not same:
        raise NotAnIssueUrl(f"the forge answered with another issue: {answer.web_url}")
    repo = msgspec.structs.replace(
        answer.repo, full_name=named.repo.full_name, web_url=named.repo.web_url
    )
    return msgspec.structs.replace(answer, repo=repo)
