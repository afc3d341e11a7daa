"""Healthy under load, on real SGLang 0.5.23 on the CPU (host venv; no asserts on speed, every figure from
this run): how fast a frozen scheduler is reported, what the long-context probe costs, what a soak adds.

One tiny model served by the image's entrypoint (``healthchecks/serve.py``, hang watchdog on, stall bound
``--stall-after``) from the host venv of the v0.5.23-cpu closure (support/realserve.py):

(a) probe cost: the short full probe (sampled decode + passage) and the long-context probe (one prefill of
    the repeated block, capped by the tiny model's 2048 context), ``--runs`` times each, medians; ratio
    long / short;
(b) soak overhead: a ``--soak``-second soak's wall time as a multiple of the server's start-to-ready time
    (what a sweep step costs before its verdict);
(c) stall -> hang: a soak runs, the real scheduler is frozen with SIGSTOP; seconds until the soak says
    ``hang`` and until the serve wrapper's fail-fast has stopped the server, as multiples of the stall bound;
(d) the watchdog's cost on a busy server: the same soak against a second server with the watchdog off
    (``BWSTACK_HANG_WATCH=0``, no ``--enable-metrics``); tokens/s with it on / off.

The stall bound defaults to the shipped CPU profile's derived hang bound (compose.cpu.yaml, 30 s):

    .venv/bin/python benchmarks/health_under_load.py [--stall-after S] [--soak 20] [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests"), str(ROOT)]  # support.realserve: the wrapper around real SGLang

from _common import add_smoke  # noqa: E402

from bwstack import launch  # noqa: E402
from bwstack.stack import loader  # noqa: E402
from bwstack.tiny import tinymodel  # noqa: E402
from healthchecks import probehttp, settings, warmup  # noqa: E402
from support.realserve import hold, result, served, soak  # noqa: E402


def timed(func: object, runs: int) -> float:
    times = []
    for _ in range(runs):
        started = time.monotonic()
        func()  # type: ignore[operator]
        times.append(time.monotonic() - started)
    return statistics.median(times)


def probe_run(url: str) -> probehttp.Run:
    cfg = settings.Config(url=url, timeout=120, expect={}, expect_text=None, log="", api_key_file="",
                          mode="full", decode_every=1.0, state_path="")  # fmt: skip
    return probehttp.Run(cfg=cfg, deadline=time.monotonic() + 600, api_key=None, state={"healthy_once": True})


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    shipped = loader.load_stack(ROOT / "profiles.cpu.yaml")
    bound = launch.launch_spec(shipped, next(iter(shipped.profiles))).hang_bound.seconds
    parser.add_argument("--stall-after", type=float, default=float(bound), help="default: the shipped bound")
    parser.add_argument("--soak", type=float, default=20.0)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3, help="(d): soaks per server, in turn")
    add_smoke(parser)
    args = parser.parse_args()
    if args.smoke:  # one probe of each kind, an 8 s soak, a 10 s stall bound, no (d)
        args.runs, args.soak, args.stall_after = 1, 8.0, min(args.stall_after, 10.0)
    with tempfile.TemporaryDirectory(prefix="bwstack-bench-hang-") as tmp:
        model = tinymodel.write(Path(tmp) / "tiny", tinymodel.TinySpec())
        started = time.monotonic()
        with served(model, Path(tmp), args.stall_after) as server:
            ready_s = time.monotonic() - started
            run = probe_run(server.url)
            length = warmup.long_length(run)
            short_s = timed(lambda: (warmup.check_decode(run), warmup.check_quality(run)), args.runs)
            long_s = timed(lambda: warmup.check_long(run), args.runs)
            print(
                f"(a) probe cost (median of {args.runs}): short full probe {short_s * 1000:.0f} ms, "
                f"long-context probe ({length} tokens) {long_s * 1000:.0f} ms: "
                f"x{long_s / short_s:.1f} the short probe"
            )
            t0 = time.monotonic()
            load = result(soak(server, args.soak))
            soak_s = time.monotonic() - t0
            print(
                f"(b) soak {args.soak:g} s: verdict {load['verdict']}, {load['requests']} requests, "
                f"{load['tokens']} tokens, ITL p50 {load['itl_ms_p50']:.0f} ms "
                f"p99 {load['itl_ms_p99']:.0f} ms; step {soak_s:.1f} s vs start-to-ready {ready_s:.1f} s: "
                f"x{soak_s / ready_s:.2f} a sweep step's time to its verdict"
            )
            running = soak(server, 300.0)
            hold(server.url)  # a user's request that stays in flight after the soak has closed its own
            time.sleep(4)
            os.kill(server.scheduler_pid(), signal.SIGSTOP)
            frozen = time.monotonic()
            stuck = result(running)
            soak_seen = time.monotonic() - frozen
            server.proc.wait(timeout=args.stall_after + 90)
            stopped = time.monotonic() - frozen
            line = server.healthcheck()
            print(
                f"(c) stall bound {args.stall_after:g} s: soak '{stuck['verdict']}' after {soak_seen:.1f} s "
                f"(x{soak_seen / args.stall_after:.2f} the bound); server stopped by fail-fast after "
                f"{stopped:.1f} s (x{stopped / args.stall_after:.2f}); healthcheck: {line}"
            )
        if args.smoke:
            print("(d) not measured in --smoke (two more server starts)")
            return 0
        print(watchdog_cost(model, Path(tmp), args.stall_after, args.soak / 2, args.rounds))
    return 0


def watchdog_cost(model: Path, tmp: Path, bound: float, seconds: float, rounds: int) -> str:
    """(d): two servers up at once, watchdog on and off; soaks against them in turn (on, off, on, off ...),
    so load from other jobs on the machine falls on both alike; medians of tokens/s and their ratio."""
    speeds: dict[bool, list[float]] = {True: [], False: []}
    (tmp / "on").mkdir()
    (tmp / "off").mkdir()
    with served(model, tmp / "on", bound) as on, served(model, tmp / "off", bound, watch=False) as off:
        for _ in range(rounds):
            for watch, server in ((True, on), (False, off)):
                started = time.monotonic()
                found = result(soak(server, seconds))
                speeds[watch].append(float(found["tokens"]) / max(time.monotonic() - started, 1e-3))
    on_s, off_s = statistics.median(speeds[True]), statistics.median(speeds[False])
    each = {watch: ", ".join(f"{v:.0f}" for v in values) for watch, values in speeds.items()}
    return (
        f"(d) watchdog cost: {rounds} x {seconds:g} s soaks in turn, median {on_s:.0f} tokens/s with the "
        f"watchdog on, {off_s:.0f} with it off: x{on_s / max(off_s, 1e-9):.2f} "
        f"(on {each[True]}; off {each[False]})"
    )


if __name__ == "__main__":
    sys.exit(main())
