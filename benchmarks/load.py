"""The healthcheck under load: does a busy real server ever read as unhealthy because of the probe?

Real SGLang 0.5.23 on the CPU (the CPU variant's host venv, loopback only, no Docker) serves a tiny model
trained on the quality probe's passage (``bwstack.tiny.tinytrain``). The probe's baseline is measured first
on the
idle server (what ``bwstack calibrate`` records). Then, for each concurrency level, that many client threads
send ``/generate`` requests back to back (sampled, ``ignore_eos``, ``--tokens`` new tokens each) for
``--seconds`` seconds, while the healthcheck runs in full mode (sampled decode + passage score against the
baseline), with the rendered ``--timeout``, one probe after another. Reported per level: probes run, probes
that were not ``healthy`` (false alarms: the model is fine), p50/p95 probe time, client requests completed;
and the same probe figures on the idle server as the baseline of the ratio.

    .venv/bin/python benchmarks/load.py [--concurrency 4,8,16] [--seconds 60] [--tokens 64] [--json OUT]
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
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests")]  # support.realsglang: the CPU venv, flags and env of the CPU profiles

from _common import add_smoke  # noqa: E402

from bwstack.host import calibrate  # noqa: E402
from bwstack.stack.schema import HealthcheckSettings  # noqa: E402
from bwstack.tiny import tinytrain  # noqa: E402
from healthchecks import common, judging  # noqa: E402
from support.realsglang import real_server, venv_python  # noqa: E402

WARMUP = ROOT / "healthchecks" / "warmup.py"
IDLE_PROBES = 5


def client(url: str, tokens: int, stop: threading.Event, done: list[int], errors: list[str]) -> None:
    body = json.dumps(
        {
            "text": "Once upon a time there was a tiny model",
            "sampling_params": {"temperature": 0.8, "max_new_tokens": tokens, "ignore_eos": True},
        }
    ).encode()
    while not stop.is_set():
        request = urllib.request.Request(
            url + "/generate", data=body, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=300) as resp:
                resp.read()
            done.append(1)
        except OSError as exc:
            errors.append(type(exc).__name__)


def probe(url: str, tmp: Path, log: Path, env: dict[str, str]) -> tuple[float, str]:
    timeout = HealthcheckSettings().check_timeout  # the rendered warmup.py --timeout
    argv = [sys.executable, str(WARMUP), "--url", url, "--mode", "full", "--timeout", str(timeout),
            "--log", str(log), "--state", str(tmp / "hc-state.json"),
            "--api-key-file", str(tmp / "no-key")]  # fmt: skip
    started = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout + 30, env=env, check=False)
    return time.monotonic() - started, done.stdout.strip().splitlines()[-1]


def summary(times: list[float], lines: list[str]) -> dict[str, Any]:
    ordered = sorted(times)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    bad = [line for line in lines if not line.startswith("healthy")]
    return {
        "probes": len(times),
        "not_healthy": len(bad),
        "p50_s": round(statistics.median(ordered), 2),
        "p95_s": round(p95, 2),
        "max_s": round(ordered[-1], 2),
        "not_healthy_lines": bad[:5],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--concurrency", default="4,8,16", help="client threads per level, comma-separated")
    parser.add_argument("--seconds", type=float, default=60.0, help="load duration per level")
    parser.add_argument("--tokens", type=int, default=64, help="new tokens per client request")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    add_smoke(parser)
    args = parser.parse_args(argv)
    if args.smoke:  # one level of 2 clients for 5 s, 16 tokens a request
        args.concurrency, args.seconds, args.tokens = "2", 5.0, 16
    levels = [int(x) for x in args.concurrency.split(",") if x.strip()]
    python = venv_python()
    result: dict[str, Any] = {"tokens_per_request": args.tokens, "seconds_per_level": args.seconds}
    with tempfile.TemporaryDirectory(prefix="bwstack-load-") as folder:
        tmp = Path(folder)
        model = tinytrain.write_in_venv(python, {"none": tmp / "model"})["none"]
        log = tmp / "server.log"
        with real_server(model, log) as server:
            measured = calibrate.measure(server.url)
            env = {k: v for k, v in os.environ.items() if not k.startswith("BWSTACK_")}
            env[common.ENV_HC_BASELINE] = f"{judging.PASSAGE_ID}={measured['score']:.4f}"
            result["baseline_score"] = round(measured["score"], 4)
            idle = [probe(server.url, tmp, log, env) for _ in range(2 if args.smoke else IDLE_PROBES)]
            result["idle"] = summary([t for t, _ in idle], [line for _, line in idle])
            result["levels"] = []
            for level in levels:
                stop = threading.Event()
                done: list[int] = []
                errors: list[str] = []
                threads = [
                    threading.Thread(target=client, args=(server.url, args.tokens, stop, done, errors))
                    for _ in range(level)
                ]
                for thread in threads:
                    thread.start()
                time.sleep(2.0)  # let the batch fill
                times: list[float] = []
                lines: list[str] = []
                end = time.monotonic() + args.seconds
                while time.monotonic() < end:
                    elapsed, line = probe(server.url, tmp, log, env)
                    times.append(elapsed)
                    lines.append(line)
                stop.set()
                for thread in threads:
                    thread.join(timeout=300)
                row = {"concurrency": level, **summary(times, lines)}
                row["client_requests"] = len(done)
                row["client_errors"] = len(errors)
                result["levels"].append(row)
                print(json.dumps(row), flush=True)
    idle_p50 = result["idle"]["p50_s"]
    for row in result["levels"]:
        row["p50_over_idle"] = round(row["p50_s"] / idle_p50, 1) if idle_p50 else None
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
