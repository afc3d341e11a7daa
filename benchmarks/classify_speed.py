"""Failure-catalog speed: classifying a 100 KB log in-process, and the light probe's start-up (no Docker).

Both figures are measured against a baseline in the same run: the catalog and healthcheck as they were before
issue 11 (``git show BASE:healthchecks/...``, default commit d1be1f3), loaded side by side with the current
ones. Printed: CPU-time medians (and the fastest run: the machine may be shared), and the ratio current /
before.
Nothing asserts on speed. Run from the repository root:

    .venv/bin/python benchmarks/classify_speed.py [--base COMMIT] [--repeat N] [--starts N]

The 100 KB logs are real text from the corpus of real SGLang logs (tests/healthchecks/corpus): a startup log,
real serving lines repeated and a real crash at the end; and, as the worst case for the prefilter, nothing but
failures (every corpus log concatenated). ``start-up`` is ``python3 -c "import healthchecks.warmup"`` in a
fresh interpreter (what each light probe pays before its first socket call) next to the ``python3 -c pass``
floor, runs interleaved.
"""

from __future__ import annotations

import argparse
import importlib.util
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "healthchecks" / "corpus"
SIZE = 100 * 1024
FILES = ("__init__.py", "common.py", "signatures.py", "warmup.py")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--base", default="d1be1f3", help="the commit whose healthchecks/ is the baseline")
    parser.add_argument("--repeat", type=int, default=200, help="classifications per catalog")
    parser.add_argument("--starts", type=int, default=30, help="interpreter starts per variant")
    return parser.parse_args(argv)


def old_healthchecks(base: str, into: Path) -> Path:
    """The baseline's healthchecks package, written under ``into``."""
    pkg = into / "healthchecks"
    pkg.mkdir(parents=True)
    for name in FILES:
        text = subprocess.run(
            ["git", "show", f"{base}:healthchecks/{name}"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        (pkg / name).write_text(text, encoding="utf-8")
    return into


def load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def serving_log() -> str:
    """100 KB shaped like a real server log: a real startup, real serving lines repeated, a real crash."""
    startup = (CORPUS / "qwq32b_tp4_ready_then_health_checks.log").read_text(encoding="utf-8")
    serving = "".join(
        line + "\n"
        for name in ("sglang7783_watchdog_pyspy_not_found_tp3.log", "sglang14694_eagle_verify_truncated.log")
        for line in (CORPUS / name).read_text(encoding="utf-8").splitlines()
        if "POST /v1/completions" in line or "Decode batch" in line or "Prefill batch" in line
    )
    crash = (CORPUS / "sglang5285_capture_cuda_graph_oom.log").read_text(encoding="utf-8")
    body = startup
    while len(body) + len(crash) < SIZE:
        body += serving
    return (body[: SIZE - len(crash)].rsplit("\n", 1)[0] + "\n" + crash)[:SIZE]


def failure_log() -> str:
    """100 KB of nothing but failures: every corpus log concatenated (the worst case for the prefilter)."""
    parts: list[str] = []
    size = 0
    while size < SIZE:
        for path in sorted(CORPUS.glob("*.log")):
            text = path.read_text(encoding="utf-8")
            parts.append(text if text.endswith("\n") else text + "\n")
            size += len(text)
    return "".join(parts)[:SIZE]


def time_classify(module: ModuleType, text: str, repeat: int) -> tuple[float, float]:
    """(median, fastest) CPU seconds of one in-process classification of ``text`` (CPU time: the figure
    does not count the time other processes on a shared machine hold the core)."""
    module.classify_text(text)  # warm: regexes compiled
    runs = []
    for _ in range(repeat):
        started = time.thread_time()
        module.classify_text(text)
        runs.append(time.thread_time() - started)
    return statistics.median(runs), min(runs)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        base_root = old_healthchecks(args.base, Path(tmp))
        before = load(base_root / "healthchecks" / "signatures.py", "signatures_before")
        after = load(ROOT / "healthchecks" / "signatures.py", "signatures_after")
        print(
            f"classify 100 KB in-process, CPU time, median (fastest) of {args.repeat}, "
            f"{len(before.SIGNATURES)} signatures before, {len(after.SIGNATURES)} now:"
        )
        for label, text in (("serving log + crash", serving_log()), ("failures only", failure_log())):
            b_med, b_min = time_classify(before, text, args.repeat)
            a_med, a_min = time_classify(after, text, args.repeat)
            print(
                f"  {label:20} before {b_med * 1e3:5.2f} ({b_min * 1e3:5.2f}) ms   now {a_med * 1e3:5.2f} "
                f"({a_min * 1e3:5.2f}) ms   now / before {a_med / b_med:4.2f} ({a_min / b_min:4.2f})   "
                f"class {before.classify_text(text).cls} / {after.classify_text(text).cls}"
            )
        variants = {
            "floor (python3 -c pass)": [sys.executable, "-c", "pass"],
            "before": [
                sys.executable,
                "-c",
                f"import sys; sys.path.insert(0, {str(base_root)!r}); import healthchecks.warmup",
            ],
            "current": [
                sys.executable,
                "-c",
                f"import sys; sys.path.insert(0, {str(ROOT)!r}); import healthchecks.warmup",
            ],
        }
        medians = {}
        runs: dict[str, list[float]] = {name: [] for name in variants}
        for _ in range(args.starts):
            for name, cmd in variants.items():
                before_usage = resource.getrusage(resource.RUSAGE_CHILDREN)
                subprocess.run(cmd, cwd=tmp, check=True)
                after_usage = resource.getrusage(resource.RUSAGE_CHILDREN)
                runs[name].append(
                    after_usage.ru_utime
                    - before_usage.ru_utime
                    + after_usage.ru_stime
                    - before_usage.ru_stime
                )
        medians = {name: statistics.median(values) for name, values in runs.items()}
        print(f"light-probe start-up (import healthchecks.warmup), CPU time, median of {args.starts}:")
        for name, value in medians.items():
            print(f"  {name:24} {value * 1000:7.1f} ms")
        floor = medians["floor (python3 -c pass)"]
        print(
            f"  current / before       {medians['current'] / medians['before']:7.2f}"
            f"   (above the floor: {(medians['before'] - floor) * 1000:.1f} ms -> "
            f"{(medians['current'] - floor) * 1000:.1f} ms)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
