"""No reload storms: a verdict that a restart cannot heal is remembered per launch spec; stdlib only.

A deterministic failure (NaN, an assert, an unsupported arch, a backend override ...) fails the same way after
every restart, and each restart of a GLM-5 server reloads 371 GB (10-30 min). So when the serve wrapper stops
or loses its server on such a verdict, it writes it to the JIT volume (:data:`DIR`, it survives restarts and
container re-creates) under the digest of what the verdict was judged on: the server's argv, the environment
that shapes it (:func:`shaping_env`) and the image's pins (``/opt/bwstack/versions.json``). A later start of
the same spec exits at once (exit 3) with one line naming the verdict and how to try again; ``bwstack up
--retry`` (``BWSTACK_RETRY=1``) clears it, and a changed spec has another digest. The classes a restart may
heal (:data:`signatures.RESTART_HEALS`: a NCCL hiccup, a timeout, an OOM at start ...) are not remembered.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

from healthchecks import common, imagelayout, signatures, verdict

#: where the remembered verdicts live: the per-variant JIT volume
DIR = f"{imagelayout.JIT_CACHE}/bwstack-verdicts"
ENV_DIR = "BWSTACK_VERDICTS_DIR"
ENV_RETRY = "BWSTACK_RETRY"
#: the image's pins, part of what a verdict was judged on
VERSIONS = imagelayout.VERSIONS_FILE
#: environment that does not shape the server (bookkeeping, the healthcheck's own timing, secrets' paths)
IGNORED_PREFIXES = ("BWSTACK_HC_", "BWSTACK_LINGER", "BWSTACK_RETRY", "HOSTNAME", "HOME", "PWD", "SHLVL", "_")


def shaping_env(env: Mapping[str, str]) -> dict[str, str]:
    """The environment that shapes the server: all but :data:`IGNORED_PREFIXES` (sorted)."""
    return {k: v for k, v in sorted(env.items()) if not k.startswith(IGNORED_PREFIXES)}


def digest(argv: Sequence[str], env: Mapping[str, str], versions: str = VERSIONS) -> str:
    """The digest of a launch spec as the container sees it (16 hex digits)."""
    h = hashlib.sha256()
    h.update(json.dumps([list(argv), shaping_env(env)], sort_keys=True).encode())
    with contextlib.suppress(OSError), open(versions, "rb") as fh:
        h.update(fh.read(1 << 20))
    return h.hexdigest()[:16]


def _path(key: str, env: Mapping[str, str]) -> str:
    return os.path.join(env.get(ENV_DIR) or DIR, f"{key}.json")


def heals(cls: str) -> bool:
    """Whether a restart may heal a verdict of this class (it is then not remembered)."""
    return cls in signatures.RESTART_HEALS or cls not in signatures.CLASSES


def remember(key: str, found: verdict.Verdict, env: Mapping[str, str]) -> str | None:
    """Write the verdict of spec ``key`` unless a restart may heal it; the path written, else None."""
    if heals(found.cls) or found.cls in ("healthy", "starting"):
        return None
    path = _path(key, env)
    with contextlib.suppress(OSError):
        # only the leaf folder is made: outside the image (no JIT volume at its path) nothing is written
        with contextlib.suppress(FileExistsError):
            os.mkdir(os.path.dirname(path))
        common.write_json_atomic(path, {"spec": key, **found.record(time.time())})
        return path
    return None


def recalled(key: str, env: Mapping[str, str]) -> dict[str, Any] | None:
    """The remembered verdict of spec ``key`` (cleared first when ``BWSTACK_RETRY=1``), else None."""
    path = _path(key, env)
    if env.get(ENV_RETRY, "0") == "1":
        with contextlib.suppress(OSError):
            os.unlink(path)
        return None
    data = verdict.read_json(path)
    found = verdict.Verdict.from_record(data) if isinstance(data, dict) else None
    if found is None or heals(found[0].cls):
        return None
    return {"line": found[0].line(), "time": found[1], "verdict": found[0]}


def refusal(key: str, found: dict[str, Any]) -> str:
    """The one line a start of a remembered spec prints before it exits."""
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(float(found["time"])))
    return (
        f"the same launch spec (digest {key}) ended '{found['line']}' at {when}; a restart cannot heal "
        f"that, so the model is not loaded again. Change the profile, or try again with 'bwstack up "
        f"--retry PROFILE' ({ENV_RETRY}=1)"
    )
