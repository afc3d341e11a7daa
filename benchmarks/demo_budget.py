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
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests")]  # support.stack: a scratch copy of the stack (--smoke)

from _common import add_smoke, require_docker  # noqa: E402

from support.stack import copy_stack, edit_yaml  # noqa: E402

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


def part_seconds(report: Path) -> float | None:
    """The summed profile times of one part of the demo's report; None when the demo had no such part."""
    if not (report / "results.json").is_file():
        return None
    doc = json.loads((report / "results.json").read_text())
    return sum(float(row.get("elapsed_s") or 0) for row in doc["results"].values())


def smoke_stack(folder: Path) -> Path:
    """A scratch copy of the stack with its first profile only and no profiles.cpu.yaml: the demo's stand-in
    part alone (a real CPU profile is a minute and more on 2 cores; the sweep tests run that part)."""
    path = copy_stack(folder)
    for name in ("profiles.cpu.yaml", "compose.cpu.yaml"):
        (folder / name).unlink(missing_ok=True)

    def first_only(data: Any) -> None:
        for name in list(data["profiles"])[1:]:
            del data["profiles"][name]

    edit_yaml(path, first_only)
    return path


def run(label: str, out: Path, stack: Path) -> dict[str, float | None]:
    started = time.monotonic()
    argv = [sys.executable, "-m", "bwstack.cli", "-f", str(stack), "demo", "--out", str(out)]
    result = subprocess.run(argv, cwd=ROOT, check=False)
    total = time.monotonic() - started
    real = part_seconds(out / "real-cpu")
    standin = part_seconds(out / "stand-in") if real is not None else part_seconds(out)  # stand-in only
    figures = {
        "total_s": round(total, 1),
        "exit": float(result.returncode),
        "real_cpu_profiles_s": None if real is None else round(real, 1),
        "standin_profiles_s": None if standin is None else round(standin, 1),
        "vs_budget": round(total / BUDGET_S[label], 2),
    }
    print(f"{label}: {json.dumps(figures)}", flush=True)
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--skip-cold", action="store_true", help="only the warm run")
    add_smoke(parser)
    args = parser.parse_args()
    require_docker()
    with tempfile.TemporaryDirectory(prefix="bwstack-demo-bench-") as tmp:
        stack = ROOT / "profiles.yaml"
        if args.smoke:  # warm only (no image removed), one stand-in profile
            args.skip_cold = True
            (Path(tmp) / "stack").mkdir()
            stack = smoke_stack(Path(tmp) / "stack")
            print("smoke: the demo of a scratch stack of one stand-in profile (not the budget's run)")
        results = {}
        if not args.skip_cold:
            drop = images_to_drop()
            subprocess.run(["docker", "image", "rm", "--force", *drop], capture_output=True, check=False)
            print(f"cold: removed {len(drop)} image(s): {', '.join(drop)}", flush=True)
            results["cold"] = run("cold", Path(tmp) / "cold", stack)
        results["warm"] = run("warm", Path(tmp) / "warm", stack)
        if "cold" in results:
            ratio = results["warm"]["total_s"] / results["cold"]["total_s"]
            print(f"warm / cold: {ratio:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
