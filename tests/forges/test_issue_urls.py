"""Issue addresses -> the issue the forge is asked about, on the configured hosts only."""

from __future__ import annotations

import msgspec
import pytest

from bot.config import load_settings
from bot.events import ForgeKind, IssueRef, RepoRef
from bot.forges.issue_urls import NotAnIssueUrl, canonical_issue, parse_issue_url

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


def test_one_issue_has_one_key_whatever_the_case_of_its_address() -> None:
    settings = load_settings({})
    lower = parse_issue_url("https://github.com/octo/repo/issues/1", settings)
    upper = parse_issue_url("https://github.com/Octo/Repo/issues/1", settings)
    assert lower.key == upper.key  # one active task per issue, however it is typed
    gitlab = parse_issue_url("https://gitlab.com/Grp/Sub/Proj/-/issues/1", settings)
    assert gitlab.key == parse_issue_url("https://gitlab.com/grp/sub/proj/-/issues/1", settings).key


def test_dot_segments_are_not_a_repository() -> None:
    with pytest.raises(NotAnIssueUrl):
        parse_issue_url("https://github.com/octo/../issues/1", load_settings({}))


@pytest.mark.parametrize(
    "url",
    [
        "https://github.com/octo/../issues/1",
        "https://github.com/octo/./issues/1",
        "https://github.com/octo/%2e%2e/issues/1",
        "https://github.com/../repo/pull/1",
        "https://github.com/octo//repo/issues/1",
        "https://gitlab.com/g/../p/-/issues/1",
        "https://gitlab.com/g/sub/./p/-/merge_requests/1",
        "https://gitlab.com/g//p/-/issues/1",
    ],
)
def test_dot_and_empty_segments_are_refused_with_the_reason(url: str) -> None:
    with pytest.raises(NotAnIssueUrl, match="segment"):
        parse_issue_url(url, DEFAULT)


def _answer(asked: IssueRef, web_url: str, *, change: bool = False) -> IssueRef:
    """What an adapter's ``get_issue`` gives: the caller's repository, the forge's address."""
    return msgspec.structs.replace(
        asked, title="t", web_url=web_url, is_change_request=change, state="open"
    )


def test_the_forges_answer_names_the_repository_as_its_webhooks_do() -> None:
    asked = parse_issue_url("https://github.com/OCTO/repo/issues/1", DEFAULT)
    answer = _answer(asked, "https://github.com/Octo/Repo/issues/1")
    issue = canonical_issue(asked, answer, DEFAULT)
    webhook = IssueRef(RepoRef(ForgeKind.GITHUB, "Octo/Repo"), 1)  # repository.full_name
    assert (issue.key, issue.repo.full_name) == (webhook.key, "Octo/Repo")
    assert issue.repo.web_url == "https://github.com/Octo/Repo" and issue.title == "t"
    # /issues/N of a pull request is the pull request (GitHub numbers them together)
    pull = canonical_issue(asked, _answer(asked, "https://github.com/Octo/Repo/pull/1",
                                          change=True), DEFAULT)  # fmt: skip
    assert pull.key == "github:Octo/Repo#cr/1"

    asked = parse_issue_url("https://code.example/gl/G/Sub/P/-/merge_requests/2", ENTERPRISE)
    answer = _answer(asked, "https://code.example/gl/g/Sub/p/-/merge_requests/2", change=True)
    issue = canonical_issue(asked, answer, ENTERPRISE)
    assert issue.key == "gitlab:g/Sub/p#cr/2"  # project.path_with_namespace
    assert issue.repo.web_url == "https://code.example/gl/g/Sub/p"


@pytest.mark.parametrize(
    ("web_url", "change", "says"),
    [
        ("https://github.com/octo/other/issues/1", False, "another issue"),
        ("https://github.com/octo/repo/issues/2", False, "another issue"),
        ("https://github.com/octo/../issues/1", False, "segments"),
        ("https://github.com/octo/repo/wiki", False, "not a GitHub issue"),
        ("", False, "no address"),
    ],
)
def test_a_forge_answer_naming_another_issue_is_refused(
    web_url: str, change: bool, says: str
) -> None:
    asked = parse_issue_url("https://github.com/octo/repo/issues/1", DEFAULT)
    with pytest.raises(NotAnIssueUrl, match=says):
        canonical_issue(asked, _answer(asked, web_url, change=change), DEFAULT)
    gl = parse_issue_url("https://gitlab.com/g/p/-/issues/3", DEFAULT)
    with pytest.raises(NotAnIssueUrl, match="another issue"):  # GitLab numbers them apart
        canonical_issue(gl, _answer(gl, "https://gitlab.com/g/p/-/merge_requests/3"), DEFAULT)
