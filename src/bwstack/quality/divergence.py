"""The comparison's math, pure: KL divergence between two servers' top-k logprobs at one position, top-1
agreement, percentiles, and the summary over a prompt set. No I/O; stdlib only.

A server returns only its top-k logprobs per position, so the KL divergence is computed on a coarsened
distribution: the union ``U`` of both sides' top-k token ids plus one "rest" bucket holding the remaining
mass. A token in ``U`` that one side did not list gets, on that side, its share of that side's unlisted mass,
never more than the smallest logprob it did list (it ranked below those). By the data-processing inequality
the KL of a coarsened distribution is a lower bound of the full one: a large value is a real difference; a
small one says the top of the distributions agree (which is what sampling and greedy decoding read).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

#: mass below which a bucket counts as empty (keeps log() finite; 1e-10 nats of error at most per bucket)
FLOOR = 1e-10

TopK = Mapping[int, float]  # token id -> logprob


def _masses(side: TopK, union: Sequence[int]) -> list[float]:
    """The side's probability of each id of ``union`` and, last, of the rest bucket (sums to 1)."""
    listed = {t: math.exp(lp) for t, lp in side.items()}
    known = min(sum(listed.values()), 1.0)
    missing = [t for t in union if t not in listed]
    share = 0.0
    if missing:
        cap = min(listed.values()) if listed else 1.0
        share = min(cap, (1.0 - known) / (len(missing) + 1))
    out = [listed.get(t, share) for t in union]
    out.append(max(1.0 - sum(out), 0.0))
    total = sum(out)
    return [max(m / total, FLOOR) for m in out]


def kl(p: TopK, q: TopK) -> float:
    """KL(P || Q) in nats over the union of both top-k lists and a rest bucket (a lower bound of the full
    KL)."""
    union = sorted(set(p) | set(q))
    pm, qm = _masses(p, union), _masses(q, union)
    return max(sum(a * math.log(a / b) for a, b in zip(pm, qm, strict=True)), 0.0)


def top1(side: TopK) -> int | None:
    """The most likely token id (the smaller id on a tie); None for an empty list."""
    return min(side, key=lambda t: (-side[t], t)) if side else None


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank percentile ``q`` (0-100) of ``values``; 0.0 for none."""
    if not values:
        return 0.0
    ranked = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ranked)))
    return ranked[rank - 1]


@dataclass
class PromptStats:
    """One prompt's comparison: per-position KL, top-1 agreement, both sides' mean logprob of the
    continuation tokens (the teacher-forced score)."""

    id: str
    length: int
    distance: int
    kls: list[float] = field(default_factory=list)
    agree: list[bool] = field(default_factory=list)
    score_a: float = 0.0
    score_b: float = 0.0
    #: the prompt position of each scored entry (so a divergence can be located)
    positions: list[int] = field(default_factory=list)

    @property
    def mean_kl(self) -> float:
        return sum(self.kls) / len(self.kls) if self.kls else 0.0

    @property
    def top1(self) -> float:
        return sum(self.agree) / len(self.agree) if self.agree else 1.0

    def first_over(self, limit: float) -> int | None:
        """The first prompt position whose KL exceeds ``limit``, or None."""
        return next((pos for pos, value in zip(self.positions, self.kls, strict=True) if value > limit), None)


def compare_prompt(
    prompt_id: str,
    length: int,
    distance: int,
    a: Sequence[tuple[int, float, TopK]],
    b: Sequence[tuple[int, float, TopK]],
) -> PromptStats:
    """Compare the positions both sides scored: each entry is (position, the token's logprob, top-k)."""
    b_at = {pos: (lp, top) for pos, lp, top in b}
    stats = PromptStats(prompt_id, length, distance)
    scores_a: list[float] = []
    scores_b: list[float] = []
    for pos, lp_a, top_a in a:
        if pos not in b_at:
            continue
        lp_b, top_b = b_at[pos]
        stats.positions.append(pos)
        stats.kls.append(kl(top_a, top_b))
        stats.agree.append(top1(top_a) == top1(top_b))
        scores_a.append(lp_a)
        scores_b.append(lp_b)
    if scores_a:
        stats.score_a = sum(scores_a) / len(scores_a)
        stats.score_b = sum(scores_b) / len(scores_b)
    return stats


@dataclass(frozen=True)
class Summary:
    """The prompt set's comparison: mean and p99 of every position's KL, top-1 agreement over positions."""

    positions: int
    mean_kl: float
    p99_kl: float
    max_kl: float
    top1: float


def summarize(prompts: Iterable[PromptStats]) -> Summary:
    kls: list[float] = []
    agree: list[bool] = []
    for stats in prompts:
        kls.extend(stats.kls)
        agree.extend(stats.agree)
    return Summary(
        positions=len(kls),
        mean_kl=sum(kls) / len(kls) if kls else 0.0,
        p99_kl=percentile(kls, 99),
        max_kl=max(kls, default=0.0),
        top1=sum(agree) / len(agree) if agree else 1.0,
    )
