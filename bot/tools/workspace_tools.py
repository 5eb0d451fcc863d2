"""The workspace tools: files, search, diff, commands and the quality gate, on the clone.

Every handler first makes sure the clone exists (``Workspace.ensure``), works only
inside it (``resolve_inside``: no ``..``, no absolute paths elsewhere, no links out,
no ``.git``), refuses files over the size limit, and returns ``ToolResult.fail`` with
a reason for every expected failure. Commands run in the sandbox as argv lists,
never through a shell string. Committing, pushing and opening the change request
belong to the coordinator's finalisation, not to tools.

The handlers of one workspace take turns: the file tools run as the bot, outside the
sandbox, and a command running at the same time could swap a checked directory for a
symbolic link to /etc between the check and the write. When no command runs, nothing
but the tools changes the clone (the sandbox leaves no process behind).
"""

from __future__ import annotations

import asyncio
import functools
import os
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bot import offload
from bot.paths import PathRefused
from bot.sandbox.gitcmd import WorkspaceError
from bot.sandbox.sandbox import (
    CommandRefused,
    CommandResult,
    Sandbox,
    SandboxUnavailable,
    WorkspaceFull,
)
from bot.sandbox.workspace import Workspace, content_digest
from bot.text import clip, omitted_note
from bot.tools import file_ops, file_search
from bot.tools.file_ops import FileOpError, Limits
from bot.tools.policy import repo_path
from bot.tools.quality import (
    GateResult,
    QualityCommands,
    detect_commands,
    run_quality_gate,
)
from bot.tools.registry import Tool, ToolResult, arg_paths

_PATH = {"type": "string", "minLength": 1, "description": "path relative to the workspace root"}
_DIR = {"type": "string", "description": "directory relative to the workspace root (default .)"}
_LINE = {"type": "integer", "minimum": 1}
_GLOBS = {"type": "array", "items": {"type": "string", "minLength": 1}}
_FLAG = {"type": "boolean"}
_ARGV = {"type": "array", "items": {"type": "string"}, "minItems": 1,
         "description": "the program and its arguments, e.g. [\"pytest\", \"-q\"]"}  # fmt: skip

Args = dict[str, Any]

COMMAND_GRACE = 10.0  # seconds a sandboxed command's call gets beyond sandbox.timeout


def _schema(required: list[str], **props: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": required,
            "additionalProperties": False}  # fmt: skip


Handler = Callable[[Args], Awaitable[ToolResult]]


def _guarded(ws: Workspace, fn: Handler, turn: asyncio.Lock) -> Handler:
    """Ensure the clone, take the workspace's turn, and turn expected failures into
    failed results."""

    @functools.wraps(fn)
    async def handler(args: Args) -> ToolResult:
        try:
            await ws.ensure()
            async with turn:
                return await fn(args)
        except (PathRefused, FileOpError, WorkspaceError) as exc:
            return ToolResult.fail(str(exc))
        except (CommandRefused, SandboxUnavailable, WorkspaceFull) as exc:
            return ToolResult.fail(str(exc))
        except ValueError as exc:  # the sandbox refusing an argv or a directory
            return ToolResult.fail(f"refused: {exc}")
        except FileNotFoundError as exc:
            return ToolResult.fail(f"no such file or directory: {exc.filename}")
        except OSError as exc:
            return ToolResult.fail(f"{exc.strerror or exc}: {exc.filename or ''}".rstrip(": "))

    return handler


def format_command(result: CommandResult, limit: int, *, kept_as: str = "") -> str:
    """What the agent reads of a command: its status and output, cut to ``limit``; a
    timed-out command's tail (where it stopped) rather than both ends. ``kept_as``: the
    name of the file in the run directory that holds the whole output."""
    status = "timed out (killed)" if result.timed_out else f"exit code {result.exit_code}"
    text = f"{status} after {result.duration:.1f} s\n"
    if result.stdout:
        text += f"--- stdout ---\n{result.stdout}\n"
    if result.stderr:
        text += f"--- stderr ---\n{result.stderr}\n"
    if result.timed_out:
        text = clip(text, limit, keep="tail", note="[... {n} characters before this ...]\n")
    else:
        text = clip(text, limit, keep="both", note=omitted_note())
    if kept_as:
        text += f"(the whole output is kept in the run directory as {kept_as})\n"
    return text


