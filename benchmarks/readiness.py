"""Fault -> server stopped: serve.py's readiness probe versus waiting for Docker's next healthcheck probe.

Real SGLang (the CPU variant's host venv, no Docker) serves a tiny model whose ``lm_head`` is NaN. SGLang
0.5.23 starts, passes its own greedy warmup and answers ``/health`` 200; only a sampled decode shows the NaN.
The serve wrapper (``healthchecks/serve.py``, run with the venv's python as the image's entrypoint runs it) is
started twice, one after the other, in the same run:

- ``readiness``: ``BWSTACK_READY_PROBE=1`` (the default): the wrapper runs one full probe itself the moment
  ``/health`` answers 200 and stops the server on a fatal class;
- ``docker-interval``: ``BWSTACK_READY_PROBE=0`` (the path before): the server is stopped when the next
  healthcheck probe records the fatal class (fail-fast watcher).

Both runs have the same stand-in for Docker's healthcheck: the rendered probe command (``warmup.py --mode
light ...``) run every ``--interval`` seconds from the wrapper's start, as Docker does (default 30 s, the
rendered interval). Measured: from SGLang's "ready to roll" line to the wrapper's SIGTERM to the server and
to the wrapper's exit, its exit status and the verdict that stopped it. Which moment of Docker's interval
the server becomes ready in is chance: the old path waits U(0, interval) plus one probe; ``--runs N``
repeats both paths, interleaved, and the ratios are of the medians.

    .venv/bin/python benchmarks/readiness.py [--interval 30] [--runs 1] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests")]  # support.realsglang: the CPU venv, flags and env of the CPU profiles

from _common import add_smoke  # noqa: E402

from bwstack.tiny import tinymodel  # noqa: E402
from support.realsglang import CPU_ENV, CPU_FLAGS, free_port, venv_python  # noqa: E402

READY_LINE = "The server is fired up and ready to roll"
WINDOW_S = 600.0


def docker_like_prober(
    python: Path, url: str, tmp: Path, interval: float, stop: threading.Event, env: dict[str, str]
) -> None:
    """The rendered healthcheck, every ``interval`` seconds from the container's start (Docker's schedule)."""
    argv = [str(python), str(ROOT / "healthchecks" / "warmup.py"), "--url", url, "--timeout", "75",
            "--mode", "light", "--decode-every", "300", "--log", str(tmp / "server.log"),
            "--state", str(tmp / "hc-state.json"), "--api-key-file", str(tmp / "no-key")]  # fmt: skip
    while not stop.wait(interval):
        subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env, check=False)


def one_run(python: Path, model: Path, interval: float, ready_probe: bool) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="bwstack-readiness-"))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("BWSTACK_")}
    env.update(CPU_ENV)
    env.update(
        {
            "BWSTACK_LOG": str(tmp / "server.log"),
            "BWSTACK_HC_STATE": str(tmp / "hc-state.json"),
            "BWSTACK_API_KEY_FILE": str(tmp / "no-key"),
            "BWSTACK_HF_TOKEN_FILE": str(tmp / "no-token"),
            "BWSTACK_READY_PROBE": "1" if ready_probe else "0",
        }
    )
    argv = [str(python), str(ROOT / "healthchecks" / "serve.py"), "--model-path", str(model),
            "--host", "127.0.0.1", "--port", str(port), *CPU_FLAGS]  # fmt: skip
    started = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True)
    stop = threading.Event()
    prober = threading.Thread(
        target=docker_like_prober, args=(python, url, tmp, interval, stop, env), daemon=True
    )
    prober.start()
    ready_at: float | None = None
    signalled_at: float | None = None
    stopped_by = ""
    assert proc.stdout is not None
    timer = threading.Timer(WINDOW_S, proc.terminate)
    timer.start()
    for line in proc.stdout:
        if ready_at is None and READY_LINE in line:
            ready_at = time.monotonic()
        if "fail-fast:" in line and "stopping the server" in line and not stopped_by:
            stopped_by = line.split("fail-fast:", 1)[1].strip()
            signalled_at = time.monotonic()
    code = proc.wait()
    exited = time.monotonic()
    timer.cancel()
    stop.set()
    return {
        "path": "readiness" if ready_probe else "docker-interval",
        "interval_s": interval,
        "start_to_ready_s": None if ready_at is None else round(ready_at - started, 1),
        "ready_to_sigterm_s": None
        if ready_at is None or signalled_at is None
        else round(signalled_at - ready_at, 1),
        "ready_to_exit_s": None if ready_at is None else round(exited - ready_at, 1),
        "exit_status": code,
        "stopped_by": stopped_by[:300],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--interval", type=float, default=30.0, help="Docker's healthcheck interval (s)")
    parser.add_argument("--runs", type=int, default=1, help="pairs of runs (readiness, docker-interval)")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    add_smoke(parser)
    args = parser.parse_args(argv)
    if args.smoke:  # one pair of runs, Docker's probe every 5 s
        args.runs, args.interval = 1, min(args.interval, 5.0)
    python = venv_python()
    with tempfile.TemporaryDirectory(prefix="bwstack-nan-model-") as folder:
        model = tinymodel.write(Path(folder) / "nan", tinymodel.TinySpec(fault="nan-lm-head"))
        runs = []
        for _ in range(args.runs):  # interleaved, so drifting machine load hits both paths alike
            for ready_probe in (True, False):
                runs.append(one_run(python, model, args.interval, ready_probe))
                print(json.dumps(runs[-1]), flush=True)
    result: dict[str, Any] = {"runs": runs}
    for key in ("ready_to_sigterm_s", "ready_to_exit_s"):
        medians: dict[str, float | None] = {}
        for path in ("readiness", "docker-interval"):
            times = [r[key] for r in runs if r["path"] == path and r[key] is not None]
            medians[path] = statistics.median(times) if times else None
        new, old = medians["readiness"], medians["docker-interval"]
        result[f"median_{key}"] = medians
        result[f"old_over_new_{key}"] = round(old / new, 1) if new and old else None
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
