"""Tool policy (docs/planning.md#tool-policy): allowed, forbidden and approval-required globs.

Pure: no I/O. Forbidden always wins. A repository's own ``.agent.yaml`` may only
tighten the server policy (``tightened``), never loosen it. ``approval_paths`` are the
repository paths (CI definitions by default) whose writing waits for approval.
"""

from __future__ import annotations

import functools
import posixpath
import re
from collections.abc import Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase


@dataclass(frozen=True, slots=True)
class PolicyDecision:
    allowed: bool
    needs_approval: bool
    reason: str = ""


def _matches(name: str, patterns: tuple[str, ...]) -> str | None:
    for pattern in patterns:
        if fnmatchcase(name, pattern):
            return pattern
    return None


def repo_path(path: str) -> str:
    """A repository path in one spelling: ``./a/../.github//x`` is ``.github/x``."""
    norm = posixpath.normpath(path.replace("\\", "/").strip()).lstrip("/")
    return "" if norm == "." else norm


@functools.lru_cache(maxsize=1024)
def _path_regex(pattern: str) -> re.Pattern[str]:
    """A path glob as a regular expression: ``fnmatch``'s (``*`` and ``?`` cross ``/``,
    ``[...]`` a class), and ``**/`` also no folder at all, as GitLab's ``include`` reads
    it (``ci/**/*.yml`` holds ``ci/a.yml``; ``**/*.yml`` holds ``a.yml``). Wider than
    GitLab's own ``*`` (which stops at ``/``): a guard errs on the side of asking."""
    out, at = [], 0
    while at < len(pattern):
        if pattern.startswith("**/", at):
            out.append("(?:.*/)?")
            at += 3
        elif pattern[at] == "*":
            out.append(".*")
            at += 1
        elif pattern[at] == "?":
            out.append(".")
            at += 1
        elif pattern[at] == "[" and (end := pattern.find("]", at + 2)) > 0:
            body = pattern[at + 1 : end].replace("\\", "\\\\").replace("[", "\\[")
            out.append("[" + ("^" + body[1:] if body.startswith("!") else body) + "]")
            at = end + 1
        else:
            out.append(re.escape(pattern[at]))
            at += 1
    return re.compile("".join(out), re.DOTALL)


def path_matches(path: str, pattern: str) -> bool:
    """Whether the repository path ``path`` matches the glob ``pattern`` (``_path_regex``)."""
    return _path_regex(pattern).fullmatch(path) is not None


def guarded_by(path: str, patterns: tuple[str, ...]) -> str | None:
    """The pattern that makes writing ``path`` need approval: the path matches it, or is
    a folder that holds what it matches (moving or deleting ``.github`` moves the
    workflows). The root holds everything. A pattern that starts with a wildcard folder
    (``**/action.yml``) names files anywhere, not folders: every folder might hold one,
    and the push is checked file by file (``bot.agent.push_guard``)."""
    norm = repo_path(path)
    if not norm:
        return patterns[0] if patterns else None
    parts = norm.split("/")
    for pattern in patterns:
        if path_matches(norm, pattern):
            return pattern
        steps = pattern.split("/")
        anywhere = not steps[0].strip("*")
        if not anywhere and len(parts) < len(steps) and all(map(fnmatchcase, parts, steps)):
            return pattern
    return None


@dataclass(frozen=True, slots=True)
class ToolPolicy:
    allowed: tuple[str, ...] = ("*",)
    forbidden: tuple[str, ...] = ()
    require_approval: tuple[str, ...] = ()
    narrowed_to: tuple[str, ...] | None = None
    approval_paths: tuple[str, ...] = ()  # writing these repository paths needs approval

    def guarded_paths(self, paths: Iterable[str]) -> list[str]:
        """The paths of ``paths`` whose writing needs a person's approval."""
        return [p for p in paths if guarded_by(p, self.approval_paths) is not None]

    def decide(self, name: str) -> PolicyDecision:
        hit = _matches(name, self.forbidden)
        if hit is not None:
            return PolicyDecision(False, False, f"{name} is forbidden by the policy ({hit!r})")
        if _matches(name, self.allowed) is None:
            return PolicyDecision(False, False, f"{name} is not in the allowed tools")
        if self.narrowed_to is not None and _matches(name, self.narrowed_to) is None:
            return PolicyDecision(False, False, f"{name} is not allowed by the repository")
        approval = _matches(name, self.require_approval)
        return PolicyDecision(True, approval is not None, "")

    def tightened(
        self,
        *,
        forbidden: tuple[str, ...] = (),
        require_approval: tuple[str, ...] = (),
        allowed: tuple[str, ...] | None = None,
        approval_paths: tuple[str, ...] = (),
    ) -> ToolPolicy:
        """A policy at least as strict as this one: a repository may forbid more, ask
        approval for more, and narrow the allowed set (a tool must then match both)."""
        narrowed = self.narrowed_to
        if allowed is not None:
            narrowed = tuple(
                p for p in allowed if narrowed is None or _matches(p, narrowed) is not None
            )
        return ToolPolicy(
            allowed=self.allowed,
            forbidden=self.forbidden + tuple(forbidden),
            require_approval=self.require_approval + tuple(require_approval),
            narrowed_to=narrowed,
            approval_paths=self.approval_paths + tuple(approval_paths),
        )
