"""The figures of a run and of two runs side by side. Pure."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

Z95 = 1.959963984540054  # the normal quantile of a two-sided 95% interval


def wilson(successes: int, total: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a rate (better than the normal one for small samples
    and rates near 0 or 1); (0, 1) when there is no sample."""
    if total <= 0:
        return 0.0, 1.0
    rate = successes / total
    denominator = 1 + z * z / total
    centre = (rate + z * z / (2 * total)) / denominator
    half = z * math.sqrt(rate * (1 - rate) / total + z * z / (4 * total * total)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values)) if values else 0.0


@dataclass(frozen=True)
class Paired:
    """B's resolved rate minus A's on the tasks both ran, with a 95% interval."""

    tasks: int
    only_a: int  # resolved in A and not in B
    only_b: int
    difference: float
    low: float
    high: float


def paired_difference(a: Sequence[bool], b: Sequence[bool], z: float = Z95) -> Paired:
    """The paired difference of two runs' outcomes on the same tasks (``a[i]`` and ``b[i]``
    are one task): the mean of ``b - a`` with the interval of a paired difference of
    proportions (Newcombe's method 10, from the two runs' Wilson intervals and the
    correlation of the pairs), which stays within [-1, 1] and is sound for small samples."""
    n = len(a)
    if n == 0 or n != len(b):
        return Paired(n, 0, 0, 0.0, -1.0, 1.0)
    only_a = sum(1 for x, y in zip(a, b, strict=True) if x and not y)
    only_b = sum(1 for x, y in zip(a, b, strict=True) if y and not x)
    both = sum(1 for x, y in zip(a, b, strict=True) if x and y)
    neither = n - only_a - only_b - both
    pa, pb = (both + only_a) / n, (both + only_b) / n
    la, ua = wilson(both + only_a, n, z)
    lb, ub = wilson(both + only_b, n, z)
    difference = pb - pa
    phi = _phi(both, only_a, only_b, neither, n)
    low_sq = (pb - lb) ** 2 - 2 * phi * (pb - lb) * (ua - pa) + (ua - pa) ** 2
    high_sq = (ub - pb) ** 2 - 2 * phi * (ub - pb) * (pa - la) + (pa - la) ** 2
    low = difference - math.sqrt(max(0.0, low_sq))
    high = difference + math.sqrt(max(0.0, high_sq))
    return Paired(n, only_a, only_b, difference, max(-1.0, low), min(1.0, high))


def _phi(both: int, only_a: int, only_b: int, neither: int, n: int) -> float:
    """The correlation of the pairs, its numerator corrected by n/2 towards 0 when
    positive (0 when a margin is empty), as Newcombe sets it."""
    row_a, row_not_a = both + only_a, only_b + neither
    col_b, col_not_b = both + only_b, only_a + neither
    product = row_a * row_not_a * col_b * col_not_b
    if product == 0:
        return 0.0
    numerator = float(both * neither - only_a * only_b)
    if numerator > 0:
        numerator = max(numerator - n / 2, 0.0)
    return numerator / math.sqrt(product)
