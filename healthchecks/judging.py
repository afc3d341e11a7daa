"""How the healthcheck judges SGLang's answers, without any I/O; stdlib only (runs in the image).

``warmup.py`` asks the server; this module says what the answers mean: a verdict (:class:`Unhealthy`), the
effective config against ``--expect`` (values in the vocabulary's spelling), the sampled decode's logprobs
(finite, not the NaN sanitizer's sentinel, not degenerate) and the quality probe: the reference passage
scored by teacher forcing against its calibrated baseline.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

from healthchecks import vocabulary

#: the quality probe's reference passage (public domain: Lincoln, 1863); models know it by heart, so a working
#: model scores it high and garbage scores it low. Changing it changes PASSAGE_ID: recalibrate every model.
PASSAGE = (
    "Four score and seven years ago our fathers brought forth on this continent, a new nation, conceived in "
    "Liberty, and dedicated to the proposition that all men are created equal. Now we are engaged in a great "
    "civil war, testing whether that nation, or any nation so conceived and so dedicated, can long endure."
)
PASSAGE_ID = "gettysburg-" + hashlib.sha256(PASSAGE.encode()).hexdigest()[:8]
SENTINEL_LOGPROB = -1e29  # SGLANG_SANITIZE_NAN_LOGITS replaces NaN by -1e30
DEFAULT_MARGIN = 1.0  # nats/token a passage score may fall below its calibrated baseline
FLAT_SPREAD = 1e-4  # logprobs closer than this are "all equal"
FLAT_BELOW = -1.0  # ... and all equal below this (nats) means a flat (uniform) distribution
MIN_SCORED = 4  # fewer scored tokens than this: too few to judge a distribution
REPEAT_SPREAD = 1e-3  # one token sampled over and over with logprobs this close: a degenerate loop
#: the /server_info keys a healthy line sums up (the DSA decode backend under both of its names)
SUMMARY_KEYS = (
    "attention_backend",
    *vocabulary.KEY_ALIASES["dsa_decode_backend"],
    "kv_cache_dtype",
    "tp_size",
)


class Unhealthy(Exception):
    """A verdict: the class and a one-line reason."""

    def __init__(self, cls: str, reason: str, gone: bool = False) -> None:
        super().__init__(reason)
        self.cls = cls
        self.reason = reason
        self.gone = gone  # nothing answers on the port (refused, dropped, unreachable)


def same_value(requested: str, effective: Any) -> bool:
    a, b = vocabulary.semantic_value(requested), vocabulary.semantic_value(effective)
    if a == b:
        return True
    try:
        return float(a) == float(b)
    except ValueError:
        return False


def compare_expect(expect: dict[str, str], info: dict[str, Any]) -> list[str]:
    """One message per mismatch between requested and effective values."""
    problems = []
    for key, requested in sorted(expect.items()):
        names = vocabulary.KEY_ALIASES.get(key, (key,))
        found = [name for name in names if name in info]
        if not found:
            problems.append(f"{key}: requested {requested}, effective not reported by /server_info")
            continue
        effective = info[found[0]]
        if not same_value(requested, effective):
            via = "" if found[0] == key else f" (as {found[0]})"
            effective_text = vocabulary.semantic_value(effective)
            problems.append(f"{key}: requested {requested}, effective {effective_text}{via}")
    return problems


def config_summary(info: dict[str, Any]) -> str:
    """The healthy line's summary of the effective config (:data:`SUMMARY_KEYS`, then the SGLang version)."""
    parts = [f"{k}={vocabulary.semantic_value(info[k])}" for k in SUMMARY_KEYS if info.get(k) is not None]
    if "version" in info:
        parts.append(f"sglang {info['version']}")
    return " ".join(parts)


def finish(meta: dict[str, Any]) -> tuple[str, str]:
    reason = meta.get("finish_reason")
    if isinstance(reason, dict):
        return str(reason.get("type")), str(reason.get("message") or "")
    return str(reason), ""


def check_logprobs(meta: dict[str, Any]) -> float:
    entries = meta.get("output_token_logprobs")
    if not isinstance(entries, list) or not entries:
        raise Unhealthy("warmup_failed", "POST /generate: no meta_info.output_token_logprobs in the answer")
    lowest = math.inf
    for pos, entry in enumerate(entries):
        if not isinstance(entry, list) or not entry:
            raise Unhealthy("warmup_failed", f"POST /generate: malformed logprob entry {pos}: {entry!r}")
        value, token = entry[0], entry[1] if len(entry) > 1 else "?"
        where = f"output token {pos} (id {token})"
        lowest = min(lowest, finite_logprob(value, where, typed_where=f"POST /generate: {where}"))
    return lowest


