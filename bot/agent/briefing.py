"""The briefing: what the planner is told (the issue, its comments, repository facts,
the tools).

Issue and comment text is untrusted: ``clean_untrusted`` (``bot/untrusted.py``) strips
HTML comments, invisible, zero-width and bidirectional control characters and fence
tags, however nested, in one linear pass over a text cut to a bound first, and
``fence`` wraps it in ``<untrusted>`` tags the system prompt declares to be data,
never instructions. A command's instructions are cut to ``MAX_PERSON_CHARS`` like
everything one person writes to the bot; ``build_context`` cleans the long texts off the
event loop. It reads everything through the ``Forge``; a fact the forge cannot give is
left out rather than failing the task.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from dataclasses import dataclass

from bot.config import IsBot, Settings, is_bot_account
from bot.events import FollowUpRound, IssueRef, RoundKind
from bot.fence_marks import tag_head
from bot.forges.base import Comment, EntryKind, Forge, ForgeError, TreeEntry
from bot.text import clip
from bot.tools.factory import BuiltTools
from bot.tools.quality import detect_commands
from bot.tools.registry import Tool
from bot.tools.writers import said_by_writers
from bot.untrusted import (
    MAX_PERSON_CHARS,
    clean_off_loop,
    clean_untrusted,
    fence,
    fence_off_loop,
)

MAX_BODY_CHARS = 4000
MAX_TITLE_CHARS = 300
MAX_COMMENT_CHARS = 800
MAX_COMMENTS = 10
MAX_TREE_ENTRIES = 40
README_CHARS = 600
GUIDE_CHARS = 1200
GUIDE_FILES = ("AGENTS.md", "CLAUDE.md")
INSTRUCTIONS_SOURCE = "instructions given with the command"
_TOOL_TAG = tag_head(("tool_output",))


def as_data(text: str) -> str:
    """Tool output for a ``<tool_output>`` block: unchanged, except that it can neither
    close it nor open another: the bracket of anything that reads as the tag (ASCII or a
    look-alike, ``bot.fence_marks``) becomes ``&lt;``."""
    return _TOOL_TAG.sub("&lt;", text)


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
    built: BuiltTools | None = None,
) -> RoundFacts | None:
    """The planner's view of a follow-up round (None for a task that is not one):
    ``context`` is what it answers (the failed checks or the review threads, fenced by
    the worker that read them; told apart from a task's instructions), and the quality
    gate's commands the agent reproduces a CI failure with (``built``'s, or detected in
    its workspace)."""
    if found is None:
        return None
    gate = built.quality or detect_commands(built.workspace.path) if built else None
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


def _task_parts(issue: IssueRef, instructions: str) -> str:
    parts = [
        clip(issue.title, MAX_TITLE_CHARS, fit=True),
        clip(issue.body, MAX_BODY_CHARS, fit=True),
        clip(instructions, MAX_PERSON_CHARS, fit=True),
    ]
    return "\n\n".join(p for p in parts if p)


def task_text(issue: IssueRef, instructions: str = "") -> str:
    """The text that defines the task (cache key and complexity measure)."""
    return clean_untrusted(_task_parts(issue, instructions))


def _issue_text(issue: IssueRef) -> tuple[str, str]:
    kind = "change request" if issue.is_change_request else "issue"
    title = clip(issue.title, MAX_TITLE_CHARS, fit=True)
    text = f"Title: {title}\n\n{clip(issue.body, MAX_BODY_CHARS, fit=True)}"
    return text, f"{kind} #{issue.number} by {issue.author or 'unknown'}"


async def issue_block(issue: IssueRef, instructions: str = "") -> str:
    """The issue and the command's instructions, fenced (long texts cleaned off the loop)."""
    block = await fence_off_loop(*_issue_text(issue))
    if instructions:
        fenced = await fence_off_loop(instructions, INSTRUCTIONS_SOURCE, limit=MAX_PERSON_CHARS)
        block += "\n" + fenced
    return block


def repo_instructions_block(instructions: str) -> str:
    """The repository's own ``.agent.yaml`` instructions, fenced as repository text: its
    conventions for the work, never system rules."""
    if not instructions.strip():
        return ""
    return fence(instructions, "instructions of the repository (.agent.yaml)")


def comments_block(comments: Iterable[Comment], *, is_bot: IsBot) -> str:
    """People's comments (the bot's own left out: by its account, ``is_bot``), fenced."""
    kept = [c for c in comments if not is_bot(c.author, c.author_id) and c.body.strip()]
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
    follow_up: FollowUpRound | None = None,
    conflicts: tuple[str, ...] = (),
    built: BuiltTools | None = None,
) -> Briefing:
    """Read the issue (fresh, with comments) and the repository facts for the planner;
    ``previous`` is the summary of the previous attempt's history (a retry). A round on
    the change request (``follow_up``) is told what it answers (``round_facts``: its
    ``instructions`` are that, told apart from a person's instructions), and reads only
    the comments of people with write access (``bot.tools.writers``)."""
    facts = round_facts(
        follow_up, context=instructions, settings=settings, conflicts=conflicts, built=built
    )
    instructions = "" if facts is not None else instructions
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

    def is_bot(login: str, account: str) -> bool:
        return is_bot_account(settings, issue.repo.forge, login=login, account_id=account)

    if facts is not None:  # a round: nobody started it, only writers' words reach it
        comments = await said_by_writers(forge, issue.repo, comments, is_bot=is_bot)
    return Briefing(
        task_text=await clean_off_loop(_task_parts(issue, instructions)),
        issue_block=await issue_block(issue, instructions),
        comments_block=comments_block(comments, is_bot=is_bot),
        repo=await repo_facts(forge, issue),
        tools=tool_lines(tools),
        previous_block=(
            await fence_off_loop(previous, "the previous attempt's history") if previous else ""
        ),
        repo_instructions=repo_instructions_block(repo_instructions),
        round=facts,
    )
