"""``bwstack calibrate PROFILE``: record the quality probe's baseline for the stack's model.

The probe (``healthchecks/warmup.py``) scores a fixed reference passage by teacher forcing: the mean logprob
of its tokens. What a working server scores depends on the model, so the score of a known-good server is
recorded per model and passage in ``baselines.json`` beside profiles.yaml (committed and reviewed like any
pin; written atomically). ``bwstack render`` passes it to the healthcheck of every profile serving that model
(``BWSTACK_HC_BASELINE`` / ``BWSTACK_HC_MARGIN``); a later score below ``baseline - margin`` is ``garbage``.
Without a baseline only the baseline-free checks run (flat or looping logprobs), and ``list``/``up`` say so.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bwstack.errors import ExternalError, UserError
from bwstack.files import atomic_write
from bwstack.stack.schema import Stack
from healthchecks import common, judging, settings, warmup

BASELINES_FILE = "baselines.json"
SCHEMA = "bwstack.baselines/1"
DEFAULT_TIMEOUT = 120.0


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

    def env(self) -> dict[str, str]:
        """What the rendered container passes to warmup.py (and serve.py's readiness probe)."""
        return {
            common.ENV_HC_BASELINE: f"{self.passage}={self.score:.4f}",
            common.ENV_HC_MARGIN: f"{self.margin:g}",
        }


def baselines_path(stack: Stack) -> Path:
    return stack.root / BASELINES_FILE


def _load(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {"schema": SCHEMA, "models": {}}
    except (OSError, ValueError) as exc:
        raise UserError(f"not readable JSON: {exc}", file=path) from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA or not isinstance(data.get("models"), dict):
        raise UserError(f"expected an object with schema {SCHEMA!r} and a 'models' mapping", file=path)
    return data


def load_baseline(stack: Stack) -> Baseline | None:
    """The baseline of the stack's model for the healthcheck's current passage; None when not calibrated."""
    path = baselines_path(stack)
    entry = _load(path)["models"].get(stack.model.path, {}).get(judging.PASSAGE_ID)
    if entry is None:
        return None
    where = f"models.{stack.model.path}.{judging.PASSAGE_ID}"
    try:
        baseline = Baseline(
            passage=judging.PASSAGE_ID,
            score=float(entry["score"]),
            margin=float(entry["margin"]),
            tokens=int(entry["tokens"]),
            profile=str(entry["profile"]),
            sglang=str(entry.get("sglang", "")),
            calibrated=str(entry.get("calibrated", "")),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise UserError(
            f"malformed baseline ({exc}); valid: score, margin, tokens, profile", file=path, field=where
        ) from None
    if not baseline.score <= 0 or not baseline.margin > 0:
        raise UserError("score must be a logprob <= 0 and margin > 0", file=path, field=where)
    return baseline


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
    return (
        f"quality baseline: passage {baseline.passage} scores {baseline.score:.3f} nats/token on "
        f"{stack.model.path} (calibrated on {baseline.profile}); "
        f"below {baseline.score - baseline.margin:.3f} is garbage"
    )


def measure(url: str, *, timeout: float = DEFAULT_TIMEOUT, api_key: str | None = None) -> dict[str, Any]:
    """Probe a running server: liveness, a sampled decode, the passage score. ExternalError when unfit."""
    cfg = settings.Config(
        url=url,
        timeout=timeout,
        expect={},
        expect_text=None,
        log="",
        api_key_file="",
        mode="full",
        decode_every=1.0,
        state_path="",
    )
    run = warmup.Run(
        cfg=cfg, deadline=time.monotonic() + timeout, api_key=api_key, state={"healthy_once": True}
    )
    try:
        dead = warmup.check_liveness(run)
        if dead is not None:
            raise dead
        info = warmup.fetch_server_info(run)
        warmup.check_decode(run)
        values, _meta = warmup.score_passage(run)
        judging.judge_passage(values, None, judging.DEFAULT_MARGIN)  # a flat passage is no baseline
    except judging.Unhealthy as exc:
        raise ExternalError(
            f"the server at {url} is not fit to calibrate on: {exc.cls}: {exc.reason}"
        ) from None
    except (warmup.Refused, warmup.Dropped, warmup.Unreachable, warmup.DeadlineExceeded) as exc:
        raise ExternalError(f"the server at {url} did not answer: {type(exc).__name__} {exc}") from None
    except settings.UsageError as exc:
        raise UserError(str(exc), field="--url") from None
    if not values:
        raise ExternalError(
            f"the server at {url} returned no prompt logprobs for the passage: cannot calibrate"
        )
    return {
        "score": sum(values) / len(values),
        "tokens": len(values),
        "sglang": str(info.get("version", "")),
        "model_path": str(info.get("model_path", "")),
    }


def calibrate(
    stack: Stack, profile: str, *, url: str | None = None, margin: float = judging.DEFAULT_MARGIN
) -> tuple[Baseline, Path]:
    """Measure the passage score of the running server and record it for the stack's model."""
    stack.profile(profile)
    if not margin > 0:
        raise UserError("must be > 0", field="--margin")
    target = url or f"http://127.0.0.1:{stack.settings.port}"
    found = measure(target)
    if found["model_path"] and found["model_path"] != stack.model.path:
        raise UserError(
            f"the server at {target} serves {found['model_path']}, not this stack's model {stack.model.path}",
            file=stack.path,
            line=stack.line_of("model", "path"),
            field="model.path",
        )
    baseline = Baseline(
        passage=judging.PASSAGE_ID,
        score=round(found["score"], 4),
        margin=margin,
        tokens=found["tokens"],
        profile=profile,
        sglang=found["sglang"],
        calibrated=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    )
    path = baselines_path(stack)
    data = _load(path)
    entry = {k: v for k, v in baseline.__dict__.items() if k != "passage"}
    data["models"].setdefault(stack.model.path, {})[judging.PASSAGE_ID] = entry

    atomic_write(path, json.dumps(data, indent=2, sort_keys=True) + "\n")
    return baseline, path
