"""The needle task: retrieval scored as accuracy (not as a logprob) at lengths around and past the sparse
window. Pure construction and scoring; stdlib only (``compare`` sends the prompts).

A prompt is seeded random token ids (the haystack) with a needle inside it: a key of :data:`KEY_LEN` ids and
then the value id; the prompt ends with the key again, and the right answer is the value as the greedy next
token (one prefill, one token). The key's last pair occurs nowhere else in the haystack, so the lookup is
unique for any model that copies by what followed the same context (an induction lookup, which every causal LM
does in context). Needles sit at evenly spread depths, so at a length past a broken window only the needles
further back than the window fail: the accuracy then falls with the length.
"""

from __future__ import annotations

import functools
import itertools
import random
from dataclasses import dataclass

from healthchecks import longprobe

SEED = 3939
#: needles per length (depths evenly spread over the haystack)
NEEDLES = 8
KEY_LEN = 4


@dataclass(frozen=True)
class Needle:
    """One retrieval prompt: token ids, the value the next token must be, and how far back the needle is."""

    ids: tuple[int, ...]
    answer: int
    distance: int


def lengths_for(window: int | None, context: int | None) -> list[int]:
    """Half the window, the window, twice the window (capped by the served context, deduplicated)."""
    window = window or longprobe.DEFAULT_WINDOW
    out: list[int] = []
    for wish in (window // 2, window, 2 * window):
        length = min(wish, context - 8) if context else wish
        if length >= 4 * KEY_LEN and length not in out:
            out.append(length)
    return out


def needles(length: int, count: int = NEEDLES) -> list[Needle]:
    """``count`` needle prompts of ``length`` tokens, the needle at depth (i + 1/2) / count of the
    haystack."""
    out: list[Needle] = []
    for i in range(count):
        rng = random.Random(SEED * 100_000 + length * 10 + i)
        draw = functools.partial(rng.randrange, longprobe.ID_LOW, longprobe.ID_HIGH)
        key = [draw() for _ in range(KEY_LEN)]
        while key[-2] == key[-1] or (key[-2], key[-1]) in itertools.pairwise(key[:-1]):  # the pair once
            key = [draw() for _ in range(KEY_LEN)]
        hay_len = length - KEY_LEN
        at = min(int((i + 0.5) / count * (hay_len - KEY_LEN - 1)), hay_len - KEY_LEN - 1)
        ids = [draw() for _ in range(hay_len)] + key
        ids[at : at + KEY_LEN + 1] = [*key, draw()]
        fixed = set(range(at, at + KEY_LEN + 1)) | set(range(hay_len, length))
        pair = (key[-2], key[-1])
        j = 1
        while j < length:  # the key's last pair only at the needle and at the end: redraw haystack ids
            if (ids[j - 1], ids[j]) == pair and j not in (at + KEY_LEN - 1, length - 1):
                ids[j if j not in fixed else j - 1] = draw()
                j = max(1, j - 1)
                continue
            j += 1
        out.append(Needle(tuple(ids), ids[at + KEY_LEN], length - (at + KEY_LEN)))
    return out


@dataclass(frozen=True)
class Accuracy:
    """Retrieval at one length: needles right out of needles asked."""

    length: int
    right: int
    asked: int

    @property
    def accuracy(self) -> float:
        return self.right / self.asked if self.asked else 0.0


def score(length: int, answers: list[tuple[Needle, int | None]]) -> Accuracy:
    """The accuracy at ``length`` from (needle, the server's greedy next token) pairs."""
    return Accuracy(length, sum(1 for needle, got in answers if got == needle.answer), len(answers))
