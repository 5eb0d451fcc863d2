"""The briefing: what the planner is told (the issue, its comments, repository facts,
the tools).

Issue and comment text is untrusted: ``clean_untrusted`` strips HTML comments,
invisible, zero-width and bidirectional control characters and fence tags, again
and again until nothing changes (removing one can join the pieces of another), and
``fence`` wraps it in ``<untrusted>`` tags the system prompt declares to be data,
never instructions. ``build_context`` reads everything through the ``Forge``; a fact the
forge cannot give is left out rather than failing the task.
"""

from __future__ import annotations

import contextlib
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

from bot.config import Settings
from bot.events import FollowUpRound, IssueRef, RoundKind
from bot.forges.base import Comment, EntryKind, Forge, ForgeError, TreeEntry
from bot.text import clip
from bot.tools.quality import QualityCommands
from bot.tools.registry import Tool

_HTML_COMMENT = re.compile(r"<!--.*?(?:-->|$)", re.DOTALL)
# A fence tag with ASCII, fullwidth or small angle brackets and spaces around the slash;
# without its closing bracket, the "<untrusted" token alone.
_UNTRUSTED_TAG = re.compile(
    r"[<\uff1c\ufe64]\s*/?\s*untrusted(?:[^<>\uff1c\uff1e\ufe64\ufe65]*[>\uff1e\ufe65])?",
    re.IGNORECASE,
)
_BLANK_LINES = re.compile(r"\n{3,}")
_KEEP = frozenset("\n\t")

MAX_BODY_CHARS = 4000
MAX_COMMENT_CHARS = 800
MAX_COMMENTS = 10
MAX_TREE_ENTRIES = 40
README_CHARS = 600
GUIDE_CHARS = 1200
GUIDE_FILES = ("AGENTS.md", "CLAUDE.md")


def _invisible(char: str) -> bool:
    """Format (Cf: zero-width, bidi controls, BOM...), other controls, private use."""
    if char in _KEEP:
        return False
    return unicodedata.category(char) in {"Cf", "Cc", "Co", "Cs"}


def _strip_once(text: str) -> str:
    text = _HTML_COMMENT.sub("", text)
    text = "".join(ch for ch in text if not _invisible(ch))
    return _UNTRUSTED_TAG.sub("", text)


def clean_untrusted(text: str) -> str:
    """Untrusted text without HTML comments, invisible characters or fence tags; the
    removal repeats until the text is stable, so ``</untr</untrusted>usted>`` or
    ``<!\u200b-- ... -->`` cannot reassemble what a single pass removed. Each pass only
    removes characters, so this ends."""
    text = text.replace("\r\n", "\n")
    while (cleaned := _strip_once(text)) != text:
        text = cleaned
    return _BLANK_LINES.sub("\n\n", text).strip()


def fence(text: str, source: str) -> str:
    """Untrusted text as a fenced data block naming where it came from."""
    label = re.sub(r'["<>]', "", clean_untrusted(source))
    return f'<untrusted source="{label}">\n{clean_untrusted(text)}\n</untrusted>'


def as_data(text: str) -> str:
    """Tool output for a ``<tool_output>`` block: unchanged, except that it cannot close it."""
    return re.sub(r"</\s*tool_output", "<\\/tool_output", text, flags=re.IGNORECASE)


def tool_lines(tools: Iterable[Tool]) -> str:
    """One line per tool: its name and its one-line purpose (planning prompts)."""
    return "\n".join(f"- {t.name}: {t.purpose.splitlines()[0] if t.purpose else ''}" for t in tools)


@dataclass(frozen=True, slots=True)
class RepoFacts:
    full_name: str
    default_branch: str
    tree: tuple[str, ...] = ()
    readme: str = ""
    guides: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Briefing:
    """Prompt variables describing the task (all untrusted text already fenced)."""

    task_text: str
    issue_block: str
    comments_block: str
    repo: RepoFacts
    tools: str
    previous_block: str = ""  # a retry: what the previous attempt did (fenced)
    repo_instructions: str = ""  # the repository's .agent.yaml ``instructions`` (fenced)
    # a follow-up round on the bot's change request (``RoundFacts``), None otherwise
    round: RoundFacts | None = None

    def prompt_vars(self) -> dict[str, object]:
        return {
            "repo_instructions": self.repo_instructions,
            "issue_block": self.issue_block,
            "comments_block": self.comments_block,
            "repo": self.repo,
            "tools": self.tools,
            "previous_block": self.previous_block,
            "round": self.round,
        }


@dataclass(frozen=True, slots=True)
class RoundFacts:
    """What the planner is told of a follow-up round (``prompts/planning.j2``): its kind
    (``RoundKind`` value), number and limit, the head commit it answers, what it answers
    (``context``: the failed checks or the review threads, fenced by the worker), the
    files a base merge left conflicted, the base branch, and the quality gate's commands."""

    kind: str
    number: int
    limit: int
    head: str
    base: str
    context: str = ""
    items: int = 0  # review threads
    conflicts: tuple[str, ...] = ()
    gate: str = ""


def thread_labels(found: FollowUpRound | None) -> list[str]:
    """``T1``, ``T2``, ... for the threads of a review round, in checklist order (its
    completion summary answers each by that label)."""
    if found is None or found.kind is not RoundKind.REVIEW:
        return []
    return [f"T{index}" for index in range(1, len(found.threads) + 1)]


