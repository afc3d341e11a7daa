"""The main job's budget: `bwstack demo` (real CPU sweep + stand-in sweep) cold and warm, in one run.

Cold: the CPU serving image, its local base (``bwstack/cpu-base:…``), its build cache
(``bwstack/build-stage:…``) and the stand-in images are removed first, so the run includes the image builds
(the host wheelhouse download is cached separately, as on any developer machine after the first `bwstack lock`
or build). Warm: the same command again. Figures: wall time
of each run, its two parts (from the sub-reports), each as a ratio against the budget (cold 10 min,
warm 5 min) and warm against cold. Nothing is asserted.

    .venv/bin/python benchmarks/demo_budget.py [--skip-cold]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUDGET_S = {"cold": 600.0, "warm": 300.0}
COLD_IMAGES = (
    "bwstack/sglang:v0.5.23-cpu",
    "bwstack/build-stage:bwstack_sglang_v0.5.23-cpu",
    "bwstack/cpu-base:v0.5.23-cpu",
)


def images_to_drop() -> list[str]:
    out = subprocess.run(
        ["docker", "images", "--format", "{{.Repository}}:{{.Tag}}", "bwstack/standin*"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.split()
    return [*COLD_IMAGES, *out]


def part_seconds(report: Path) -> float:
    doc = json.loads((report / "results.json").read_text())
    return sum(float(row.get("elapsed_s") or 0) for row in doc["results"].values())


def run(label: str, out: Path) -> dict[str, float]:
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "bwstack.cli", "demo", "--out", str(out)], cwd=ROOT, check=False
    )
    total = time.monotonic() - started
    figures = {
        "total_s": round(total, 1),
        "exit": float(result.returncode),
        "real_cpu_profiles_s": round(part_seconds(out / "real-cpu"), 1),
        "standin_profiles_s": round(part_seconds(out / "stand-in"), 1),
        "vs_budget": round(total / BUDGET_S[label], 2),
    }
    print(f"{label}: {json.dumps(figures)}", flush=True)
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--skip-cold", action="store_true", help="only the warm run")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bwstack-demo-bench-") as tmp:
        results = {}
        if not args.skip_cold:
            drop = images_to_drop()
            subprocess.run(["docker", "image", "rm", "--force", *drop], capture_output=True, check=False)
            print(f"cold: removed {len(drop)} image(s): {', '.join(drop)}", flush=True)
            results["cold"] = run("cold", Path(tmp) / "cold")
        results["warm"] = run("warm", Path(tmp) / "warm")
        if "cold" in results:
            ratio = results["warm"]["total_s"] / results["cold"]["total_s"]
            print(f"warm / cold: {ratio:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
