"""The stand-in's environment interface: which SGLang it imitates, on which GPU arch, with which fault.

Variables (all optional):

- ``BWSTACK_STANDIN_ARGS``: parser snapshot path (default ``/opt/bwstack/sglang-args.json``).
- ``BWSTACK_STANDIN_SGLANG_VERSION``: imitate this version (default: the snapshot's ``sglang_version``).
- ``BWSTACK_STANDIN_ARCH``: ``sm120`` (default), ``sm100``, ``sm90`` (also ``sm121``, ``sm103``).
- ``BWSTACK_STANDIN_FAULT``: one of :data:`FAULTS` (default ``none``).
- ``BWSTACK_STANDIN_LOAD_SECONDS``: simulated weight-load time (default 2; 30 for ``slow_start``).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

from healthchecks import imagelayout

DEFAULT_ARGS_PATH = imagelayout.PARSER_SNAPSHOT
DEFAULT_ARCH = "sm120"
DEFAULT_LOAD_SECONDS = 2.0
SLOW_START_LOAD_SECONDS = 30.0

#: every fault the stand-in can inject, in the order the docs list them
FAULTS: tuple[str, ...] = (
    "none",
    "nan",
    "device_assert",
    "assertion",
    "unsupported_arch",
    "oom",
    "hang",
    "slow_start",
    "override",
    "garbage",
)


class EnvError(ValueError):
    """A stand-in environment variable has a value the stand-in does not know (exit status 2)."""


@dataclass(frozen=True)
class StandinEnv:
    """The stand-in settings read from the environment."""

    args_path: str
    version_override: str
    arch: str
    fault: str
    load_seconds: float

    @property
    def capability(self) -> tuple[int, int]:
        """The compute capability ``torch.cuda.get_device_capability()`` would report."""
        return arch_capability(self.arch)


def arch_capability(arch: str) -> tuple[int, int]:
    """``sm120`` -> ``(12, 0)``; ``sm90`` -> ``(9, 0)``; ``sm103`` -> ``(10, 3)``."""
    match = re.fullmatch(r"sm_?(\d+)(\d)", arch.strip().lower())
    if match is None:
        raise EnvError(f"BWSTACK_STANDIN_ARCH: {arch!r} is not a GPU arch like sm120, sm100 or sm90")
    return int(match.group(1)), int(match.group(2))


def read_env(environ: Mapping[str, str] | None = None) -> StandinEnv:
    """Read and check every stand-in variable; EnvError names the variable and the valid values."""
    env = os.environ if environ is None else environ
    fault = env.get("BWSTACK_STANDIN_FAULT", "none").strip() or "none"
    if fault not in FAULTS:
        raise EnvError(f"BWSTACK_STANDIN_FAULT: unknown fault {fault!r}; valid: {', '.join(FAULTS)}")
    arch = env.get("BWSTACK_STANDIN_ARCH", DEFAULT_ARCH).strip() or DEFAULT_ARCH
    arch_capability(arch)
    return StandinEnv(
        args_path=env.get("BWSTACK_STANDIN_ARGS", "").strip() or DEFAULT_ARGS_PATH,
        version_override=env.get("BWSTACK_STANDIN_SGLANG_VERSION", "").strip(),
        arch=arch.lower(),
        fault=fault,
        load_seconds=_load_seconds(env.get("BWSTACK_STANDIN_LOAD_SECONDS"), fault),
    )


def _load_seconds(raw: str | None, fault: str) -> float:
    default = SLOW_START_LOAD_SECONDS if fault == "slow_start" else DEFAULT_LOAD_SECONDS
    if raw is None or not raw.strip():
        return default
    try:
        value = float(raw)
    except ValueError:
        raise EnvError(f"BWSTACK_STANDIN_LOAD_SECONDS: {raw!r} is not a number of seconds") from None
    if value < 0 or math.isnan(value):
        raise EnvError(f"BWSTACK_STANDIN_LOAD_SECONDS: {raw!r} must be zero or more")
    return value
