"""``bwstack demo``: the real CPU sweep, then the stand-in sweep of the GPU profiles, in one report."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bwstack import record
from bwstack.record import read
from bwstack.stack import loader
from bwstack.stack.schema import Stack
from bwstack.sweep import report
from bwstack.sweep.run import default_out, run_sweep
from healthchecks import signatures

DEMO_INTRO = (
    "bwstack demo, part 1 of 2: every profile of {cpu_file} runs on REAL SGLang on the CPU (tiny models made "
    "here; no GPU kernels). Part 2: every profile of {file} runs on the CPU stand-in of the SGLang server, "
    "which parses the pinned SGLang's arguments and injects the failure each profile is expected to hit. The "
    "real healthcheck, failure catalog, sweep and report do the rest; one report tells the two apart."
)
DEMO_INTRO_STANDIN_ONLY = (
    "bwstack demo: every profile of {file} runs on a CPU stand-in of the SGLang server (no GPU needed; "
    "no {cpu_file} beside it, so no real-SGLang part). The stand-in injects the failure each profile is "
    "expected to hit; the real healthcheck, failure catalog, sweep and report do the rest."
)
#: the CPU stack the demo runs for real before the stand-in part, looked up beside the stack file
CPU_STACK_FILE = "profiles.cpu.yaml"
REAL_PART = "real-cpu"
#: the CPU profiles the demo runs (tagged in profiles.cpu.yaml); `bwstack -f profiles.cpu.yaml sweep` runs all
DEMO_TAG = "demo"
#: seconds of soak (stall watchdog, logprob checks) on each healthy real CPU profile of the demo
DEMO_SOAK_S = 10.0
STANDIN_PART = "stand-in"


def run_demo(
    stack: Stack,
    *,
    out: Path | None = None,
    keep: bool = False,
    standin_load_seconds: float | None = None,
    console: Any = None,
) -> int:
    """``bwstack demo``: the real CPU sweep (profiles.cpu.yaml), then the stand-in sweep of ``stack``, then
    one combined report (``real-cpu/`` and ``stand-in/`` hold each part's own report)."""
    from rich.console import Console

    console = console or Console(highlight=False, soft_wrap=True)
    out_dir = out if out is not None else default_out(stack)
    cpu_path = stack.path.parent / CPU_STACK_FILE
    cpu_stack = loader.load_stack(cpu_path) if cpu_path.is_file() and not stack.is_cpu else None
    words = {"file": stack.path.name, "cpu_file": CPU_STACK_FILE}
    console.print((DEMO_INTRO if cpu_stack else DEMO_INTRO_STANDIN_ONLY).format(**words), markup=False)
    parts: list[tuple[str, Path]] = []
    codes = []
    if cpu_stack is not None:
        demo = [n for n, p in cpu_stack.profiles.items() if DEMO_TAG in p.tags]  # all when none is tagged
        console.print(f"demo part 1: real SGLang on the CPU ({cpu_path.name})", markup=False)
        codes.append(
            run_sweep(
                cpu_stack,
                demo,
                variant=None,
                fast=False,
                standin=False,
                out=out_dir / REAL_PART,
                resume=False,
                timeout=None,
                keep=keep,
                bench=True,  # the speed column: a bounded load against each healthy real profile
                console=console,
                soak=DEMO_SOAK_S,  # a short soak with the stall watchdog on each healthy real profile
            )
        )
        parts.append((REAL_PART, out_dir / REAL_PART))
        console.print(f"demo part 2: the stand-in for the GPU profiles ({stack.path.name})", markup=False)
    standin_out = out_dir / STANDIN_PART if cpu_stack is not None else out_dir
    codes.append(
        run_sweep(stack, [], variant=None, fast=False, standin=True, out=standin_out, resume=False,
                  timeout=None, keep=keep, standin_load_seconds=standin_load_seconds, console=console)
    )  # fmt: skip
    parts.append((STANDIN_PART, standin_out))
    docs = [read.load(folder / record.RESULTS_FILE) for _, folder in parts]
    if len(docs) > 1:
        report.write_report(out_dir, report.combine(docs, labels=[label for label, _ in parts]))
    verdicts = sorted({str(row["verdict"]) for doc in docs for row in doc["results"].values()})
    for verdict in verdicts:
        console.print(f"  {verdict}: {signatures.DESCRIPTIONS.get(verdict, '')}", markup=False)
    console.print(
        f"open {out_dir / record.HTML_FILE} in a browser for the evidence of each profile "
        "(rows say 'real SGLang' or 'stand-in')",
        markup=False,
    )
    return next((code for code in codes if code), 0)
