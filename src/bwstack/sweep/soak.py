"""The sweep's soak step: sustained concurrent load on each healthy profile (``bwstack sweep --soak S``).

After the verdict ``healthy`` (and the bench step, if any) the sweep runs ``healthchecks/soak_client.py``
inside the serving container with ``docker exec`` against ``127.0.0.1``: ``stack.soak`` settings
(:class:`bwstack.stack.schema.SoakSettings`: concurrency, prompt lengths past the sparse window, output
length,
stall bound, window), for ``--soak`` seconds. The client checks every streamed token's logprob and ends the
step as ``hang`` once a request has had no token for the stall bound. The row's ``soak`` (results.json):
verdict, reason, tokens, requests, ITL p50/p99, stalls, the worst window, the settings, ``soak_s``; a soak
verdict other than ``ok`` (``hang``, ``nan``, ``garbage``) replaces the row's ``healthy``.
"""

from __future__ import annotations

import json
import time
from typing import Any

from bwstack.stack.schema import SoakSettings
from bwstack.sweep import bench
from healthchecks import imagelayout

CLIENT = f"{imagelayout.HC_DIR}/soak_client.py"
#: seconds the ``docker exec`` may take past the soak's own duration and stall bound
EXEC_GRACE_S = 30.0
#: soak verdicts that are failure classes of the catalog (the row takes them)
FAILING = ("hang", "nan", "garbage")


def argv(settings: SoakSettings, *, port: int, seconds: float, api_key_file: str | None) -> list[str]:
    """The client's argv inside the container."""
    out = [
        "python3", CLIENT,
        "--url", f"http://127.0.0.1:{port}",
        "--duration", f"{seconds:g}",
        "--concurrency", str(settings.concurrency),
        "--lengths", ",".join(str(n) for n in settings.lengths),
        "--output-len", str(settings.output_len),
        "--stall-after", f"{settings.stall_after_s:g}",
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
    limit = seconds + settings.stall_after_s + EXEC_GRACE_S
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