def round_facts(
    found: FollowUpRound | None,
    *,
    context: str,
    settings: Settings,
    conflicts: tuple[str, ...] = (),
    gate: QualityCommands | None = None,
) -> RoundFacts | None:
    """The planner's view of a follow-up round (None for a task that is not one):
    ``context`` is what it answers (the failed checks or the review threads, fenced by
    the worker that read them), ``gate`` the quality gate's commands the agent
    reproduces a CI failure with."""
    if found is None:
        return None
    steps = [("lint", gate.lint), ("tests", gate.test)] if gate is not None else []
    return RoundFacts(
        kind=found.kind.value,
        number=found.number,
        limit=settings.ci.max_fix_rounds if found.kind is RoundKind.CI else 0,
        head=found.head_sha[:12],
        base=found.base_branch,
        context=context,
        items=len(found.threads),
        conflicts=conflicts,
        gate="; ".join(f"{name}: `{' '.join(argv)}`" for name, argv in steps if argv),
    )


def task_text(issue: IssueRef, instructions: str = "") -> str:
    """The text that defines the task (cache key and complexity measure)."""
    parts = [issue.title, clip(issue.body, MAX_BODY_CHARS, fit=True), instructions]
    return clean_untrusted("\n\n".join(p for p in parts if p))


def issue_block(issue: IssueRef, instructions: str = "") -> str:
    kind = "change request" if issue.is_change_request else "issue"
    text = f"Title: {issue.title}\n\n{clip(issue.body, MAX_BODY_CHARS, fit=True)}"
    block = fence(text, f"{kind} #{issue.number} by {issue.author or 'unknown'}")
    if instructions:
        block += "\n" + fence(instructions, "instructions given with the command")
    return block


def repo_instructions_block(instructions: str) -> str:
    """The repository's own ``.agent.yaml`` instructions, fenced as repository text: its
    conventions for the work, never system rules."""
    if not instructions.strip():
        return ""
    return fence(instructions, "instructions of the repository (.agent.yaml)")


def comments_block(comments: Iterable[Comment], *, bot_logins: Iterable[str]) -> str:
    ignored = {login.lower() for login in bot_logins}
    kept = [c for c in comments if c.author.lower() not in ignored and c.body.strip()]
    blocks = [
        fence(clip(c.body, MAX_COMMENT_CHARS, fit=True), f"comment by {c.author}")
        for c in kept[-MAX_COMMENTS:]
    ]
    return "\n".join(blocks)


def _tree_lines(entries: list[TreeEntry]) -> tuple[str, ...]:
    names = [e.path + ("/" if e.kind == EntryKind.DIR else "") for e in entries[:MAX_TREE_ENTRIES]]
    if len(entries) > MAX_TREE_ENTRIES:
        names.append(f"... {len(entries) - MAX_TREE_ENTRIES} more")
    return tuple(names)


async def _file_excerpt(forge: Forge, issue: IssueRef, path: str, ref: str, limit: int) -> str:
    try:
        found = await forge.get_file(issue.repo, path, ref=ref)
    except ForgeError:
        return ""
    return fence(clip(found.text, limit, fit=True), path)


async def repo_facts(forge: Forge, issue: IssueRef) -> RepoFacts:
    """Default branch, top-level tree, README excerpt and agent guides (when present)."""
    branch = issue.repo.default_branch or "main"
    with contextlib.suppress(ForgeError):
        branch = (await forge.get_repo_info(issue.repo)).default_branch
    try:
        entries = await forge.list_tree(issue.repo, ref=branch)
    except ForgeError:
        entries = []
    files = {e.path for e in entries if e.kind == EntryKind.FILE}
    readme_name = next((e.path for e in entries if e.path.lower().startswith("readme")), None)
    readme = ""
    if readme_name is not None:
        readme = await _file_excerpt(forge, issue, readme_name, branch, README_CHARS)
    guides = []
    for name in GUIDE_FILES:
        if name in files:
            guides.append((name, await _file_excerpt(forge, issue, name, branch, GUIDE_CHARS)))
    return RepoFacts(
        full_name=issue.repo.full_name,
        default_branch=branch,
        tree=_tree_lines(entries),
        readme=readme,
        guides=tuple(guides),
    )


async def build_context(
    forge: Forge,
    issue: IssueRef,
    settings: Settings,
    tools: Iterable[Tool],
    *,
    instructions: str = "",
    previous: str = "",
    repo_instructions: str = "",
    round_facts: RoundFacts | None = None,
) -> Briefing:
    """Read the issue (fresh, with comments) and the repository facts for the planner;
    ``previous`` is the summary of the previous attempt's history (a retry)."""
    comments: tuple[Comment, ...] = ()
    try:
        details = await forge.get_issue(
            issue.repo, issue.number, change_request=issue.is_change_request
        )
    except ForgeError:
        details = None
    if details is not None:
        # A public task's comments and pull request are public: no internal notes in them.
        details = details.for_task(confidential_task=details.confidential)
        issue, comments = details.issue, details.comments
    bots = (settings.bot.github_login, settings.bot.gitlab_username)
    return Briefing(
        task_text=task_text(issue, instructions),
        issue_block=issue_block(issue, instructions),
        comments_block=comments_block(comments, bot_logins=bots),
        repo=await repo_facts(forge, issue),
        tools=tool_lines(tools),
        previous_block=fence(previous, "the previous attempt's history") if previous else "",
        repo_instructions=repo_instructions_block(repo_instructions),
        round=round_facts,
    )
