"""``bwstack calibrate PROFILE``: measure the quality probe's passage score on a known-good server and record
it for the stack's model (:mod:`bwstack.stack.baselines` holds the file and its reading)."""

from __future__ import annotations

import json
import socket
import time
import urllib.parse
from pathlib import Path
from typing import Any

from bwstack import launch
from bwstack.errors import ExternalError, UserError
from bwstack.files import atomic_write
from bwstack.host import netwait, secretfiles
from bwstack.stack import baselines, modelconfig
from bwstack.stack.schema import Stack
from healthchecks import judging, longprobe, probehttp, settings, warmup

DEFAULT_TIMEOUT = 120.0


def measure(
    url: str, *, timeout: float = DEFAULT_TIMEOUT, api_key: str | None = None, window: int | None = None
) -> dict[str, Any]:
    """Probe a running server: liveness, a sampled decode, the passage score, the long-context score past
    ``window`` (the model's sparse window; default :data:`longprobe.DEFAULT_WINDOW`). ExternalError when
    unfit."""
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
    run = probehttp.Run(
        cfg=cfg, deadline=time.monotonic() + timeout, api_key=api_key, state={"healthy_once": True}
    )
    _answers(url, timeout)

    def probe() -> tuple[dict[str, Any], list[float], int, list[float]]:
        dead = warmup.check_liveness(run)
        if dead is not None:
            raise dead
        info = warmup.fetch_server_info(run)
        warmup.check_decode(run)
        values, _meta = warmup.score_passage(run)
        judging.judge_passage(values, None, judging.DEFAULT_MARGIN)  # a flat passage is no baseline
        length = longprobe.length_for(window, warmup.context_length(run))
        started = time.monotonic()
        long_values = warmup.score_long(run, length)
        speeds.append(length / max(time.monotonic() - started, 1e-3))
        return info, values, length, long_values

    speeds: list[float] = []  # the long probe's prefill speed (one prefill of `length` tokens)
    try:  # the budget holds as a wall clock: a server that trickles bytes cannot stretch it
        info, values, length, long_values = netwait.within(timeout + 1.0, probe)
    except netwait.TooSlow:
        raise ExternalError(f"the server at {url} did not answer within the {timeout:g}s budget") from None
    except judging.Unhealthy as exc:
        raise ExternalError(
            f"the server at {url} is not fit to calibrate on: {exc.cls}: {exc.reason}"
        ) from None
    except (probehttp.Refused, probehttp.Dropped, probehttp.Unreachable, probehttp.DeadlineExceeded) as exc:
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
        "long": (longprobe.probe_id(length), sum(long_values) / len(long_values), len(long_values))
        if long_values
        else None,
        "prefill_tok_s": round(speeds[-1], 1) if speeds else None,
        "sglang": str(info.get("version", "")),
        "model_path": str(info.get("model_path", "")),
    }


def _answers(url: str, timeout: float) -> None:
    """ExternalError when nothing listens at ``url`` (refused, unresolvable): the server was never there,
    which the probes would otherwise read as a server gone after a healthy pass."""
    parts = urllib.parse.urlsplit(url)
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise UserError("not a URL with a valid port", field="--url") from None
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", port), timeout=min(timeout, 10.0)):
            pass
    except OSError as exc:
        why = exc.strerror or type(exc).__name__
        raise ExternalError(
            f"nothing answers at {url} ({why}): start the known-good server first, or pass --url"
        ) from None


def calibrate(
    stack: Stack, profile: str, *, url: str | None = None, margin: float = judging.DEFAULT_MARGIN
) -> tuple[baselines.Baseline, Path]:
    """Measure the passage score of the running server and record it for the stack's model."""
    stack.profile(profile)
    if not margin > 0:
        raise UserError("must be > 0", field="--margin")
    target = url or f"http://127.0.0.1:{stack.settings.port}"
    api_key = secretfiles.api_key(stack)  # a key-protected server
    found = measure(target, window=modelconfig.sparse_window(stack), api_key=api_key)
    model = stack.model_path_for(profile)
    served = {model, launch.model_path_in_container(stack, profile)}  # a tiny model: its path in the image
    if found["model_path"] and found["model_path"] not in served:
        raise UserError(
            f"the server at {target} serves {found['model_path']}, not profile {profile}'s model {model}",
            file=stack.path,
            line=stack.line_of("model", "path"),
            field="model.path",
        )
    baseline = baselines.Baseline(
        passage=judging.PASSAGE_ID,
        score=round(found["score"], 4),
        margin=margin,
        tokens=found["tokens"],
        profile=profile,
        sglang=found["sglang"],
        calibrated=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        long=(found["long"][0], round(found["long"][1], 4)) if found["long"] else None,
        prefill_tok_s=found["prefill_tok_s"],
    )
    path = baselines.baselines_path(stack)
    data = baselines.load_file(path)
    entry = {k: v for k, v in baseline.__dict__.items() if k not in ("passage", "long", "prefill_tok_s")}
    models = data["models"].setdefault(model, {})
    models[judging.PASSAGE_ID] = entry
    if found["long"]:
        long_id, long_score, long_tokens = found["long"]
        models[long_id] = {**entry, "score": round(long_score, 4), "tokens": long_tokens}
        if baseline.prefill_tok_s:  # the hang bound's prefill speed (bwstack.stack.hangbound)
            models[long_id]["prefill_tok_s"] = baseline.prefill_tok_s

    atomic_write(path, json.dumps(data, indent=2, sort_keys=True) + "\n")
    return baseline, path
