"""What to try next after a profile failed: the nearest profile worth trying on the same GPU arch, and why.

Derived from the failure class (the one catalog, ``healthchecks/signatures/__init__.py``), the profiles'
expectations and the rules engine's predictions (:func:`bwstack.know.rules.predict`):

1. Candidates are the other profiles that are expected healthy *and* predicted healthy on the arch, and that
   are not known to fail there: a verdict already recorded for them (a sweep's results so far) that is not
   ``healthy`` rules them out.
2. A class points at the profile fields that cause it (:data:`FIELDS_FOR_CLASS`; e.g. ``nan`` and
   ``assertion`` at the KV cache dtype, then the attention backend; ``unsupported_arch`` at the attention and
   DSA backends, whose kernels are arch-specific). Candidates that change such a field come first; among
   them the fewest changed backend fields (as the profiles write them, so the answer does not depend on a
   local explain cache; another image variant counts as one more change), then the most implicated field,
   then profiles.yaml order.
3. The reason names the class, the fields that change (old -> new), the failed profile's matching rule and
   its fix when the rules know it, and the candidate's prediction.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from bwstack.know import rules
from bwstack.know.evidence import profile_words
from bwstack.stack.schema import Stack
from healthchecks import vocabulary

_DSA_BACKENDS = ("attention_backend", *vocabulary.DSA_SIDES)

#: failure class -> the profile fields whose change addresses it, most implicated first
FIELDS_FOR_CLASS: dict[str, tuple[str, ...]] = {
    "nan": ("kv_cache_dtype", "attention_backend"),
    "assertion": ("kv_cache_dtype", "attention_backend"),
    "device_assert": ("kv_cache_dtype", "attention_backend"),
    "unsupported_arch": _DSA_BACKENDS,
    "no_kernel_image": vocabulary.KERNEL_FIELDS,
    "shared_memory": _DSA_BACKENDS,
    "illegal_memory": vocabulary.KERNEL_FIELDS,
    "backend_override": ("kv_cache_dtype", *_DSA_BACKENDS),
}


@dataclass(frozen=True)
class Suggestion:
    """The next profile to try after ``failed`` hit ``cls`` on ``arch`` (``profile`` None: nothing to try)."""

    failed: str
    cls: str
    arch: str
    profile: str | None
    why: str

    def to_json(self) -> dict[str, Any]:
        return {"profile": self.profile, "why": self.why}

    def line(self) -> str:
        """One line for the terminal."""
        if self.profile is None:
            return f"next to try: nothing: {self.why}"
        return f"next to try: {self.profile}: {self.why}"


def _config(stack: Stack, name: str, arch: str) -> tuple[dict[str, str | None], Any]:
    """The profile's backend fields as written (stable: not what a local explain cache resolved) and its
    prediction on ``arch``."""

    if arch == CPU:  # the rules and predictions are about GPU archs: on the CPU stack, expect alone decides
        return stack.profile(name).backends(), _NO_PREDICTION
    return stack.profile(name).backends(), rules.predict(stack, name, arch)


CPU = "cpu"
_NO_PREDICTION = SimpleNamespace(verdict="healthy", decision=SimpleNamespace(rule=None, fix=None))


def _changed(a: Mapping[str, str | None], b: Mapping[str, str | None]) -> list[str]:
    """Backend fields that differ; the DSA sub-backends only count where one side runs DSA attention."""
    dsa = "dsa" in (a.get("attention_backend"), b.get("attention_backend"))
    return [
        k
        for k in vocabulary.BACKEND_FIELDS
        if a.get(k) != b.get(k) and (dsa or k not in vocabulary.DSA_SIDES)
    ]


def suggest(
    stack: Stack,
    failed: str,
    cls: str,
    *,
    arch: str | None = None,
    verdicts: Mapping[str, str] | None = None,
) -> Suggestion:
    """The next profile worth trying after ``failed`` ended with class ``cls`` (see the module docstring)."""
    arch = arch or (CPU if stack.is_cpu else stack.arch_for(failed))
    verdicts = verdicts or {}
    failed_eff, failed_pred = _config(stack, failed, arch)
    implicated = FIELDS_FOR_CLASS.get(cls, ())
    ranked: list[tuple[tuple[int, int, int, int], str, list[str], Any]] = []
    passed_over = 0
    for order, (name, profile) in enumerate(stack.profiles.items()):
        if name == failed:
            continue
        if profile.expect != "healthy" or verdicts.get(name, "healthy") != "healthy":
            passed_over += 1
            continue
        eff, pred = _config(stack, name, arch)
        if pred.verdict != "healthy":
            passed_over += 1
            continue
        changed = _changed(failed_eff, eff)
        hits = [implicated.index(k) for k in changed if k in implicated]
        other_variant = int(stack.variant_name_for(name) != stack.variant_name_for(failed))
        key = (0 if hits or not implicated else 1, len(changed) + other_variant, min(hits, default=0), order)
        ranked.append((key, name, changed, pred))
    if not ranked:
        return Suggestion(
            failed,
            cls,
            arch,
            None,
            f"no other profile is expected and predicted healthy on {arch} "
            f"({passed_over} known or predicted to fail)",
        )
    _, name, changed, pred = min(ranked)
    eff, _ = _config(stack, name, arch)
    shown = [k for k in changed if k in implicated] or changed[:3]
    moves = ", ".join(f"{k} {failed_eff.get(k) or 'default'} -> {eff.get(k) or 'default'}" for k in shown)
    if len(changed) > len(shown):
        moves += f" (and {len(changed) - len(shown)} other field(s))"
    parts = [f"{cls} on {arch}"]
    if implicated:
        parts[0] += f" points at {' / '.join(implicated[:2])}"
    parts.append(f"it changes {moves}" if moves else "same backends")
    if stack.variant_name_for(name) != stack.variant_name_for(failed):
        parts.append(f"on image variant {stack.variant_name_for(name)}")
    decision = failed_pred.decision
    if decision.rule and failed_pred.verdict == cls and decision.fix:
        parts.append(f"rule {decision.rule}: {decision.fix}")
    parts.append(
        "expected healthy on the CPU" if arch == CPU else f"expected and predicted healthy on {arch}"
    )

    seen = profile_words(stack, name)
    if seen:
        parts.append(seen)
    return Suggestion(failed, cls, arch, name, "; ".join(parts))
