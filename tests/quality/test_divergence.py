"""The comparison's math on distributions worked out by hand (docs/compare.md)."""

from __future__ import annotations

import math

import pytest

from bwstack.quality import divergence


def lp(*probs: tuple[int, float]) -> dict[int, float]:
    return {token: math.log(p) for token, p in probs}


def test_identical_lists_have_zero_divergence_and_agree() -> None:
    p = lp((5, 0.7), (9, 0.2))
    assert divergence.kl(p, dict(p)) == 0.0
    assert divergence.top1(p) == 5


def test_kl_of_two_fully_listed_distributions_is_the_textbook_value() -> None:
    # 0.5 ln(0.5/0.9) + 0.5 ln(0.5/0.1) = 0.5108 nats
    got = divergence.kl(lp((1, 0.5), (2, 0.5)), lp((1, 0.9), (2, 0.1)))
    assert got == pytest.approx(0.51083, abs=1e-4)


def test_a_token_one_side_did_not_list_gets_its_share_of_that_sides_rest() -> None:
    # P lists 1: .6, 2: .3 (rest .1); Q lists 1: .6, 3: .3. On P, token 3 gets min(.3, .1/2) = .05 and the rest
    # bucket .05; likewise token 2 on Q. KL = .3 ln(.3/.05) + .05 ln(.05/.3) = .25 ln 6 = 0.44794
    got = divergence.kl(lp((1, 0.6), (2, 0.3)), lp((1, 0.6), (3, 0.3)))
    assert got == pytest.approx(0.25 * math.log(6), abs=1e-6)


def test_an_unlisted_token_never_gets_more_than_the_smallest_listed_one() -> None:
    # P lists 1: .5, 2: .01 (rest .49); Q lists 1: .5, 3: .3. On P, token 3 gets min(.01, .49/2) = .01
    p, q = lp((1, 0.5), (2, 0.01)), lp((1, 0.5), (3, 0.3))
    assert divergence._masses(p, [1, 2, 3])[2] == pytest.approx(0.01)
    assert divergence.kl(p, q) > 0


def test_top1_breaks_a_tie_on_the_smaller_id() -> None:
    assert divergence.top1(lp((7, 0.4), (3, 0.4))) == 3
    assert divergence.top1({}) is None


def test_p99_is_the_nearest_rank() -> None:
    assert divergence.percentile([float(v) for v in range(1, 101)], 99) == 99.0
    assert divergence.percentile([float(v) for v in range(1, 11)], 99) == 10.0
    assert divergence.percentile([], 99) == 0.0


def test_a_prompt_is_compared_on_the_positions_both_sides_scored() -> None:
    same = lp((4, 0.9), (8, 0.1))
    other = lp((8, 0.9), (4, 0.1))
    a = [(10, math.log(0.9), same), (11, math.log(0.9), same), (12, math.log(0.9), same)]
    b = [(11, math.log(0.9), same), (12, math.log(0.1), other)]
    stats = divergence.compare_prompt("p", 13, 10, a, b)
    assert stats.positions == [11, 12]
    assert stats.agree == [True, False]
    assert stats.kls[0] == 0.0
    # 0.9 ln 9 + 0.1 ln(1/9) = 0.8 ln 9
    assert stats.kls[1] == pytest.approx(0.8 * math.log(9), abs=1e-6)
    assert stats.first_over(0.1) == 12
    assert stats.score_b == pytest.approx((math.log(0.9) + math.log(0.1)) / 2)
    summary = divergence.summarize([stats])
    assert (summary.positions, summary.top1) == (2, 0.5)
    assert summary.mean_kl == pytest.approx(0.4 * math.log(9), abs=1e-6)
