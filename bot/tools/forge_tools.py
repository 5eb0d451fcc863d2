"""Forge API tools: read and write a repository through GitHub's or GitLab's API, no clone.

Names follow the GitHub MCP server's tools (``github_get_file_contents``, ...), with
the prefix ``github_`` or ``gitlab_`` from the forge. Writes only ever target the
task's own branch: naming any other branch (the default branch included) is
refused with a reason, and the branch is created from the base on the first write.
Handlers never raise: forge errors come back as ``ToolResult.fail``.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from bot.config import IsBot
from bot.events import ForgeKind, IssueRef
from bot.forges.base import (
    AccessDenied,
    Conflict,
    Forge,
    ForgeError,
    NotFound,
    RateLimited,
)
from bot.redact import redact
from bot.text import clip
from bot.tools.registry import Tool, ToolResult, arg_paths
from bot.tools.writers import said_by_writers

_STR = {"type": "string"}
_PATH = {"type": "string", "minLength": 1, "description": "path relative to the repository root"}
_BRANCH = {"type": "string", "description": "must be the task's own branch if given"}


def _schema(required: list[str], **props: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": props,
        "required": required,
        "additionalProperties": False,
    }


def check_path(path: str) -> str | None:
    """Why ``path`` may not be written, or None when it is a plain relative path."""
    parts = path.split("/")
    if not path or path.startswith("/") or "\\" in path or "\0" in path:
        return f"{path!r} is not a relative path"
    if any(part in ("", ".", "..") for part in parts):
        return f"{path!r} must not contain empty, '.' or '..' parts"
    if parts[0] == ".git":
        return f"{path!r} is inside .git"
    return None


def _guarded(
    fn: Callable[[ForgeToolkit, dict[str, Any]], Awaitable[ToolResult]],
) -> Callable[[ForgeToolkit, dict[str, Any]], Awaitable[ToolResult]]:
    """Turn the forge's typed errors into failed results with a clear reason."""

    @functools.wraps(fn)
    async def wrapper(self: ForgeToolkit, args: dict[str, Any]) -> ToolResult:
        try:
            return await fn(self, args)
        except NotFound as exc:
            return ToolResult.fail(f"not found: {args.get('path') or exc}")
        except AccessDenied as exc:
            return ToolResult.fail(f"access denied: {exc}")
        except RateLimited as exc:
            return ToolResult.fail(f"rate limited by the forge, retry after {exc.retry_after:g} s")
        except ForgeError as exc:
            return ToolResult.fail(str(exc) or type(exc).__name__)

    return wrapper


# The agent's comment text and its sequence number -> the body to post.
CommentFinisher = Callable[[str, int], str]


