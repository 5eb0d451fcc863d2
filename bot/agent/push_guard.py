"""CI definitions in the push wait for a person (docs/planning.md#tool-policy).

A pushed CI definition (``planning.security.require_approval_paths``: GitHub workflows
and actions, ``.gitlab-ci.yml``, ...) runs with the repository's CI secrets. Writing one
with a file tool already waits for approval; this is the check that covers every other
way: before the push, every guarded path the push would change (the working tree against
the commit the remote has, so commands and local commits count) must hold exactly the
content a person approved (``AgentState.approved_paths``). What is not approved is shown,
with its diff, and waits for ``/agent approve``.
"""

from __future__ import annotations

import asyncio

from bot.agent.approval_text import MAX_SHOWN_CHARS, code_fence, plain
from bot.agent.runlog import RunLog
from bot.text import clip
from bot.tools.factory import BuiltTools
from bot.tools.workspace import content_digest


async def unapproved_paths(built: BuiltTools, approved: dict[str, str]) -> dict[str, str]:
    """Guarded paths in the push whose content nobody approved: path -> content digest."""
    pushed = await built.workspace.paths_to_push()
    guarded = built.policy.policy.guarded_paths(pushed)
    root = built.workspace.path
    held = {p: await asyncio.to_thread(content_digest, root, p) for p in guarded}
    return {p: d for p, d in held.items() if approved.get(p) != d}


async def push_approval_text(built: BuiltTools, paths: list[str], runlog: RunLog) -> str:
    """The request: the paths and their diff (saved whole to the run directory when long)."""
    diff = runlog.redact(await built.workspace.push_diff(paths))
    lines = [
        "These CI definitions would be pushed to the branch "
        f"`{plain(built.branch)}`, where CI runs them with the repository's secrets:",
        "",
        *(f"- `{plain(p)}`" for p in paths),
        "",
        code_fence(clip(diff, MAX_SHOWN_CHARS, note="\n…"), "diff"),
    ]
    if len(diff) > MAX_SHOWN_CHARS:
        saved = runlog.save_arguments("push", {"paths": paths, "diff": diff})
        where = f" in `{saved}`" if saved else " in the run directory"
        lines += ["", f"The diff is cut; the whole diff is{where}. Read it before you approve."]
    return "\n".join(lines)
