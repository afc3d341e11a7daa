"""``validate`` on a large stack: cost per profile at 100, 1000, 3000 profiles (goal: linear, <= 2 ms each).

The stacks are the real profiles.yaml's stack and model sections with N generated profiles (flow mappings, so
3000 fit under the loader's 256 KiB bound), in a scratch copy of the stack. Printed per N: the in-process
``model.load_stack`` time (median of --repeat runs, the machine may be shared), ms per profile, and the ratio
of that per-profile cost to the 100-profile one (1.0 = linear); then the whole command, ``bwstack validate``
on 3000 profiles in a fresh interpreter, next to the ``import bwstack.cli`` floor measured in the same
run. Nothing asserts on speed. Run from the repository root:

    .venv/bin/python benchmarks/validate_scale.py [--repeat N]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import add_smoke

ROOT = Path(__file__).resolve().parents[1]
SIZES = (100, 1000, 3000)
BACKENDS = ("triton", "flashinfer", "torch_native")
KV = ("auto", "bf16", "fp8_e4m3")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per size (median printed)")
    add_smoke(parser)
    args = parser.parse_args(argv)
    if args.smoke:  # one run of the smallest size
        args.repeat = 1
    return args


def scratch_stack(folder: Path) -> None:
    for name in ("profiles.yaml", "Dockerfile"):
        shutil.copy2(ROOT / name, folder / name)
    for name in ("images", "templates", "healthchecks"):
        shutil.copytree(
            ROOT / name, folder / name, ignore=shutil.ignore_patterns("__pycache__", "wheelhouse")
        )


def write_profiles(folder: Path, count: int) -> Path:
    text = (ROOT / "profiles.yaml").read_text(encoding="utf-8")
    head = text[: text.index("\nprofiles:")]
    rows = [
        f"  p{i:05d}: {{attention_backend: {BACKENDS[i % 3]}, kv_cache_dtype: {KV[(i // 3) % 3]}, "
        "expect: healthy}"
        for i in range(count)
    ]
    path = folder / "profiles.yaml"
    path.write_text(head + "\nprofiles:\n" + "\n".join(rows) + "\n", encoding="utf-8")
    return path


def timed_load(path: Path, repeat: int) -> float:
    from bwstack.stack import loader

    runs = []
    for _ in range(repeat):
        started = time.perf_counter()
        stack = loader.load_stack(path)
        runs.append(time.perf_counter() - started)
        assert len(stack.profiles) > 0
    return statistics.median(runs)


def timed_command(argv: list[str], repeat: int) -> float:
    runs = []
    for _ in range(repeat):
        started = time.perf_counter()
        subprocess.run(argv, cwd=ROOT, capture_output=True, check=True)
        runs.append(time.perf_counter() - started)
    return statistics.median(runs)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bwstack-validate-bench-") as tmp:
        folder = Path(tmp)
        scratch_stack(folder)
        print(f"{'profiles':>8} {'load_stack':>11} {'ms/profile':>11} {'vs 100':>7}")
        base = None
        sizes = SIZES[:1] if args.smoke else SIZES
        for count in sizes:
            seconds = timed_load(write_profiles(folder, count), args.repeat)
            per = seconds / count * 1000
            base = base or per
            print(f"{count:>8} {seconds:>10.2f}s {per:>11.2f} {per / base:>7.2f}")
        path = write_profiles(folder, sizes[-1])
        command = timed_command(
            [sys.executable, "-m", "bwstack.cli", "validate", "-f", str(path)], args.repeat
        )
        floor = timed_command([sys.executable, "-c", "import bwstack.cli"], args.repeat)
        print(
            f"bwstack validate, {sizes[-1]} profiles: {command:.2f} s wall "
            f"(of which {floor:.2f} s is the interpreter with bwstack.cli imported; "
            f"ratio {command / floor:.1f}x that floor)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
