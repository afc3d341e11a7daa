"""Run every benchmark in benchmarks/ and print all their figures (no asserts on speed).

Each ``benchmarks/<name>.py`` other than this file (and ``_*.py`` helpers) is run with this interpreter from
the repository root, its output streamed as it comes; a summary of each one's outcome and wall time follows:
``ok`` (exit 0), ``skipped`` (exit 3 with a last line ``skipped: <why>``: it cannot run on this machine, see
benchmarks/_common.py) or ``FAILED``. The exit status is 0 when every benchmark that could run ran, 1 when one
failed, 2 on bad arguments. ``--smoke`` passes ``--smoke`` to each: one run at the smallest sizes, which CI
runs (tests/bench) so that a broken benchmark fails it. Its benchmarks run in two lanes side by side (most of
a smoke run is waiting: a server starting, a stall bound, a fail-fast grace): :data:`SIDE_LANE` one after the
other, everything else one after the other beside them, so no two Docker benchmarks run at once and at most
two real SGLang servers do; each benchmark's output is printed whole when it ends. A full run is one benchmark
at a time, its output streamed, so no other benchmark weighs on its figures. ``--write-docs`` puts the full
run's outputs, with the date and the commit, into docs/benchmarks.md (benchmarks/_docs.py). Run:

    .venv/bin/python benchmarks/run.py [--smoke] [--only NAME ...] [--list] [--write-docs]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import _docs
from _common import SKIP_PREFIX, SKIPPED

from bwstack.files import atomic_write

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

#: --smoke: the lane beside the others (real SGLang on the host, no Docker; the two longest smoke runs)
SIDE_LANE = ("health_under_load", "load")


@dataclass
class Outcome:
    """One benchmark's run: exit status, wall seconds, what it printed."""

    name: str
    status: int
    seconds: float
    lines: list[str] = field(default_factory=list)

    @property
    def skip_reason(self) -> str | None:
        last = next((line for line in reversed(self.lines) if line.strip()), "")
        if self.status == SKIPPED and last.startswith(SKIP_PREFIX):
            return last[len(SKIP_PREFIX) :].strip()
        return None

    @property
    def word(self) -> str:
        if self.status == 0:
            return "ok"
        return "skipped" if self.skip_reason is not None else f"FAILED (exit {self.status})"


def benchmarks() -> list[Path]:
    return sorted(
        p for p in HERE.glob("*.py") if p.name != Path(__file__).name and not p.name.startswith("_")
    )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--only", action="append", default=[], metavar="NAME", help="run only this benchmark")
    parser.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    parser.add_argument(
        "--smoke", action="store_true", help="each benchmark's short mode (one run, smallest)"
    )
    parser.add_argument(
        "--json", type=Path, help="also write each outcome here (name, outcome, seconds, reason)"
    )
    parser.add_argument(
        "--write-docs", action="store_true", help="write the outputs into docs/benchmarks.md (full run only)"
    )
    return parser.parse_args(argv)


def heading(path: Path) -> str:
    return f"\n=== {path.stem} ({path.relative_to(ROOT)}) ==="


def run_one(path: Path, smoke: bool, stream: bool = True) -> Outcome:
    """Run one benchmark (stderr merged), echoing its output line by line as it comes when ``stream``."""
    if stream:
        print(heading(path), flush=True)
    started = time.monotonic()
    argv = [sys.executable, "-u", str(path), *(["--smoke"] if smoke else [])]
    lines: list[str] = []
    with subprocess.Popen(
        argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace"
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            if stream:
                print(line, end="", flush=True)
            lines.append(line.rstrip("\n"))
    return Outcome(path.stem, proc.returncode, time.monotonic() - started, lines)


def run_lanes(chosen: list[Path]) -> list[Outcome]:
    """--smoke: :data:`SIDE_LANE` and the others as two lanes side by side, each benchmark's output printed
    whole as it ends; the outcomes in ``chosen``'s order."""
    side = [p for p in chosen if p.stem in SIDE_LANE]
    lanes = [lane for lane in ([p for p in chosen if p not in side], side) if lane]
    printing = threading.Lock()

    def lane(paths: list[Path]) -> list[Outcome]:
        done = []
        for path in paths:
            outcome = run_one(path, smoke=True, stream=False)
            with printing:
                print("\n".join([heading(path), *outcome.lines]), flush=True)
            done.append(outcome)
        return done

    with ThreadPoolExecutor(max_workers=len(lanes) or 1) as pool:
        found = {o.name: o for outcomes in pool.map(lane, lanes) for o in outcomes}
    return [found[p.stem] for p in chosen]


def print_summary(outcomes: list[Outcome], total: float, smoke: bool) -> None:
    print(f"\n=== summary{' (smoke)' if smoke else ''} ===")
    for o in outcomes:
        why = f"  {o.skip_reason}" if o.skip_reason is not None else ""
        print(f"{o.name:20} {o.word:18} {o.seconds:7.1f} s{why}")
    print(f"{'total':20} {'':18} {total:7.1f} s")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    found = benchmarks()
    if args.list:
        print("\n".join(p.stem for p in found))
        return 0
    unknown = set(args.only) - {p.stem for p in found}
    if unknown:
        print(f"run.py: unknown benchmark(s): {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    if args.write_docs and (args.smoke or args.only):
        print("run.py: --write-docs records a full run: not with --smoke or --only", file=sys.stderr)
        return 2
    chosen = [p for p in found if not args.only or p.stem in args.only]
    stamp = _docs.stamp() if args.write_docs else ""  # the commit that runs, not the one at the end
    started = time.monotonic()
    outcomes = run_lanes(chosen) if args.smoke else [run_one(path, smoke=False) for path in chosen]
    total = time.monotonic() - started
    print_summary(outcomes, total, args.smoke)
    if args.json:
        rows = [
            {
                "name": o.name,
                "outcome": o.word,
                "status": o.status,
                "seconds": round(o.seconds, 1),
                "reason": o.skip_reason,
            }
            for o in outcomes
        ]
        atomic_write(args.json, json.dumps({"smoke": args.smoke, "seconds": round(total, 1), "runs": rows}))
    if args.write_docs:
        print(f"run.py: wrote {_docs.write_docs(outcomes, total, stamp).relative_to(ROOT)}")
    return 0 if all(o.word in ("ok", "skipped") for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
