"""A forge API URL as its route template, for traces. Pure.

``/repos/octo/hello/issues/12/comments?per_page=100`` is
``/repos/{owner}/{repo}/issues/{id}/comments``: the query is dropped, the repository or
project, numbers, commit ids and the names after the collections that take one (labels,
branches, users...) become placeholders, and a file path or a ref is one ``{path}``.
A span then names the kind of call, not its values (few distinct names, no issue or file
names in them).
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

_SHA = re.compile(r"^[0-9a-f]{40}$|^[0-9a-f]{64}$")
_WORD = re.compile(r"^[a-z][a-z0-9_-]{0,39}$")
# The collections whose next segment is a name of the repository's or a person's.
_NAMED = frozenset(
    {"labels", "branches", "users", "collaborators", "tags", "compare", "members", "orgs",
     "environments", "releases", "milestones", "files", "keys", "variables"}
)  # fmt: skip
# The segments after which the rest of the path is one value (a file path, a ref).
_REST = frozenset({"contents", "refs", "ref", "tree", "blob", "raw"})


def route_template(url: str) -> str:
    """The route of ``url`` (a full URL or a path), with its values as placeholders."""
    try:
        path = urlsplit(url).path
    except ValueError:
        return "{unreadable}"
    parts = [part for part in path.split("/") if part]
    route: list[str] = []
    index = 0
    while index < len(parts):
        previous = parts[index - 1] if index else ""
        if previous == "repos" and index + 1 < len(parts):
            route += ["{owner}", "{repo}"]
            index += 2
            continue
        if previous in _REST:
            route.append("{path}")
            break
        route.append(_placeholder(parts[index], previous))
        index += 1
    return "/" + "/".join(route)


def _placeholder(part: str, previous: str) -> str:
    if previous == "projects":
        return "{project}"
    if part.isdigit():
        return "{id}"
    if _SHA.match(part):
        return "{sha}"
    if previous in _NAMED or not _WORD.match(part):
        return "{name}"
    return part
