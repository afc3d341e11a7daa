"""The ``bwstack sweep | demo`` commands: options and output; the sweep is :mod:`bwstack.sweep.run`, the demo
:mod:`bwstack.sweep.demo`. Registered on the command group by ``bwstack.cli``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import click

from bwstack.cli.options import SoakSeconds, file_option, keep_option, standin_load_option


@click.command()
@file_option
@click.argument("profiles", nargs=-1)
@click.option(
    "--variant", default=None, help="Run every profile on this image variant (one variant's matrix)."
)
@click.option(
    "--fast", is_flag=True, help="Dummy weights and fewer layers: minutes per profile, not a full load."
)
@click.option(
    "--standin", is_flag=True, help="Run on the CPU stand-in server, each profile with its expected fault."
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Report folder (default reports/<UTC timestamp>/ next to the profiles file).",
)
@click.option("--resume", is_flag=True, help="Continue the report in --out; skip profiles already decided.")
@click.option(
    "--timeout", type=click.IntRange(min=1), default=None, help="Seconds per profile before 'timeout'."
)
@keep_option
@standin_load_option
@click.option("--tag", "tags", multiple=True, help="Only the profiles carrying this tag (repeatable).")
@click.option("--bench", is_flag=True, help="Measure each healthy profile's speed (stack.bench settings).")
@click.option(
    "--soak",
    type=SoakSeconds(),
    default=0.0,
    help="Seconds of sustained load with a stall watchdog on each healthy profile (stack.soak settings).",
)
@click.option(
    "--compare-to",
    "compare_to",
    default=None,
    metavar="PROFILE",
    help="Compare each healthy profile's token distributions and retrieval with this profile's (run first).",
)
@click.option(
    "--retrieval", is_flag=True, help="Measure each healthy profile's needle retrieval accuracy by length."
)
def sweep(
    file: Path,
    profiles: Sequence[str],
    variant: str | None,
    fast: bool,
    standin: bool,
    out: Path | None,
    resume: bool,
    timeout: int | None,
    keep: bool,
    standin_load_seconds: float | None,
    tags: Sequence[str],
    bench: bool,
    soak: float,
    compare_to: str | None,
    retrieval: bool,
) -> None:
    """Try every profile, stop each as soon as the verdict is decisive, and write a compatibility matrix.

    Exit status 0 when every verdict matches the profile's expect, 1 otherwise, 2 on bad input.
    """
    from bwstack.stack import loader
    from bwstack.sweep.run import run_sweep

    stack = loader.load_stack(file)
    loader.emit_warnings(stack)
    sys.exit(
        run_sweep(stack, [*profiles, *stack.tagged(tags)], variant=variant, fast=fast,
                            standin=standin, out=out, resume=resume, timeout=timeout, keep=keep,
                            standin_load_seconds=standin_load_seconds, bench=bench, soak=soak,
                            compare_to=compare_to, retrieval=retrieval)
    )  # fmt: skip


@click.command()
@file_option
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None, help="Report folder.")
@keep_option
@standin_load_option
def demo(file: Path, out: Path | None, keep: bool, standin_load_seconds: float | None) -> None:
    """The stand-in sweep over every profile: the whole pipeline on a machine without a GPU."""
    from bwstack.stack import loader
    from bwstack.sweep.demo import run_demo

    stack = loader.load_stack(file)
    loader.emit_warnings(stack)
    sys.exit(run_demo(stack, out=out, keep=keep, standin_load_seconds=standin_load_seconds))
