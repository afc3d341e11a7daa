"""What every benchmark in benchmarks/ shares: the ``--smoke`` flag and the skip protocol.

- ``--smoke``: one run of each measurement at its smallest size, so ``benchmarks/run.py --smoke`` (and the
  test that CI runs, tests/bench) proves every benchmark still runs end to end; its figures are printed,
  nothing is asserted on speed, and they are not the figures docs/benchmarks.md quotes.
- Skipped: a benchmark that truly cannot run on this machine (no Docker engine, say) prints one line
  ``skipped: <why>`` and exits with :data:`SKIPPED`; ``run.py`` reports it as skipped, not failed. Any other
  non-zero exit is a failure.

Import as ``_common`` (a benchmark's own folder is on ``sys.path`` when it runs as a script).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import NoReturn

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "tests") not in sys.path:
    sys.path.insert(0, str(ROOT / "tests"))  # support.dockercheck: the Docker tests' own check

from support.dockercheck import docker_problem  # noqa: E402

#: a benchmark's exit status when it cannot run on this machine (its last line says why)
SKIPPED = 3
#: the first words of a skipped benchmark's one line
SKIP_PREFIX = "skipped: "


def add_smoke(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="one run at the smallest size: proves the benchmark runs (figures printed, not the docs' ones)",
    )


def skip(reason: str) -> NoReturn:
    """Say in one line why this benchmark cannot run here and exit with :data:`SKIPPED`."""
    print(SKIP_PREFIX + " ".join(reason.split()), flush=True)
    sys.exit(SKIPPED)


def require_docker() -> None:
    """Skip (exit :data:`SKIPPED`) when no Docker engine with Compose v2 answers."""
    problem = docker_problem()
    if problem is not None:
        skip(f"needs a Docker engine and Compose v2 (`./dev setup`): {problem}")
