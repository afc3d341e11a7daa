"""Measure what ``bwstack sweep --bench`` adds per profile: the bench step's wall time against the same
profile's sweep step without it, both measured in this run (no asserts on speed).

For each profile (default: the healthy ones of ``profiles.cpu.yaml``, real SGLang on the CPU), in turn:

- without: the sweep's per-profile step (``Runner.run_profile``: up, watch to the verdict, evidence, tear
  down) with ``--bench`` off;
- with: the same step with ``--bench`` on; the row's ``speed.bench_s`` is the bench step's own wall time
  (asking which client the image runs, the ``docker exec`` of the load, reading its result).

Printed per profile: both step times, ``bench_s``, the ratio ``bench_s / without`` (the bench step's cost in
units of a plain sweep step), the measured figures and the client that produced them; medians over
``--repeat`` runs, then each run's own figures. ``--standin`` measures the stand-in sweep of
``profiles.yaml`` instead. Run it from the repository root (it builds the CPU image first when missing):

    .venv/bin/python benchmarks/bench_overhead.py [-f profiles.cpu.yaml] [--profile NAME ...] [--repeat N]
"""

from __future__ import annotations

import argparse
import io
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import add_smoke, require_docker
from rich.console import Console

from bwstack.host import secretfiles
from bwstack.stack import loader
from bwstack.sweep import bench
from bwstack.sweep.display import Display
from bwstack.sweep.plan import Options, make_plan
from bwstack.sweep.run import compose_project, default_timeout
from bwstack.sweep.runner import Runner
from bwstack.sweep.streams import docker_client


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("-f", "--file", type=Path, default=None, help="the profiles file")
    parser.add_argument("--standin", action="store_true", help="the stand-in sweep (file profiles.yaml)")
    parser.add_argument("--profile", action="append", default=[], help="profile to measure (all healthy)")
    parser.add_argument("--repeat", type=int, default=1, help="runs per profile and method")
    parser.add_argument("--timeout", type=float, default=None, help="per-profile budget (the sweep's)")
    add_smoke(parser)
    args = parser.parse_args(argv)
    if args.smoke:  # one run each way of one profile, on the stand-in (seconds, not a real server's minute)
        args.repeat, args.profile, args.standin = 1, args.profile[:1], True
    return args


def step(runner: Runner, name: str) -> tuple[float, dict[str, Any]]:
    """Wall seconds of the sweep's step for one profile and its row."""
    started = time.perf_counter()
    row = runner.run_profile(name)
    return time.perf_counter() - started, row


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    require_docker()
    path = args.file or Path("profiles.yaml" if args.standin else "profiles.cpu.yaml")
    stack = loader.load_stack(path)
    names = args.profile or [n for n, p in stack.profiles.items() if p.expect == "healthy"]
    names = names[:1] if args.smoke else names
    out = Path(tempfile.mkdtemp(prefix="bwstack-bench-overhead-"))
    console = Console(stderr=True, highlight=False)
    timeout = args.timeout or default_timeout(stack, args.standin)
    plan = make_plan(stack, names, variant=None, standin=args.standin)
    client = docker_client()
    secretfiles.ensure_secrets(plan.stack)
    options = {
        on: Options(
            fast=False, standin=args.standin, timeout_s=timeout, keep=False, load_seconds=None, bench=on
        )
        for on in (False, True)
    }
    project, _ = compose_project(plan, options[False], out, client, console)
    display = Display(Console(file=io.StringIO()), total=len(names) * args.repeat * 2)
    runners = {on: Runner(plan.stack, project, client, options[on], display) for on in (False, True)}
    settings = plan.stack.settings.bench
    print(
        f"{path.name}: {len(names)} profile(s), {args.repeat} run(s) each way (median shown); "
        f"load per profile: {settings.num_prompts} requests of {settings.input_len} in / "
        f"{settings.output_len} out tokens, {settings.concurrency} at once, limit {settings.time_limit_s} s"
    )
    print(f"{'profile':22} {'without s':>9} {'with s':>8} {'bench_s':>8} {'ratio':>6}  figures")
    try:
        runners[False].remove_leftovers()
        for name in names:
            plain = [step(runners[False], name)[0] for _ in range(args.repeat)]
            timed = [step(runners[True], name) for _ in range(args.repeat)]
            without = statistics.median(plain)
            speeds = [row.get("speed") or {} for _, row in timed]
            bench_s = statistics.median(float(s.get("bench_s") or 0.0) for s in speeds)
            ratio = bench_s / without if without > 0 else float("nan")
            print(
                f"{name:22} {without:9.2f} {statistics.median(t for t, _ in timed):8.2f} {bench_s:8.2f} "
                f"{ratio:6.2f}  {bench.speed_words(speeds[-1]) or timed[-1][1]['verdict']}"
            )
            each = zip(plain, timed, speeds, strict=True)
            for index, (alone, (together, _), speed) in enumerate(each, 1):
                print(
                    f"  run {index}: without {alone:.2f} s, with {together:.2f} s, bench_s "
                    f"{float(speed.get('bench_s') or 0):.2f} s, {bench.short_words(speed) or 'not measured'}"
                )
    finally:
        runners[False].finish()
        shutil.rmtree(out, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
