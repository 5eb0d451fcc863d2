"""How alike two texts are: the plan cache's "similar task" (docs/planning.md#plan-cache).

Pure. ``difflib``'s ratio of two texts of n and m characters can take time in n * m (about
1.2 s for two texts of 7,500 characters of common words), so the cache asks
``most_similar`` in an offload worker process, never on the event loop; and each
candidate is first measured by ``difflib``'s two cheap upper bounds of the ratio (by
length, then by the characters both hold): one below the threshold cannot reach it.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence


def similarity(a: str, b: str) -> float:
    return difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()


def most_similar(text: str, others: Sequence[str], threshold: float) -> tuple[int, float] | None:
    """The index and ratio of the first of ``others`` most like ``text``, if at least
    ``threshold``."""
    best: tuple[int, float] | None = None
    for index, other in enumerate(others):
        matcher = difflib.SequenceMatcher(None, text, other, autojunk=False)
        if matcher.real_quick_ratio() < threshold or matcher.quick_ratio() < threshold:
            continue  # upper bounds of the ratio
        score = matcher.ratio()
        if score >= threshold and (best is None or score > best[1]):
            best = (index, score)
    return best
