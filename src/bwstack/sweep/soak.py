"""The sweep's soak step: sustained concurrent load on each healthy profile (``bwstack sweep --soak S``).

After the verdict ``healthy`` (and the bench step, if any) the sweep runs ``healthchecks/soak_client.py``
inside the serving container with ``docker exec`` against ``127.0.0.1``: ``stack.soak`` settings
(:class:`bwstack.stack.schema.SoakSettings`: concurrency, prompt lengths, output length, stall bound,
window; :func:`for_profile` resolves the unset ones), for ``--soak`` seconds. An unset stall bound is the
profile's derived hang bound; unset lengths cross the model's sparse window (:func:`default_lengths`: half
the window and 256 tokens past it; the window is ``index_topk`` of ``model.config``, else 2048); the client
caps them by the served context length. The client checks every streamed token's logprob, ends the step as
``hang`` once a request has had no token for the stall bound, and names failed requests (HTTP errors, errors
in the stream, streams cut short) past its threshold by their class in the failure catalog. The row's
``soak`` (results.json): verdict, reason, tokens, requests, failed, ITL p50/p99, stalls, the worst window,
per length ``buckets`` (requests, failed, tokens, ITL p50/p99), the settings, ``soak_s``; a soak verdict
that is a catalog class (:data:`FAILING`: ``hang``, ``nan``, ``garbage``, ``illegal_memory``,
``warmup_failed``, ...) replaces the row's ``healthy``; ``error`` (the client printed no result) does not.

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
from bwstack.stack import modelconfig
from bwstack.stack.schema import SoakSettings, Stack
from bwstack.sweep import bench
from bwstack.sweep.judge import Outcome
from healthchecks import common, imagelayout, longprobe, signatures

CLIENT = f"{imagelayout.HC_DIR}/soak_client.py"
#: seconds the ``docker exec`` may take past the soak's own duration and stall bound
EXEC_GRACE_S = 30.0
#: soak verdicts that are failure classes of the catalog (the row takes them): every class but the two that
#: are no failure; the client's ``failed`` (nothing completed, nothing failed) and ``error`` are not classes
FAILING: frozenset[str] = frozenset(signatures.CLASSES) - {"healthy", "starting"}


def default_lengths(window: int | None) -> list[int]:
    """The soak's prompt lengths when ``stack.soak.lengths`` is unset: half the sparse window (under it) and
    :data:`longprobe.PAST_WINDOW` tokens past it (as the long probe); ``window`` is the model's
    ``index_topk`` (:func:`bwstack.stack.modelconfig.sparse_window`), else :data:`longprobe.DEFAULT_WINDOW`.
    The client caps them by the served context length."""
    span = window or longprobe.DEFAULT_WINDOW
    return [max(1, span // 2), span + longprobe.PAST_WINDOW]


def for_profile(stack: Stack, profile: str) -> SoakSettings:
    """``stack.soak`` resolved for one profile: the stall bound as written, else the profile's derived hang
    bound (the one the container's watchdog and healthcheck use,
    :attr:`bwstack.launch.LaunchSpec.hang_bound`); the lengths as written, else :func:`default_lengths` of
    the model's sparse window."""
    settings = stack.settings.soak
    update: dict[str, Any] = {}
    if settings.stall_after_s is None:
        update["stall_after_s"] = float(launch.launch_spec(stack, profile).hang_bound.seconds)
    if not settings.lengths:
        update["lengths"] = default_lengths(modelconfig.sparse_window(stack))
    return settings.model_copy(update=update) if update else settings


def stall_after(settings: SoakSettings) -> float:
    """The soak's stall bound (resolved by :func:`for_profile`; the in-image default otherwise)."""
    return settings.stall_after_s or common.DEFAULT_HC_HANG_AFTER


def lengths(settings: SoakSettings) -> list[int]:
    """The soak's prompt lengths (resolved by :func:`for_profile`; the default window's otherwise)."""
    return list(settings.lengths) if settings.lengths else default_lengths(None)


def argv(settings: SoakSettings, *, port: int, seconds: float, api_key_file: str | None) -> list[str]:
    """The client's argv inside the container."""
    out = [
        "python3", CLIENT,
        "--url", f"http://127.0.0.1:{port}",
        "--duration", f"{seconds:g}",
        "--concurrency", str(settings.concurrency),
        "--lengths", ",".join(str(n) for n in lengths(settings)),
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


def row_verdict(outcome: Outcome, soaked: dict[str, Any]) -> Outcome:
    """The row's verdict after its soak: the soak's class when it is a failure class (:data:`FAILING`),
    else the verdict before it."""
    if soaked.get("verdict") in FAILING:
        return Outcome(str(soaked["verdict"]), "soak", f"soak: {soaked.get('reason', '')}")
    return outcome


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
        f"{soak.get('requests', 0)} req" + (f" ({soak['failed']} failed)" if soak.get("failed") else ""),
        f"{soak.get('tokens', 0)} tok",
    ]
    if isinstance(p50, int | float) and isinstance(p99, int | float):
        parts.append(f"ITL p50 {p50:.0f} / p99 {p99:.0f} ms")
    parts.append(f"{soak.get('stalls', 0)} stalls")
    if isinstance(worst.get("itl_ms_p99"), int | float):
        parts.append(f"worst window @{worst.get('start_s')} s p99 {worst['itl_ms_p99']:.0f} ms")
    return ", ".join(parts)


#: the columns of the per-length table of a soaked row (matrix.md, matrix.html)
BUCKET_COLUMNS = ("prompt tokens", "requests", "failed", "tokens", "ITL p50 ms", "ITL p99 ms")


def bucket_rows(soak: Any) -> list[tuple[str, ...]]:
    """The cells of the per-length table of a soak record (its ``buckets``), one row per prompt length; none
    for a record without buckets (a client that printed no result, a report from before them)."""
    buckets = soak.get("buckets") if isinstance(soak, dict) else None
    rows = []
    for bucket in buckets if isinstance(buckets, list) else []:
        if not isinstance(bucket, dict):
            continue
        itl = [
            f"{v:.1f}" if isinstance(v, int | float) else "-"
            for v in (bucket.get("itl_ms_p50"), bucket.get("itl_ms_p99"))
        ]
        counts = [str(bucket.get(key, 0)) for key in ("length", "requests", "failed", "tokens")]
        rows.append((*counts, *itl))
    return rows


def bucket_table(soak: Any) -> list[str]:
    """The per-length table of a soak record as Markdown lines (empty without buckets)."""
    rows = bucket_rows(soak)
    if not rows:
        return []
    lines = ["| " + " | ".join(BUCKET_COLUMNS) + " |", "|" + " --- |" * len(BUCKET_COLUMNS)]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


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