@dataclass
class ForgeToolkit:
    """The state the forge tools of one task share: the forge, the issue, the branch."""

    forge: Forge
    issue: IssueRef
    branch: str
    base_branch: str
    finish_comment: CommentFinisher
    max_file_bytes: int = 10 * 1024 * 1024
    max_output_chars: int = 20_000
    draft: bool = True
    branch_ready: bool = False
    secrets: tuple[str, ...] = ()
    comments_posted: int = 0
    # a round (no person started it): ``get_issue`` shows only the comments of people
    # with write access and the bot's own (this tells the bot's account); None: all
    writers_only: IsBot | None = None

    @property
    def prefix(self) -> str:
        return "github_" if self.forge.kind is ForgeKind.GITHUB else "gitlab_"

    def _read_ref(self, args: dict[str, Any]) -> str:
        ref = args.get("ref")
        if ref:
            return str(ref)
        return self.branch if self.branch_ready else self.base_branch

    def _refuse_branch(self, requested: object) -> str | None:
        if requested is None or requested == self.branch:
            return None
        default = " (the default branch)" if requested == self.issue.repo.default_branch else ""
        return (
            f"refused: writes go only to this task's branch {self.branch!r}, "
            f"not {requested!r}{default}"
        )

    async def _ensure_branch(self) -> None:
        if self.branch_ready:
            return
        with contextlib.suppress(Conflict):  # it exists (an earlier run): write on top of it
            await self.forge.create_branch(self.issue.repo, self.branch, from_ref=self.base_branch)
        self.branch_ready = True

    # --- reads ---------------------------------------------------------------------------

    @_guarded
    async def get_file_contents(self, args: dict[str, Any]) -> ToolResult:
        ref = self._read_ref(args)
        found = await self.forge.get_file(self.issue.repo, args["path"], ref=ref)
        try:
            text = found.content.decode("utf-8")
        except UnicodeDecodeError:
            return ToolResult.success(
                f"{found.path} is a binary file of {len(found.content)} bytes", path=found.path
            )
        text = clip(text, self.max_output_chars)
        return ToolResult.success(text, path=found.path, ref=found.ref, sha=found.sha)

    @_guarded
    async def list_files(self, args: dict[str, Any]) -> ToolResult:
        path = str(args.get("path", "")).strip("/")
        entries = await self.forge.list_tree(
            self.issue.repo,
            path=path,
            ref=self._read_ref(args),
            recursive=bool(args.get("recursive", False)),
        )
        lines = [f"{e.path}/" if e.kind == "dir" else e.path for e in entries]
        text = "\n".join(lines) if lines else f"no files under {path or 'the root'}"
        return ToolResult.success(clip(text, self.max_output_chars), count=len(entries))

    @_guarded
    async def search_code(self, args: dict[str, Any]) -> ToolResult:
        hits = await self.forge.search_code(self.issue.repo, args["query"])
        lines = [f"{hit.path}: {hit.snippet}" if hit.snippet else hit.path for hit in hits]
        text = "\n".join(lines) if lines else f"no matches for {args['query']!r}"
        return ToolResult.success(clip(text, self.max_output_chars), count=len(hits))

    @_guarded
    async def get_issue(self, args: dict[str, Any]) -> ToolResult:
        number = int(args.get("number", self.issue.number))
        own = number == self.issue.number
        change_request = self.issue.is_change_request if own else bool(args.get("change_request"))
        details = await self.forge.get_issue(self.issue.repo, number, change_request=change_request)
        confidential_task = details.confidential if own else await self._task_confidential()
        if details.confidential and not confidential_task:
            return ToolResult.fail(
                f"refused: #{number} is confidential and this task's issue "
                f"#{self.issue.number} is not (what the task reads may end up in public)"
            )
        details = details.for_task(confidential_task=confidential_task)
        found, comments = details.issue, details.comments
        if self.writers_only is not None:
            comments = await said_by_writers(
                self.forge, found.repo, comments, is_bot=self.writers_only
            )
        parts = [f"#{found.number} {found.title} ({found.state})", found.body or "(no description)"]
        parts += [f"--- comment by {c.author} ---\n{c.body}" for c in comments]
        left_out = len(details.comments) - len(comments)
        if left_out:
            parts.append(f"({left_out} comment(s) of people without write access left out)")
        return ToolResult.success(
            clip("\n\n".join(parts), self.max_output_chars),
            number=found.number,
            comments=len(comments),
        )

    async def _task_confidential(self) -> bool:
        """Whether the task's own issue is confidential now (asked each time: it may change)."""
        own = await self.forge.get_issue(
            self.issue.repo, self.issue.number, change_request=self.issue.is_change_request
        )
        return own.confidential

    # --- writes --------------------------------------------------------------------------

    @_guarded
    async def create_branch(self, args: dict[str, Any]) -> ToolResult:
        refusal = self._refuse_branch(args.get("branch"))
        if refusal:
            return ToolResult.fail(refusal)
        await self._ensure_branch()
        return ToolResult.success(
            f"branch {self.branch} is ready (from {self.base_branch})", changed=True
        )

    def _check_files(self, files: dict[str, str]) -> str | None:
        for path, content in files.items():
            problem = check_path(path)
            if problem:
                return f"refused: {problem}"
            if len(content.encode("utf-8")) > self.max_file_bytes:
                return f"refused: {path} is larger than {self.max_file_bytes} bytes"
        return None

    async def _commit(self, args: dict[str, Any], files: dict[str, str]) -> ToolResult:
        refusal = self._refuse_branch(args.get("branch")) or self._check_files(files)
        if refusal:
            return ToolResult.fail(refusal)
        await self._ensure_branch()
        sha = await self.forge.commit_files(
            self.issue.repo,
            branch=self.branch,
            message=args["message"],
            files={path: content.encode("utf-8") for path, content in files.items()},
        )
        names = ", ".join(sorted(files))
        return ToolResult.success(
            f"committed {names} to {self.branch} ({sha[:12]})",
            changed=True,
            sha=sha,
            paths=sorted(files),
        )

    @_guarded
    async def create_or_update_file(self, args: dict[str, Any]) -> ToolResult:
        return await self._commit(args, {args["path"]: args["content"]})

    @_guarded
    async def push_files(self, args: dict[str, Any]) -> ToolResult:
        files: dict[str, str] = {}
        for entry in args["files"]:
            if entry["path"] in files:
                return ToolResult.fail(f"refused: {entry['path']} is listed twice")
            files[entry["path"]] = entry["content"]
        return await self._commit(args, files)

    @_guarded
    async def open_change_request(self, args: dict[str, Any]) -> ToolResult:
        refusal = self._refuse_branch(args.get("head"))
        base = args.get("base")
        if refusal is None and base is not None and base != self.base_branch:
            refusal = f"refused: the base is {self.base_branch!r} for this task, not {base!r}"
        if refusal:
            return ToolResult.fail(refusal)
        await self._ensure_branch()
        change = await self.forge.open_change_request(
            self.issue.repo,
            head=self.branch,
            base=self.base_branch,
            title=redact(args["title"], known=self.secrets),
            body=redact(args.get("body", ""), known=self.secrets),
            # workspace.draft_change_requests wins: the model may ask for a draft, not
            # for a ready change request when drafts are required.
            draft=self.draft or bool(args.get("draft", False)),
        )
        return ToolResult.success(
            f"opened #{change.number}: {change.web_url}",
            changed=True,
            number=change.number,
            web_url=change.web_url,
        )

    @_guarded
    async def add_issue_comment(self, args: dict[str, Any]) -> ToolResult:
        number = args.get("number")
        if number is not None and number != self.issue.number:
            return ToolResult.fail(
                f"refused: comments go only on this task's issue #{self.issue.number}, "
                f"not #{number}"
            )
        # Redacted, and marked as the bot's own so it can never trigger the bot.
        body = self.finish_comment(args["body"], self.comments_posted)
        self.comments_posted += 1
        comment = await self.forge.create_comment(self.issue, body)
        return ToolResult.success(f"commented: {comment.web_url or comment.id}", id=comment.id)

    # --- the tools -----------------------------------------------------------------------

    def tools(self) -> list[Tool]:
        p, branch, base = self.prefix, self.branch, self.base_branch
        change_request = "create_pull_request" if p == "github_" else "create_merge_request"
        ref = {"type": "string", "description": "branch, tag or commit"}
        entry = _schema(["path", "content"], path=_PATH, content=_STR)
        text = {"type": "string", "minLength": 1}
        flag = {"type": "boolean"}
        Spec = tuple[str, str, dict[str, Any], Callable[[dict[str, Any]], Awaitable[ToolResult]]]
        reads: list[Spec] = [
            ("get_file_contents", "Read a file (default ref: task branch once written, else base).",
             _schema(["path"], path=_PATH, ref=ref), self.get_file_contents),
            ("list_files", "List files and folders under a path of the repository.",
             _schema([], path=_STR, recursive=flag, ref=ref), self.list_files),
            ("search_code", "Search the repository's code on its default branch.",
             _schema(["query"], query=text), self.search_code),
            ("get_issue", "Read an issue of this repository and its comments (default: this one).",
             _schema([], number={"type": "integer", "minimum": 1}, change_request=flag),
             self.get_issue),
        ]  # fmt: skip
        writes: list[Spec] = [
            ("create_branch", f"Create this task's branch {branch} from {base}.",
             _schema([], branch=_BRANCH), self.create_branch),
            ("create_or_update_file", f"Write one file and commit it to the branch {branch}.",
             _schema(["path", "content", "message"], path=_PATH, content=_STR, message=text,
                     branch=_BRANCH), self.create_or_update_file),
            ("push_files", f"Write several files in one commit to the task's branch {branch}.",
             _schema(["files", "message"], files={"type": "array", "items": entry, "minItems": 1},
                     message=text, branch=_BRANCH), self.push_files),
            (change_request, f"Open a change request from {branch} into {base}.",
             _schema(["title"], title=text, body=_STR, draft=flag, head=_BRANCH, base=_STR),
             self.open_change_request),
            ("add_issue_comment", f"Comment on this task's issue #{self.issue.number}.",
             _schema(["body"], body=text, number={"type": "integer"}), self.add_issue_comment),
        ]  # fmt: skip
        return [Tool(p + name, purpose, schema, fn) for name, purpose, schema, fn in reads] + [
            Tool(p + name, purpose, schema, fn, writes=True, paths=_COMMITTED.get(name))
            for name, purpose, schema, fn in writes
        ]


