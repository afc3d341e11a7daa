"""The long-context probe: scoring past the sparse-attention window, without any I/O; stdlib only.

DSA models (GLM-5, DeepSeek-V3.2) run their sparse path only once a prompt is longer than the indexer's
top-k (``index_topk`` in the model config, 2048 for both); a short probe never reaches it. This probe is one
prompt longer than that window: a block of seeded random token ids followed by the same block again. A
model can predict the second copy only by attending back half the prompt (an induction/copy lookup), so the
mean logprob of the second copy's tokens (teacher forcing, one prefill) is high on a working server and
falls to about ``-ln(vocab)`` when attention past some length is broken. The score is judged like the short
passage: below the calibrated baseline - margin is ``garbage``, with the length in the reason. The probe's
id names its length (``repeat-2304``): a baseline is only compared with the same prompt.
"""

from __future__ import annotations

import random
import re
from typing import Any

from healthchecks.judging import Unhealthy, passage_logprobs

#: the sparse window when the model config names none (``index_topk`` of GLM-5 and DeepSeek-V3.2)
DEFAULT_WINDOW = 2048
#: tokens past the window the prompt reaches (the second copy then starts well inside the sparse range)
PAST_WINDOW = 256
SEED = 23
#: token ids are drawn from [16, 256): inside every byte-level BPE vocabulary
ID_LOW, ID_HIGH = 16, 256
MIN_LENGTH = 16
ID_PREFIX = "repeat-"


def length_for(window: int | None, context: int | None) -> int:
    """The probe's prompt length: past the window, capped by the context length (minus room to answer)."""
    length = (window or DEFAULT_WINDOW) + PAST_WINDOW
    if context:
        length = min(length, context - 8)
    return max(MIN_LENGTH, length)


def probe_id(length: int) -> str:
    return f"{ID_PREFIX}{length}"


def length_of(probe: str) -> int | None:
    """The length a probe id names, or None."""
    if not probe.startswith(ID_PREFIX) or not probe[len(ID_PREFIX) :].isdigit():
        return None
    return int(probe[len(ID_PREFIX) :])


def prompt(length: int) -> tuple[list[int], int]:
    """The token ids (a block, then the block again) and where the scored second copy starts."""
    half = length // 2
    rng = random.Random(SEED)
    block = [rng.randrange(ID_LOW, ID_HIGH) for _ in range(length - half)]
    return block + block[:half], length - half


def payload(length: int) -> dict[str, Any]:
    """Teacher forcing over the second copy: its prompt logprobs, one greedy token."""
    ids, start = prompt(length)
    return {
        "input_ids": ids,
        "sampling_params": {"temperature": 0.0, "max_new_tokens": 1},
        "return_logprob": True,
        "logprob_start_len": start,
    }


def scores(meta: dict[str, Any]) -> list[float]:
    """The second copy's prompt logprobs (non-finite ones raise ``nan``)."""
    return passage_logprobs(meta)


def judge(values: list[float], length: int, baseline: tuple[str, float] | None, margin: float) -> str:
    """The long probe's verdict: a summary when fine, Unhealthy('garbage') below baseline - margin."""
    if not values:
        return f"long context ({length} tokens) not scored (no prompt logprobs)"
    score = sum(values) / len(values)
    summary = f"long context ({length} tokens) score {score:.3f} nats/token over {len(values)} tokens"
    if baseline is None:
        return f"{summary} (no calibrated baseline)"
    probe, expected = baseline
    if probe != probe_id(length):
        return f"{summary} (baseline is for {probe}, not this prompt: recalibrate)"
    floor = expected - margin
    if score < floor:
        raise Unhealthy(
            "garbage",
            f"long context ({length} tokens): score {score:.3f} nats/token over {len(values)} tokens, below "
            f"the calibrated baseline {expected:.3f} - margin {margin:g} = {floor:.3f} (attention past the "
            f"sparse window is broken)",
        )
    return f"{summary} (baseline {expected:.3f}, margin {margin:g})"


_SHORT = re.compile(r"passage \S+ score (-?\d+(?:\.\d+)?) nats/token")
_LONG = re.compile(r"long context \((\d+) tokens\) score (-?\d+(?:\.\d+)?) nats/token")


def scores_in(line: str) -> dict[str, Any]:
    """The short (passage) and long-context scores a healthy line reports: ``short``, ``long``,
    ``long_tokens`` (each None when the line has none)."""
    short, long = _SHORT.search(line), _LONG.search(line)
    return {
        "short": float(short.group(1)) if short else None,
        "long": float(long.group(2)) if long else None,
        "long_tokens": int(long.group(1)) if long else None,
    }
