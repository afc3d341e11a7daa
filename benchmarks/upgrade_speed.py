"""``bwstack upgrade`` speed: every shipped profile on two archs, warm (venvs, resolutions cached) and cold.

Warm: the whole command, ``bwstack upgrade v0.5.9-cu130 v0.5.23-cu130 --arch sm120 --arch sm100 --json`` in
a fresh interpreter, next to ``bwstack validate`` (the same stack load and one prediction per profile) as the
baseline measured in the same run, runs interleaved; and ``upgrade.compare`` in-process. Cold: the same
command with an empty ``$BWSTACK_CACHE`` whose ``venvs`` are linked from the warm cache (each version's
resolution runs in its venv); with ``--full-cold`` also with no venv at all (each SGLang wheel downloaded and
its CPU venv built: minutes, needs the package index). Nothing asserts on speed. Run from the repository root:

    .venv/bin/python benchmarks/upgrade_speed.py [--repeat N] [--full-cold]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import add_smoke

ROOT = Path(__file__).resolve().parents[1]
BWSTACK = [sys.executable, "-m", "bwstack.cli"]
UPGRADE = ["upgrade", "v0.5.9-cu130", "v0.5.23-cu130", "--arch", "sm120", "--arch", "sm100", "--json"]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=7, help="warm runs of each command")
    parser.add_argument("--full-cold", action="store_true", help="also build the venvs from nothing")
    add_smoke(parser)
    args = parser.parse_args(argv)
    if args.smoke:  # one warm run of each command; no cold run (a minute of resolutions in the venvs)
        args.repeat, args.full_cold = 1, False
    return args


def timed(argv: list[str], env: dict[str, str] | None = None) -> float:
    started = time.perf_counter()
    done = subprocess.run([*BWSTACK, *argv], cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    if done.returncode not in (0, 1):
        sys.exit(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()[-300:]}")
    return seconds


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from bwstack.know import venvs
    from bwstack.ops import upgrade
    from bwstack.stack import loader

    timed(UPGRADE)  # fill the caches: the warm figures start from here
    warm, baseline = [], []
    for _ in range(args.repeat):
        warm.append(timed(UPGRADE))
        baseline.append(timed(["validate"]))
    stack = loader.load_stack(ROOT / "profiles.yaml")
    inproc = []
    for _ in range(args.repeat):
        started = time.perf_counter()
        report = upgrade.compare(loader.load_stack(ROOT / "profiles.yaml"), "v0.5.9-cu130", "v0.5.23-cu130",
                                 archs=["sm120", "sm100"])  # fmt: skip
        inproc.append(time.perf_counter() - started)
    cases = len(report.profiles) * len(report.archs)
    print(f"{len(stack.profiles)} profiles x 2 archs = {cases} profile/arch pairs, 2 SGLang versions")
    print(f"warm  bwstack upgrade (CLI), median of {args.repeat}: {statistics.median(warm):.2f} s "
          f"(fastest {min(warm):.2f})")  # fmt: skip
    print(f"      bwstack validate (baseline, same run):  {statistics.median(baseline):.2f} s; "
          f"upgrade / validate = {statistics.median(warm) / statistics.median(baseline):.2f}")  # fmt: skip
    print(f"      upgrade.compare in-process, median:     {statistics.median(inproc):.2f} s")
    if args.smoke:
        print("cold  not measured in --smoke (each version's resolutions rerun in its venv: a minute)")
        return 0
    with tempfile.TemporaryDirectory(prefix="bwstack-upgrade-bench-") as tmp:
        env = {**os.environ, "BWSTACK_CACHE": tmp}
        (Path(tmp) / "venvs").symlink_to(venvs.cache_root() / "venvs")
        cold = timed(UPGRADE, env)
        print(f"cold  resolutions not cached (venvs built):  {cold:.1f} s; cold / warm = "
              f"{cold / statistics.median(warm):.0f}")  # fmt: skip
    if args.full_cold:
        with tempfile.TemporaryDirectory(prefix="bwstack-upgrade-bench-") as tmp:
            full = timed(UPGRADE, {**os.environ, "BWSTACK_CACHE": tmp})
            print(f"cold  nothing cached (wheels, venvs, resolutions): {full:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