def _pushed_paths(args: dict[str, Any]) -> list[str]:
    files = args.get("files")
    entries = files if isinstance(files, list) else []
    return [e["path"] for e in entries if isinstance(e, dict) and isinstance(e.get("path"), str)]


# The repository paths each commit tool writes (the policy may want them approved).
_COMMITTED = {"create_or_update_file": arg_paths("path"), "push_files": _pushed_paths}


def forge_tools(
    forge: Forge,
    issue: IssueRef,
    *,
    branch: str,
    base_branch: str,
    max_file_bytes: int = 10 * 1024 * 1024,
    max_output_chars: int = 20_000,
    draft: bool = True,
    secrets: tuple[str, ...] = (),
    finish_comment: CommentFinisher,
    writers_only: IsBot | None = None,
) -> list[Tool]:
    """The forge API tools of one task; writes go only to ``branch``. A comment the
    agent posts goes out as ``finish_comment(text, seq)`` makes it: marked as the bot's
    own, fitted and redacted (the worker passes ``bot.comments.render.agent_comment``).

    ``writers_only``: a round's tools (``ForgeToolkit.writers_only``).

    Raises ``ValueError`` when ``branch`` is the base or the default branch: the
    bot's writes must never land there.
    """
    protected = {base_branch, issue.repo.default_branch or base_branch}
    if not branch or branch in protected:
        raise ValueError(f"the task branch {branch!r} must differ from {sorted(protected)}")
    toolkit = ForgeToolkit(
        forge,
        issue,
        branch,
        base_branch,
        finish_comment,
        max_file_bytes=max_file_bytes,
        max_output_chars=max_output_chars,
        draft=draft,
        secrets=secrets,
        writers_only=writers_only,
    )
    return toolkit.tools()
