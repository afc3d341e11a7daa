"""The comparison's prompt set: generated from a fixed seed, never downloaded; stdlib only.

Each prompt is a block of seeded random token ids followed by the same block again (the long probe's shape,
``healthchecks/longprobe.py``): the second copy is the *shared continuation* both servers are teacher-forced
through, and a model predicts it only by attending back half the prompt. Lengths run from short to past the
sparse window (``index_topk``, default 2048), so a difference that appears only at long range shows as prompts
whose copy distance exceeds some length. Token ids are drawn from the range every byte-level BPE vocabulary
has. One more prompt is text: the quality probe's reference passage (``healthchecks.judging.PASSAGE``),
scored from its second token, where a model trained on text is confident (a near-uniform distribution, as on
random ids for a model that cannot copy, hides a drift that a peaked one shows).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from healthchecks import judging, longprobe

#: the prompt set's seed; a prompt's own seed is SEED + its index
SEED = 39
#: short prompt lengths (tokens); the long ones come from the window (:func:`lengths_for`)
SHORT_LENGTHS = (64, 256)
#: prompts per length (different seeds)
PER_LENGTH = 2


@dataclass(frozen=True)
class Prompt:
    """One prompt: its id (``copy-<length>-<n>``), token ids, and the first position of the continuation;
    or text (the server's tokenizer makes the ids, both sides the same when they serve one tokenizer)."""

    id: str
    ids: tuple[int, ...]
    start: int
    text: str | None = None

    @property
    def length(self) -> int:
        return len(self.ids) if self.text is None else 0

    @property
    def distance(self) -> int:
        """How far back the continuation's source lies (the block's length)."""
        return self.start


def lengths_for(window: int | None, context: int | None) -> list[int]:
    """Short lengths, half the window, and the long probe's length past it; each capped by the context."""
    window = window or longprobe.DEFAULT_WINDOW
    wanted = [*SHORT_LENGTHS, window // 2, longprobe.length_for(window, context)]
    cap = (context - 8) if context else None
    out: list[int] = []
    for wish in wanted:
        length = max(longprobe.MIN_LENGTH, min(wish, cap) if cap else wish)
        if length not in out:
            out.append(length)
    return out


def prompt_set(window: int | None, context: int | None, per_length: int = PER_LENGTH) -> list[Prompt]:
    """The passage, then the seeded copy prompts for a model with this sparse window and served context
    length."""
    out: list[Prompt] = [Prompt("passage", (), 1, judging.PASSAGE)]
    for length in lengths_for(window, context):
        for n in range(per_length):
            rng = random.Random(SEED * 1000 + length * 10 + n)
            half = length // 2
            block = [rng.randrange(longprobe.ID_LOW, longprobe.ID_HIGH) for _ in range(length - half)]
            out.append(Prompt(f"copy-{length}-{n}", tuple(block + block[:half]), length - half))
    return out