class CommandLogs:
    """Where the whole output of the task's commands goes: ``<folder>/NNN-<program>.log``
    in the run directory, kept only when the agent saw less than all of it (a command that
    timed out or printed more than ``sandbox.max_output_chars``)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._next = 0

    async def new_path(self, argv: list[str]) -> Path:
        if self._next == 0:  # a resumed task goes on after the logs of its earlier runs
            self._next = len(await asyncio.to_thread(_listing, self.folder)) + 1
        number, self._next = self._next, self._next + 1
        program = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(argv[0]).name)[:40] or "command"
        return self.folder / f"{number:03d}-{program}.log"

    def keep(self, path: Path, result: CommandResult) -> str:
        """The name to show for a kept log; "" after removing one nobody needs."""
        if result.timed_out or result.clipped:
            return f"{self.folder.name}/{path.name}"
        path.unlink(missing_ok=True)
        return ""


def _listing(folder: Path) -> list[str]:
    return os.listdir(folder) if folder.is_dir() else []


def workspace_tools(
    ws: Workspace,
    sandbox: Sandbox,
    *,
    max_output_chars: int,
    quality_commands: QualityCommands | None = None,
    quality_timeout: float | None = None,
    guarded: Callable[[list[str]], list[str]] | None = None,
    command_logs: Path | None = None,
) -> list[Tool]:
    """The tools of one task's workspace. ``quality_commands`` overrides detection (a
    repository's ``.agent.yaml``); ``quality_timeout`` defaults to the sandbox timeout;
    ``guarded`` picks the paths whose push needs approval (CI definitions): a command
    that changes one is told so (the push waits for a person, docs/planning.md);
    ``command_logs``: the run directory's folder for commands' whole output."""
    limits = Limits(max_file_bytes=ws.max_file_bytes, max_output_chars=max_output_chars)
    root = ws.path
    network = "network allowed" if sandbox.network else "no network"
    logs = CommandLogs(command_logs) if command_logs is not None else None

    def written(text: str, *paths: str) -> ToolResult:
        """A write's result, with what each written path holds now (an approved write
        approves exactly that content: docs/planning.md#tool-policy)."""
        held = {repo_path(p): content_digest(root, repo_path(p)) for p in paths}
        return ToolResult.success(text, changed=True, digests=held)

    def capped(text: str, *, hint: str = "", changed: bool = False) -> ToolResult:
        text = clip(text, max_output_chars, keep="both", note=omitted_note(hint))
        return ToolResult.success(text, changed=changed)

    async def list_directory(args: Args) -> ToolResult:
        text = await offload.run(file_ops.list_directory, root, args.get("path", "."),
                                       recursive=args.get("recursive", False))  # fmt: skip
        return capped(text, hint="list a subdirectory")

    async def read_file(args: Args) -> ToolResult:
        text = await offload.run(file_ops.read_lines, root, args["path"], limits,
                                       args.get("start_line"), args.get("end_line"))  # fmt: skip
        return ToolResult.success(text)

    async def read_many_files(args: Args) -> ToolResult:
        text = await offload.run(functools.partial(
            file_search.read_many, root, args["paths"], limits, include=args.get("include"),
            exclude=args.get("exclude"), recursive=args.get("recursive", True),
            default_excludes=args.get("use_default_excludes", True)))  # fmt: skip
        return capped(text)

    async def write_file(args: Args) -> ToolResult:
        text = await offload.run(file_ops.write_text, root, args["path"],
                                       args["content"], limits.max_file_bytes)  # fmt: skip
        return written(text, args["path"])

    async def replace_in_file(args: Args) -> ToolResult:
        text = await offload.run(functools.partial(
            file_ops.replace_text, root, args["path"], args["old_text"], args["new_text"],
            replace_all=args.get("replace_all", False),
            max_bytes=limits.max_file_bytes))  # fmt: skip
        return written(text, args["path"])

    async def move_path(args: Args) -> ToolResult:
        text = await offload.run(functools.partial(
            file_ops.move_path, root, args["source"], args["destination"],
            overwrite=args.get("overwrite", False)))  # fmt: skip
        return written(text, args["source"], args["destination"])

    async def delete_file(args: Args) -> ToolResult:
        text = await offload.run(file_ops.delete_path, root, args["path"])
        return written(text, args["path"])

    async def create_directory(args: Args) -> ToolResult:
        text = await offload.run(file_ops.make_directory, root, args["path"])
        return written(text, args["path"])

    async def search_files(args: Args) -> ToolResult:
        text = await offload.run(functools.partial(
            file_search.search, root, args["pattern"], limits, path=args.get("path", "."),
            glob=args.get("glob"), ignore_case=args.get("ignore_case", False),
            max_hits=args.get("max_hits", 200)))  # fmt: skip
        return capped(text, hint="narrow the search with path or glob")

    async def git_diff(args: Args) -> ToolResult:
        text = await ws.diff(stat=args.get("stat", False))
        return capped(text or "no changes", hint="see single files with read_file")

    async def run_command(args: Args) -> ToolResult:
        cwd = ws.resolve(args.get("cwd", "."))
        timeout = min(float(args.get("timeout", sandbox.settings.timeout)),
                      float(sandbox.settings.timeout))  # fmt: skip
        before = guarded(await ws.changed_files()) if guarded else []
        log_path = await logs.new_path(args["argv"]) if logs else None
        result = await sandbox.run(
            args["argv"], cwd=cwd, writable=root, timeout=timeout, log_path=log_path
        )
        kept_as = logs.keep(log_path, result) if logs and log_path else ""
        text = format_command(result, max_output_chars, kept_as=kept_as)
        touched = sorted(set(guarded(await ws.changed_files())) - set(before)) if guarded else []
        if touched:
            text += (
                f"\nNote: this command changed CI definitions ({', '.join(touched)}); "
                "they are pushed only after a person approves them.\n"
            )
        ok = result.exit_code == 0 and not result.timed_out
        data = {"exit_code": result.exit_code, "timed_out": result.timed_out}
        return ToolResult(ok=ok, output=text, data=data, changed=True)

    async def quality_gate(args: Args) -> ToolResult:
        commands = quality_commands or detect_commands(root)
        timeout = quality_timeout or float(sandbox.settings.timeout)
        report = await run_quality_gate(root, sandbox, commands, timeout=timeout)
        output = clip(report.feedback, max_output_chars, keep="both", note=omitted_note())
        # "no checks configured" is not a failure of the call (and never reported as a pass)
        ok = report.result is not GateResult.FAILED
        return ToolResult(ok=ok, output=output, data=report.to_dict())

    specs: list[tuple[str, str, dict[str, Any], bool, Handler]] = [
        ("list_directory", "List a directory of the workspace (recursive optional).",
         _schema([], path=_DIR, recursive=_FLAG), False, list_directory),
        ("read_file", "Read a text file, optionally only lines start_line..end_line.",
         _schema(["path"], path=_PATH, start_line=_LINE, end_line=_LINE), False, read_file),
        ("read_many_files", "Read several files by path, directory or glob (binary skipped).",
         _schema(["paths"], paths={**_GLOBS, "minItems": 1}, include=_GLOBS, exclude=_GLOBS,
                 recursive=_FLAG, use_default_excludes=_FLAG), False, read_many_files),
        ("write_file", "Create or overwrite a file with the given content.",
         _schema(["path", "content"], path=_PATH, content={"type": "string"}), True, write_file),
        ("replace_in_file", "Replace an exact, unique piece of text in a file.",
         _schema(["path", "old_text", "new_text"], path=_PATH, old_text={"type": "string"},
                 new_text={"type": "string"}, replace_all=_FLAG), True, replace_in_file),
        ("move_path", "Move or rename a file or directory.",
         _schema(["source", "destination"], source=_PATH, destination=_PATH, overwrite=_FLAG),
         True, move_path),
        ("delete_file", "Delete a file (or an empty directory).",
         _schema(["path"], path=_PATH), True, delete_file),
        ("create_directory", "Create a directory (and its parents).",
         _schema(["path"], path=_PATH), True, create_directory),
        ("search_files", "Search file contents with a regular expression; path:line hits.",
         _schema(["pattern"], pattern={"type": "string", "minLength": 1}, path=_DIR,
                 glob={"type": "string"}, ignore_case=_FLAG,
                 max_hits={"type": "integer", "minimum": 1, "maximum": 1000}),
         False, search_files),
        ("git_diff", "Show the changes made so far (new files included).",
         _schema([], stat=_FLAG), False, git_diff),
        ("run_command", "Run a command (argv list, no shell) in the sandbox; " + network + ".",
         _schema(["argv"], argv=_ARGV, cwd=_DIR,
                 timeout={"type": "number", "exclusiveMinimum": 0}), True, run_command),
        ("run_quality_gate", "Run the project's lint, then its tests if lint passes.",
         _schema([]), True, quality_gate),
    ]  # fmt: skip
    turn = asyncio.Lock()
    # A command runs up to sandbox.timeout (it reports its own time-out, output kept); the
    # gate runs two of them. A little more, for the sandbox to start and to clean up.
    command = float(sandbox.settings.timeout) + COMMAND_GRACE
    gate_step = (quality_timeout or float(sandbox.settings.timeout)) + COMMAND_GRACE
    own_time = {"run_command": command, "run_quality_gate": 2 * gate_step}
    return [
        Tool(name, purpose, schema, handler=_guarded(ws, fn, turn), writes=writes,
             paths=WRITTEN_PATHS.get(name), min_timeout=own_time.get(name, 0.0))
        for name, purpose, schema, writes, fn in specs
    ]  # fmt: skip


# The repository paths each file tool writes (the policy may want them approved).
WRITTEN_PATHS = {
    "write_file": arg_paths("path"),
    "replace_in_file": arg_paths("path"),
    "move_path": arg_paths("source", "destination"),
    "delete_file": arg_paths("path"),
    "create_directory": arg_paths("path"),
}
