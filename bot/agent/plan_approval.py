"""Which plan an approval binds (docs/planning.md#waiting). Pure.

In plan-approval mode (the task was started with ``/agent plan``, or
``planning.revision.require_human_approval`` holds for revised plans) a plan runs only
when a person approved exactly that plan: the approval request keeps the digest of the
plan document it showed, an approval stores that digest, and the loop compares it with
the digest of the plan about to run. A revision makes a new digest, so it needs its own
approval. ``/agent approve <plan id>`` may name the plan (its first ``SHOWN_CHARS`` hex
digits or more); a name that is not the waiting plan's approves nothing.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

SHOWN_CHARS = 10
_PLAN_ID = re.compile(r"[0-9a-f]{6,64}")


def plan_digest(document: dict[str, Any]) -> str:
    """SHA-256 of the plan document in a canonical JSON form."""
    canonical = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def plan_id(digest: str) -> str:
    """The short id people see and may quote."""
    return digest[:SHOWN_CHARS]


def named_plan(args: str) -> str | None:
    """The plan id an ``/agent approve`` names, if its first word looks like one."""
    words = args.split()
    if not words:
        return None
    word = words[0].strip("`").lower()
    return word if _PLAN_ID.fullmatch(word) else None


def names_other_plan(args: str, digest: str) -> bool:
    """``/agent approve <id>`` for a plan that is not ``digest`` (an older one)."""
    named = named_plan(args)
    return named is not None and bool(digest) and not digest.startswith(named)


def needs_plan_approval(*, plan_only: bool, require_for_revisions: bool, revised: bool) -> bool:
    return plan_only or (require_for_revisions and revised)


def stale_text(authors: list[str], what: str) -> str:
    """What the bot says about approvals sent before it asked to approve ``what`` (or,
    with ``what`` empty, while it waited for no approval)."""
    named = ", ".join(sorted({f"@{a}" for a in authors if a})) or "someone"
    if not what:
        return (
            f"The approval by {named} came while I waited for no approval, so it approves "
            "nothing; I ask again whenever a plan or a call needs your approval."
        )
    return (
        f"The approval by {named} was sent before I asked to approve {what}, so it does not "
        "approve it. Read the request above and approve again if it is right."
    )


def other_plan_text(author: str, args: str, digest: str, what: str) -> str:
    """What the bot says when ``/agent approve <id>`` names a plan that is not waiting."""
    named = named_plan(args) or args
    return (
        f"@{author} approved plan `{named}`, but the plan waiting now is `{plan_id(digest)}` "
        f"({what}): it is not approved. Read it above and approve it if it is right."
    )