def finite_logprob(value: Any, where: str, *, typed_where: str | None = None) -> float:
    """One logprob of SGLang's answer as a float; Unhealthy ``nan`` for null, inf/NaN or the sanitizer's
    sentinel, ``warmup_failed`` for a value that is no number (``typed_where`` names it then)."""
    if value is None:
        raise Unhealthy("nan", f"{where}: logprob null (NaN/inf serialized as null)")
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise Unhealthy("warmup_failed", f"{typed_where or where}: logprob is not a number: {value!r}")
    if not math.isfinite(value):
        raise Unhealthy("nan", f"{where}: logprob {value}")
    if value <= SENTINEL_LOGPROB:
        raise Unhealthy("nan", f"{where}: logprob {value:g} (NaN sanitized to a sentinel)")
    return float(value)


def degenerate_decode(entries: list[Any]) -> str | None:
    """Why a sampled decode (finite logprobs, checked before) is degenerate, or None.

    Baseline-free: every sampled token with one and the same logprob far below 0 is a flat distribution
    (e.g. SGLANG_SANITIZE_NAN_LOGITS turning NaN into uniform logits); one token id sampled over and over with
    logprobs that do not move is a loop (the classic ``!!!!!!!!`` of a broken kernel).
    """
    values = [float(e[0]) for e in entries]
    ids = [e[1] if len(e) > 1 else None for e in entries]
    if len(values) < MIN_SCORED:
        return None
    spread = max(values) - min(values)
    if spread <= FLAT_SPREAD and max(values) < FLAT_BELOW:
        return (
            f"sampled decode: all {len(values)} tokens have logprob {values[0]:.4f} "
            f"(= -ln {math.exp(-values[0]):.0f}: a flat distribution, the logits carry no information)"
        )
    if len(set(ids)) == 1 and spread <= REPEAT_SPREAD:
        return (
            f"sampled decode: token id {ids[0]} sampled {len(values)} times in a row with logprobs within "
            f"{spread:.1e} of each other (a degenerate loop)"
        )
    return None


def quality_payload() -> dict[str, Any]:
    """Teacher forcing: the passage as the prompt, logprobs of every prompt token, one greedy token."""
    return {
        "text": PASSAGE,
        "sampling_params": {"temperature": 0.0, "max_new_tokens": 1},
        "return_logprob": True,
        "logprob_start_len": 0,
    }


def passage_logprobs(meta: dict[str, Any]) -> list[float]:
    """The prompt tokens' logprobs after the first; [] when the server returned none to score.

    SGLang gives the first prompt token ``null`` (nothing precedes it); 0.5.23 returns ``[]`` without
    ``logprob_start_len``; 0.5.9 may return only the first entry. A later ``null`` / non-finite / sentinel
    value is NaN.
    """
    entries = meta.get("input_token_logprobs")
    if not isinstance(entries, list):
        return []
    values: list[float] = []
    for pos, entry in enumerate(entries):
        if not isinstance(entry, list) or not entry:
            raise Unhealthy(
                "warmup_failed", f"passage probe: malformed prompt logprob entry {pos}: {entry!r}"
            )
        value = entry[0]
        if pos == 0 and value is None:
            continue
        where = f"passage probe: prompt token {pos} (id {entry[1] if len(entry) > 1 else '?'})"
        values.append(finite_logprob(value, where))
    return values


def judge_passage(values: list[float], baseline: tuple[str, float] | None, margin: float) -> str:
    """The passage verdict: a summary when fine, Unhealthy('garbage') when not."""
    if not values:
        return "passage not scored (the server returned no prompt logprobs)"
    score = sum(values) / len(values)
    spread = max(values) - min(values)
    if len(values) >= MIN_SCORED and spread <= FLAT_SPREAD and max(values) < FLAT_BELOW:
        raise Unhealthy(
            "garbage",
            f"passage {PASSAGE_ID}: all {len(values)} prompt tokens have logprob {values[0]:.4f} "
            f"(= -ln {math.exp(-values[0]):.0f}: a flat distribution, the logits carry no information)",
        )
    summary = f"passage {PASSAGE_ID} score {score:.3f} nats/token over {len(values)} tokens"
    if baseline is None:
        return f"{summary} (no calibrated baseline)"
    passage, expected = baseline
    if passage != PASSAGE_ID:
        return f"{summary} (baseline is for passage {passage}, not this one: recalibrate)"
    floor = expected - margin
    if score < floor:
        raise Unhealthy(
            "garbage",
            f"passage {PASSAGE_ID} score {score:.3f} nats/token over {len(values)} tokens, below the "
            f"calibrated baseline {expected:.3f} - margin {margin:g} = {floor:.3f} (finite but wrong output)",
        )
    return f"{summary} (baseline {expected:.3f}, margin {margin:g})"
