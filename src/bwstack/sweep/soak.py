"""The sweep's soak step: sustained concurrent load on each healthy profile (``bwstack sweep --soak S``).

After the verdict ``healthy`` (and the bench step, if any) the sweep runs ``healthchecks/soak_client.py``
inside the serving container with ``docker exec`` against ``127.0.0.1``: ``stack.soak`` settings
(:class:`bwstack.stack.schema.SoakSettings`: concurrency, prompt lengths past the sparse window, output
length,
stall bound, window), for ``--soak`` seconds. The client checks every streamed token's logprob and ends the
step as ``hang`` once a request has had no token for the stall bound. The row's ``soak`` (results.json):
verdict, reason, tokens, requests, ITL p50/p99, stalls, the worst window, the settings, ``soak_s``; a soak
verdict other than ``ok`` (``hang``, ``nan``, ``garbage``) replaces the row's ``healthy``.

``bwstack up --soak S`` runs the same step against the service it started (:func:`measure` with
:func:`with_progress`, then :func:`summary`).
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Sequence
from typing import Any

from bwstack import launch
from bwstack.stack.schema import SoakSettings, Stack
from bwstack.sweep import bench
from healthchecks import common, imagelayout

CLIENT = f"{imagelayout.HC_DIR}/soak_client.py"
#: seconds the ``docker exec`` may take past the soak's own duration and stall bound
EXEC_GRACE_S = 30.0
#: soak verdicts that are failure classes of the catalog (the row takes them)
FAILING = ("hang", "nan", "garbage")


def for_profile(stack: Stack, profile: str) -> SoakSettings:
    """``stack.soak`` with the stall bound resolved: as written, else the profile's derived hang bound (the
    one the container's watchdog and healthcheck use, :attr:`bwstack.launch.LaunchSpec.hang_bound`)."""
    settings = stack.settings.soak
    if settings.stall_after_s is not None:
        return settings
    bound = launch.launch_spec(stack, profile).hang_bound.seconds
    return settings.model_copy(update={"stall_after_s": float(bound)})


def stall_after(settings: SoakSettings) -> float:
    """The soak's stall bound (resolved by :func:`for_profile`; the in-image default otherwise)."""
    return settings.stall_after_s or common.DEFAULT_HC_HANG_AFTER


def argv(settings: SoakSettings, *, port: int, seconds: float, api_key_file: str | None) -> list[str]:
    """The client's argv inside the container."""
    out = [
        "python3", CLIENT,
        "--url", f"http://127.0.0.1:{port}",
        "--duration", f"{seconds:g}",
        "--concurrency", str(settings.concurrency),
        "--lengths", ",".join(str(n) for n in settings.lengths),
        "--output-len", str(settings.output_len),
        "--stall-after", f"{stall_after(settings):g}",
        "--window", f"{settings.window_s:g}",
    ]  # fmt: skip
    if api_key_file:
        out += ["--api-key-file", api_key_file]
    return out


def parse(stdout: str) -> dict[str, Any] | None:
    """The client's JSON line (its last), or None."""
    for line in reversed(stdout.strip().splitlines()):
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict) and "verdict" in data:
            return data
    return None


def measure(
    settings: SoakSettings,
    container: str,
    *,
    port: int,
    seconds: float,
    api_key_file: str | None,
    run: bench.Run = bench.run_host,
) -> dict[str, Any]:
    """The row's ``soak`` record of one healthy, running container."""
    started = time.monotonic()
    limit = seconds + stall_after(settings) + EXEC_GRACE_S
    done = run(
        bench.exec_argv(container, argv(settings, port=port, seconds=seconds, api_key_file=api_key_file)),
        limit,
    )
    found = parse(done.stdout)
    if found is None:
        tail = " ".join((done.stderr or done.stdout or "").split())[-300:]
        found = {
            "verdict": "error",
            "reason": f"the soak client printed no result (exit {done.returncode}): {tail}",
        }
    found["soak_s"] = round(time.monotonic() - started, 2)
    found["settings"] = settings.model_dump()
    return found


def words(soak: Any) -> str:
    """One cell of the matrix: the soak's verdict and figures."""
    if not isinstance(soak, dict):
        return ""
    if soak.get("verdict") != "ok":
        return f"{soak.get('verdict')}: {soak.get('reason', '')}"
    p50, p99 = soak.get("itl_ms_p50"), soak.get("itl_ms_p99")
    worst = soak.get("worst_window") or {}
    parts = [
        f"ok {soak.get('duration_s', 0):.0f} s",
        f"{soak.get('requests', 0)} req",
        f"{soak.get('tokens', 0)} tok",
    ]
    if isinstance(p50, int | float) and isinstance(p99, int | float):
        parts.append(f"ITL p50 {p50:.0f} / p99 {p99:.0f} ms")
    parts.append(f"{soak.get('stalls', 0)} stalls")
    if isinstance(worst.get("itl_ms_p99"), int | float):
        parts.append(f"worst window @{worst.get('start_s')} s p99 {worst['itl_ms_p99']:.0f} ms")
    return ", ".join(parts)


def with_progress(tick: Callable[[float], None], every: float) -> bench.Run:
    """A :data:`bench.Run` like :func:`bench.run_host` that calls ``tick(elapsed seconds)`` every ``every``
    seconds while the command runs (progress lines on a long soak)."""

    def run(argv: Sequence[str], timeout: float) -> subprocess.CompletedProcess[str]:
        started = time.monotonic()
        try:
            proc = subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        except OSError as exc:
            return subprocess.CompletedProcess(list(argv), 127, "", str(exc))
        with proc:
            while True:
                left = timeout - (time.monotonic() - started)
                try:
                    out, err = proc.communicate(timeout=max(0.01, min(every, left)))
                    return subprocess.CompletedProcess(list(argv), proc.returncode, out, err)
                except subprocess.TimeoutExpired:
                    if time.monotonic() - started >= timeout:
                        proc.kill()
                        out, _err = proc.communicate()
                        return subprocess.CompletedProcess(
                            list(argv), 124, out, f"timed out after {timeout:g} s"
                        )
                    tick(time.monotonic() - started)

    return run


def summary(soak: dict[str, Any]) -> list[str]:
    """What ``bwstack up --soak`` prints: the figures (when the client measured any), then the verdict line
    ``soak verdict: ok`` or ``soak verdict: CLASS: REASON``."""
    lines = []
    if "tokens" in soak:
        p50, p99 = soak.get("itl_ms_p50"), soak.get("itl_ms_p99")
        parts = [f"{soak.get('requests', 0)} requests", f"{soak.get('tokens', 0)} tokens"]
        if soak.get("failed"):
            parts.append(f"{soak['failed']} failed")
        itl = [f"{v:.0f}" if isinstance(v, int | float) else "-" for v in (p50, p99)]
        parts.append(f"ITL p50 {itl[0]} / p99 {itl[1]} ms")
        parts.append(f"{soak.get('stalls', 0)} stalls")
        worst = soak.get("worst_window") or {}
        if isinstance(worst.get("itl_ms_p99"), int | float):
            parts.append(
                f"worst window @{worst.get('start_s')} s: p99 {worst['itl_ms_p99']:.0f} ms, "
                f"{worst.get('tokens', 0)} tokens"
            )
        parts.append(f"{soak.get('duration_s', 0):g} s")
        lines.append("soak figures: " + ", ".join(parts))
    verdict = str(soak.get("verdict", "error"))
    reason = " ".join(str(soak.get("reason") or "").split())
    lines.append(f"soak verdict: {verdict}" + (f": {reason}" if verdict != "ok" and reason else ""))
    return lines
