"""The deep healthcheck's settings: its flags, then the BWSTACK_* env vars of docs/design.md, then the
defaults, resolved into one :class:`Config`; stdlib only (runs in the image with ``warmup.py``)."""

from __future__ import annotations

import argparse
import math
import os
from dataclasses import dataclass
from typing import NoReturn

from healthchecks import common, imagelayout, judging


class UsageError(Exception):
    """Bad healthcheck arguments (reported as an unhealthy line, never as exit 2)."""


@dataclass
class Config:
    """The resolved healthcheck settings (flags win over env vars)."""

    url: str
    timeout: float
    expect: dict[str, str]
    expect_text: str | None
    log: str
    api_key_file: str
    mode: str
    decode_every: float
    state_path: str
    stall_after: float = common.DEFAULT_HC_STALL_AFTER
    #: seconds a request may wait for its next token before it is ``hang`` (the profile's derived bound)
    hang_after: float = common.DEFAULT_HC_HANG_AFTER
    baseline: tuple[str, float] | None = None
    margin: float = judging.DEFAULT_MARGIN
    #: the long-context probe (healthchecks/longprobe.py): its calibrated ``repeat-N=SCORE``, its length
    #: (from that id, else --long-len, else the default window's), seconds between two runs
    long_baseline: tuple[str, float] | None = None
    long_len: int | None = None
    long_every: float = common.DEFAULT_HC_LONG_EVERY


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from exc
    if not value > 0 or math.isinf(value):
        raise argparse.ArgumentTypeError(f"must be a positive number: {text!r}")
    return value


def expect_pair(item: str) -> tuple[str, str]:
    """One ``--expect KEY=VALUE`` (the one grammar of the healthcheck and ``classify-log``): the key
    normalised (``--attention-backend`` and ``attention-backend`` are ``attention_backend``), the value
    stripped."""
    key, sep, value = item.partition("=")
    key = key.strip().replace("-", "_").lstrip("_")
    if not sep or not key or not value.strip():
        raise UsageError(f"--expect {item.strip()!r}: expected KEY=VALUE")
    return key, value.strip()


def parse_expect(items: list[str]) -> dict[str, str]:
    """Parse KEY=VALUE items (each may hold several, comma-separated) into a dict."""
    return dict(expect_pair(part) for item in items for part in item.split(",") if part.strip())


def parse_baseline(text: str) -> tuple[str, float] | None:
    """``PASSAGE_ID=SCORE`` (what ``bwstack calibrate`` recorded) -> (id, score); None when empty."""
    if not text.strip():
        return None
    passage, sep, score = text.strip().partition("=")
    try:
        value = float(score)
    except ValueError:
        value = math.nan
    if not sep or not passage or not math.isfinite(value) or value > 0:
        raise UsageError(f"--baseline wants PASSAGE_ID=SCORE (a logprob <= 0), got {text.strip()!r}")
    return passage, value


def parse_args(argv: list[str] | None) -> Config:
    """Flags first, then the BWSTACK_* env vars of docs/design.md, then the defaults."""
    env = common.env_or
    p = _Parser(prog="warmup.py", description="bwstack deep healthcheck for an SGLang server")
    p.add_argument("--url", default=env(common.ENV_HC_URL, common.DEFAULT_HC_URL))
    p.add_argument("--timeout", type=_positive, default=None, help="overall budget in seconds")
    p.add_argument("--expect", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--expect-text", default=None, help="substring the sampled completion must contain")
    p.add_argument("--log", default=env(common.ENV_LOG, imagelayout.SERVER_LOG))
    p.add_argument("--api-key-file", default=env(common.ENV_API_KEY_FILE, common.DEFAULT_API_KEY_FILE))
    p.add_argument("--mode", choices=("full", "light"), default=None)
    p.add_argument("--decode-every", type=_positive, default=None, help="light mode: seconds between decodes")
    p.add_argument("--state", default=env(common.ENV_HC_STATE, imagelayout.HC_STATE))
    p.add_argument(
        "--stall-after", type=_positive, default=None, help="seconds of an unchanged log while refused = dead"
    )
    p.add_argument(
        "--hang-after", type=_positive, default=None, help="seconds a streamed probe may wait for a token"
    )
    p.add_argument("--baseline", default=None, metavar="PASSAGE_ID=SCORE", help="calibrated passage score")
    p.add_argument("--margin", type=_positive, default=None, help="nats/token below the baseline = garbage")
    p.add_argument("--long-baseline", default=None, metavar="repeat-N=SCORE", help="calibrated long score")
    p.add_argument("--long-len", type=_positive, default=None, help="long-context probe length in tokens")
    p.add_argument("--long-every", type=_positive, default=None, help="seconds between long-context probes")
    args = p.parse_args(argv)
    timeout = args.timeout or _positive(env(common.ENV_HC_TIMEOUT, str(common.DEFAULT_HC_TIMEOUT)))
    decode_every = args.decode_every or _positive(
        env(common.ENV_HC_DECODE_EVERY, str(common.DEFAULT_HC_DECODE_EVERY))
    )
    stall_after = args.stall_after or _positive(
        env(common.ENV_HC_STALL_AFTER, str(common.DEFAULT_HC_STALL_AFTER))
    )
    hang_after = args.hang_after or _positive(
        env(common.ENV_HC_HANG_AFTER, str(common.DEFAULT_HC_HANG_AFTER))
    )
    mode = args.mode or env(common.ENV_HC_MODE, common.DEFAULT_HC_MODE)
    if mode not in ("full", "light"):
        raise UsageError(f"{common.ENV_HC_MODE} must be full or light, got {mode!r}")
    expect_items = args.expect or [os.environ.get(common.ENV_HC_EXPECT, "")]
    expect_text = args.expect_text
    if expect_text is None:
        expect_text = os.environ.get(common.ENV_HC_EXPECT_TEXT)
    baseline = parse_baseline(args.baseline if args.baseline is not None else env(common.ENV_HC_BASELINE, ""))
    margin = args.margin or _positive(env(common.ENV_HC_MARGIN, str(judging.DEFAULT_MARGIN)))
    long_baseline = parse_baseline(
        args.long_baseline if args.long_baseline is not None else env(common.ENV_HC_LONG_BASELINE, "")
    )
    long_len = args.long_len or float(env(common.ENV_HC_LONG_LEN, "0") or 0) or None
    long_every = args.long_every or _positive(
        env(common.ENV_HC_LONG_EVERY, str(common.DEFAULT_HC_LONG_EVERY))
    )
    return Config(
        long_baseline=long_baseline,
        long_len=int(long_len) if long_len else None,
        long_every=long_every,
        url=args.url,
        timeout=timeout,
        expect=parse_expect(expect_items),
        expect_text=expect_text or None,
        log=args.log,
        api_key_file=args.api_key_file,
        mode=mode,
        decode_every=decode_every,
        state_path=args.state,
        stall_after=stall_after,
        hang_after=hang_after,
        baseline=baseline,
        margin=margin,
    )
