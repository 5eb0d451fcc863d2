"""The figures: Wilson's interval and the paired difference of two runs."""

from __future__ import annotations

import pytest

from bot.eval.stats import paired_difference, wilson


def test_wilson_interval_against_known_values() -> None:
    assert wilson(0, 10) == pytest.approx((0.0, 0.2775), abs=1e-4)
    assert wilson(10, 10) == pytest.approx((0.7225, 1.0), abs=1e-4)
    assert wilson(5, 10) == pytest.approx((0.2366, 0.7634), abs=1e-4)
    assert wilson(0, 0) == (0.0, 1.0)


def test_the_paired_difference_and_its_interval() -> None:
    a = [True] * 8 + [False] * 2  # B also resolves one task A did not
    b = [True] * 8 + [True, False]
    paired = paired_difference(a, b)
    assert (paired.tasks, paired.only_a, paired.only_b) == (10, 0, 1)
    assert paired.difference == pytest.approx(0.1)
    assert (paired.low, paired.high) == pytest.approx((-0.2021, 0.4000), abs=1e-4)
    same = paired_difference(a, a)
    assert same.difference == 0.0 and same.low == pytest.approx(-same.high)
    worse = paired_difference([True] * 6, [False] * 6)
    assert (worse.difference, worse.low) == (-1.0, -1.0)
    assert worse.high == pytest.approx(-0.4480, abs=1e-4)  # all lost: clearly worse
    assert paired_difference([], []).tasks == 0
