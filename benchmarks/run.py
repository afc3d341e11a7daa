"""Run every benchmark in benchmarks/ and print all their figures (no asserts on speed).

Each ``benchmarks/<name>.py`` other than this file (and ``_*.py`` helpers) is run with this interpreter from
the repository root, its output streamed as it comes; a summary of exit statuses and wall times follows. Run:

    .venv/bin/python benchmarks/run.py [--only NAME ...] [--list]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def benchmarks() -> list[Path]:
    return sorted(
        p for p in HERE.glob("*.py") if p.name != Path(__file__).name and not p.name.startswith("_")
    )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--only", action="append", default=[], metavar="NAME", help="run only this benchmark")
    parser.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    return parser.parse_args(argv)


def run_one(path: Path) -> tuple[int, float]:
    print(f"\n=== {path.stem} ({path.relative_to(ROOT)}) ===", flush=True)
    started = time.monotonic()
    status = subprocess.run([sys.executable, str(path)], cwd=ROOT, check=False).returncode
    return status, time.monotonic() - started


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
    chosen = [p for p in found if not args.only or p.stem in args.only]
    results = {path.stem: run_one(path) for path in chosen}
    print("\n=== summary ===")
    for name, (status, seconds) in results.items():
        print(f"{name:20} {'ok' if status == 0 else f'FAILED (exit {status})':18} {seconds:7.1f} s")
    return 0 if all(status == 0 for status, _ in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
