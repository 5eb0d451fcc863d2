"""A change request merged into a repository, as ``bot eval mine`` reads it from a forge.

``Forge.list_merged_change_requests`` answers with these, most recently updated first;
``on_or_after`` is the date test both adapters apply for ``since``. Pure.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass

# Pages of 100 of a forge's list read at most for the merged change requests (GitHub lists
# closed pull requests, merged or not, so fewer may be merged).
MERGED_PAGES = 5


@dataclass(frozen=True, slots=True)
class MergedChangeRequest:
    """``merge_commit``: the commit the merge left on the base branch (a merge commit, or
    the squashed commit); its first parent is the base the change was merged onto."""

    number: int
    title: str
    body: str
    web_url: str
    merge_commit: str
    merged_at: str  # ISO 8601, as the forge wrote it


def on_or_after(stamp: str, since: str | None) -> bool:
    """Whether the forge's time ``stamp`` lies on or after the date ``since``
    (``YYYY-MM-DD``, UTC; None: any); a stamp that is no date is kept."""
    if since is None:
        return True
    try:
        moment = datetime.datetime.fromisoformat(stamp)
        start = datetime.datetime.fromisoformat(since)
    except ValueError:
        return True
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    if start.tzinfo is None:
        start = start.replace(tzinfo=datetime.UTC)
    return moment >= start
