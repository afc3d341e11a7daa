"""Failure-catalog speed: classifying a 100 KB log in-process, and the light probe's start-up (no Docker).

Both figures are measured against a baseline in the same run: the catalog and healthcheck as they were before
issue 11 (``git show BASE:healthchecks/...``, default commit d1be1f3), loaded side by side with the current
ones. Printed: CPU-time medians (and the fastest run: the machine may be shared), and the ratio current /
before.
Nothing asserts on speed. Run from the repository root:

    .venv/bin/python benchmarks/classify_speed.py [--base COMMIT] [--repeat N] [--starts N]

The 100 KB logs are real text from the corpus of real SGLang logs (tests/healthchecks/corpus): a startup log
and real serving lines repeated, with no failure (the structural rules then read the log's end) and with a
real crash at the end; and, as the worst case for the prefilter, nothing but failures (every corpus log
concatenated). ``start-up`` is ``python3 -c "import healthchecks.warmup"`` in a
fresh interpreter (what each light probe pays before its first socket call) next to the ``python3 -c pass``
floor, runs interleaved.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

from _common import add_smoke

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "healthchecks" / "corpus"
SIZE = 100 * 1024


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--base", default="d1be1f3", help="the commit whose healthchecks/ is the baseline")
    parser.add_argument("--repeat", type=int, default=200, help="classifications per catalog")
    parser.add_argument("--starts", type=int, default=30, help="interpreter starts per variant")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("logs", nargs="*", help=argparse.SUPPRESS)
    add_smoke(parser)
    args = parser.parse_args(argv)
    if args.smoke and not args.worker:  # a few classifications and interpreter starts per catalog
        args.repeat, args.starts = 5, 2
    return args


def old_healthchecks(base: str, into: Path) -> Path:
    """The baseline's whole healthchecks package (a module or a package of its catalog), under ``into``."""
    archive = subprocess.run(
        ["git", "archive", base, "healthchecks"], cwd=ROOT, capture_output=True, check=True
    )
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into


def measure_in(root: Path, logs: dict[str, Path], repeat: int) -> dict[str, list[float | int | str]]:
    """Each log's (median, fastest, class, signature count), classified by ``root``'s catalog in a fresh
    interpreter (two catalogs of one package name cannot share a process)."""
    argv = [sys.executable, __file__, "--worker", str(root), "--repeat", str(repeat)]
    argv += [f"{label}={path}" for label, path in logs.items()]
    done = subprocess.run(argv, capture_output=True, text=True, check=True)
    result: dict[str, list[float | int | str]] = json.loads(done.stdout)
    return result


def worker(root: str, repeat: int, logs: list[str]) -> int:
    """``--worker ROOT``: time ROOT's catalog on each ``label=path`` log; prints JSON."""
    sys.path.insert(0, root)
    from healthchecks import signatures

    out = {}
    for item in logs:
        label, _, path = item.partition("=")
        text = Path(path).read_text(encoding="utf-8")
        median, fastest = time_classify(signatures, text, repeat)
        match = signatures.classify_text(text)  # None: no root cause (a healthy log)
        out[label] = [median, fastest, match.cls if match else "none", len(signatures.SIGNATURES)]
    print(json.dumps(out))
    return 0


def _startup_and_serving(size: int) -> str:
    """``size`` characters (cut at a line end) of a real startup followed by real serving lines repeated."""
    startup = (CORPUS / "qwq32b_tp4_ready_then_health_checks.log").read_text(encoding="utf-8")
    serving = "".join(
        line + "\n"
        for name in ("sglang7783_watchdog_pyspy_not_found_tp3.log", "sglang14694_eagle_verify_truncated.log")
        for line in (CORPUS / name).read_text(encoding="utf-8").splitlines()
        if "POST /v1/completions" in line or "Decode batch" in line or "Prefill batch" in line
    )
    body = startup
    while len(body) < size:
        body += serving
    return body[:size].rsplit("\n", 1)[0] + "\n"


def serving_log() -> str:
    """100 KB shaped like a real server log: a real startup, real serving lines repeated, a real crash."""
    crash = (CORPUS / "sglang5285_capture_cuda_graph_oom.log").read_text(encoding="utf-8")
    return (_startup_and_serving(SIZE - len(crash)) + crash)[:SIZE]


def healthy_log() -> str:
    """100 KB of a healthy server: the same startup and serving lines, no failure (no line-level signature
    matches, so the structural rules read the log's end: the common case of the live healthcheck)."""
    return _startup_and_serving(SIZE)


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
    if args.worker:
        return worker(args.worker, args.repeat, args.logs)
    with tempfile.TemporaryDirectory() as tmp:
        base_root = old_healthchecks(args.base, Path(tmp))
        logs = {
            "healthy, serving": Path(tmp) / "healthy.log",
            "serving log + crash": Path(tmp) / "serving.log",
            "failures only": Path(tmp) / "failures.log",
        }
        logs["healthy, serving"].write_text(healthy_log(), encoding="utf-8")
        logs["serving log + crash"].write_text(serving_log(), encoding="utf-8")
        logs["failures only"].write_text(failure_log(), encoding="utf-8")
        before = measure_in(base_root, logs, args.repeat)
        after = measure_in(ROOT, logs, args.repeat)
        counts = (before["failures only"][3], after["failures only"][3])
        print(
            f"classify 100 KB in-process, CPU time, median (fastest) of {args.repeat}, "
            f"{counts[0]} signatures before, {counts[1]} now:"
        )
        for label in logs:
            b_med, b_min, b_cls = (float(before[label][0]), float(before[label][1]), before[label][2])
            a_med, a_min, a_cls = (float(after[label][0]), float(after[label][1]), after[label][2])
            print(
                f"  {label:20} before {b_med * 1e3:5.2f} ({b_min * 1e3:5.2f}) ms   now {a_med * 1e3:5.2f} "
                f"({a_min * 1e3:5.2f}) ms   now / before {a_med / b_med:4.2f} ({a_min / b_min:4.2f})   "
                f"class {b_cls} / {a_cls}"
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
