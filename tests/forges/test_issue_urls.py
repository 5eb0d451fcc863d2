"""Issue addresses -> the issue the forge is asked about, on the configured hosts only."""

from __future__ import annotations

import pytest

from bot.config import load_settings
from bot.events import ForgeKind
from bot.forges.issue_urls import NotAnIssueUrl, parse_issue_url

DEFAULT = load_settings({})
ENTERPRISE = load_settings(
    {"GITHUB_API_URL": "https://ghe.example:8443/api/v3", "GITLAB_URL": "https://code.example/gl/"}
)


@pytest.mark.parametrize(
    ("url", "forge", "name", "number", "change"),
    [
        ("https://github.com/octo/hello/issues/7", ForgeKind.GITHUB, "octo/hello", 7, False),
        ("https://github.com/octo/hello.js/pull/8/", ForgeKind.GITHUB, "octo/hello.js", 8, True),
        ("https://GitHub.com/octo/hello/issues/7#issuecomment-1", ForgeKind.GITHUB, "octo/hello",
         7, False),
        ("https://gitlab.com/g/sub/p/-/issues/9", ForgeKind.GITLAB, "g/sub/p", 9, False),
        ("https://gitlab.com/g/a/b/c/p-1/-/merge_requests/3", ForgeKind.GITLAB, "g/a/b/c/p-1", 3,
         True),
        ("https://gitlab.com/g/p/-/work_items/4?x=1", ForgeKind.GITLAB, "g/p", 4, False),
    ],
)  # fmt: skip
def test_issue_urls_of_github_and_gitlab(
    url: str, forge: ForgeKind, name: str, number: int, change: bool
) -> None:
    ref = parse_issue_url(url, DEFAULT)
    found = (ref.repo.forge, ref.repo.full_name, ref.number, ref.is_change_request)
    assert found == (forge, name, number, change)


def test_github_enterprise_and_a_gitlab_under_a_path_are_found_by_their_configured_urls() -> None:
    ghe = parse_issue_url("https://ghe.example:8443/octo/hello/pull/8", ENTERPRISE)
    assert (ghe.repo.forge, ghe.repo.full_name, ghe.number) == (ForgeKind.GITHUB, "octo/hello", 8)
    assert ghe.repo.web_url == "https://ghe.example:8443/octo/hello"
    gl = parse_issue_url("https://code.example/gl/g/sub/p/-/issues/2", ENTERPRISE)
    assert (gl.repo.forge, gl.repo.full_name, gl.repo.web_url) == (
        ForgeKind.GITLAB,
        "g/sub/p",
        "https://code.example/gl/g/sub/p",
    )
    with pytest.raises(NotAnIssueUrl, match="neither the configured GitHub"):
        parse_issue_url("https://github.com/octo/hello/issues/7", ENTERPRISE)
    with pytest.raises(NotAnIssueUrl, match="not under the configured GitLab"):
        parse_issue_url("https://code.example/g/p/-/issues/2", ENTERPRISE)


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("https://example.com/octo/hello/issues/7", "neither the configured GitHub (github.com)"),
        ("https://git.example/g/p/-/merge_requests/3", "neither the configured GitHub"),
        ("https://github.com/octo/hello/wiki/7", "not a GitHub issue or pull request address"),
        ("https://github.com/octo/hello/issues/x", "not a GitHub issue"),
        ("https://gitlab.com/g/p/issues/9", "not a GitLab issue or merge request address"),
        ("https://gitlab.com/p/-/issues/9", "not a GitLab issue"),  # a project has a group
        ("ftp://github.com/octo/hello/issues/7", "not an http(s) URL"),
        ("octo/hello#7", "not an http(s) URL"),
        ("https://[::1/x", "not a URL"),
        ("https://github.com/" + "a" * 2000, "longer than 2000"),
    ],
)
def test_what_is_not_an_issue_url_is_refused_with_the_reason(url: str, says: str) -> None:
    with pytest.raises(NotAnIssueUrl) as refused:
        parse_issue_url(url, DEFAULT)
    assert says in str(refused.value)
