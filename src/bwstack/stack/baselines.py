"""The quality probe's calibrated baselines: ``baselines.json`` beside profiles.yaml, one passage score per
model (committed and reviewed like a pin). ``launch`` renders a baseline into every profile's healthcheck
environment; ``bwstack calibrate`` (:mod:`bwstack.host.calibrate`) measures and writes it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bwstack.errors import UserError
from bwstack.stack.schema import Stack
from healthchecks import common, judging, longprobe

BASELINES_FILE = "baselines.json"
SCHEMA = "bwstack.baselines/1"


@dataclass(frozen=True)
class Baseline:
    """A calibrated passage score for one model."""

    passage: str
    score: float
    margin: float
    tokens: int
    profile: str
    sglang: str
    calibrated: str
    #: the long-context probe's id (``repeat-N``) and score, recorded beside the passage's
    long: tuple[str, float] | None = None
    #: the long probe's prefill speed in tokens/s (its length over its wall time), for the hang bound
    prefill_tok_s: float | None = None

    def env(self) -> dict[str, str]:
        """What the rendered container passes to warmup.py (and serve.py's readiness probe)."""
        out = {
            common.ENV_HC_BASELINE: f"{self.passage}={self.score:.4f}",
            common.ENV_HC_MARGIN: f"{self.margin:g}",
        }
        if self.long is not None:
            out[common.ENV_HC_LONG_BASELINE] = f"{self.long[0]}={self.long[1]:.4f}"
        return out


def baselines_path(stack: Stack) -> Path:
    return stack.root / BASELINES_FILE


def load_file(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {"schema": SCHEMA, "models": {}}
    except (OSError, ValueError) as exc:
        raise UserError(f"not readable JSON: {exc}", file=path) from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA or not isinstance(data.get("models"), dict):
        raise UserError(f"expected an object with schema {SCHEMA!r} and a 'models' mapping", file=path)
    return data


def load_baseline(stack: Stack, profile: str | None = None) -> Baseline | None:
    """The baseline of ``profile``'s model (its ``model_path``, else the stack's model) for the healthcheck's
    current passage; None when not calibrated. A baseline belongs to a model, not to a stack: a CPU stack
    serves several tiny models."""
    path = baselines_path(stack)
    model = stack.model_path_for(profile) if profile is not None else stack.model.path
    entries = load_file(path)["models"].get(model, {})
    entry = entries.get(judging.PASSAGE_ID)
    if entry is None:
        return None
    long, speed = _long_entry(entries)
    where = f"models.{model}.{judging.PASSAGE_ID}"
    try:
        baseline = Baseline(
            passage=judging.PASSAGE_ID,
            score=float(entry["score"]),
            margin=float(entry["margin"]),
            tokens=int(entry["tokens"]),
            profile=str(entry["profile"]),
            sglang=str(entry.get("sglang", "")),
            calibrated=str(entry.get("calibrated", "")),
            long=long,
            prefill_tok_s=speed,
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise UserError(
            f"malformed baseline ({exc}); valid: score, margin, tokens, profile", file=path, field=where
        ) from None
    if not baseline.score <= 0 or not baseline.margin > 0:
        raise UserError("score must be a logprob <= 0 and margin > 0", file=path, field=where)
    return baseline


def _long_entry(entries: dict[str, Any]) -> tuple[tuple[str, float] | None, float | None]:
    """The long probe's recorded (id, score), the longest when several lengths were calibrated, and its
    prefill speed (tokens/s) when recorded."""
    found = [(longprobe.length_of(k) or 0, k, v) for k, v in entries.items() if longprobe.length_of(k)]
    if not found:
        return None, None
    _length, key, value = max(found, key=lambda item: item[0])
    try:
        long = key, float(value["score"])
    except (KeyError, TypeError, ValueError):
        return None, None
    speed = value.get("prefill_tok_s")
    ok = isinstance(speed, int | float) and not isinstance(speed, bool) and 0 < speed < 1e9
    return long, float(speed) if ok else None


def describe(stack: Stack) -> str:
    """One line for ``list`` / ``up``: which quality checks the healthcheck runs."""
    baseline = load_baseline(stack)
    if baseline is None:
        return (
            f"quality baseline: none for {stack.model.path} (passage {judging.PASSAGE_ID}): only the "
            "baseline-free checks run (flat or looping logprobs); record one with 'bwstack calibrate "
            "PROFILE'"
            " on a known-good server"
        )
    line = (
        f"quality baseline: passage {baseline.passage} scores {baseline.score:.3f} nats/token on "
        f"{stack.model.path} (calibrated on {baseline.profile}); "
        f"below {baseline.score - baseline.margin:.3f} is garbage"
    )
    if baseline.long is not None:
        line += f"; long context {baseline.long[0]} {baseline.long[1]:.3f} nats/token"
    return line
