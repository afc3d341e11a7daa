"""The ``bwstack up | down | fetch | calibrate`` commands: a profile's service on this host and what it needs
(the model in the cache, the quality probe's baseline). Options and output only; ``up``/``down`` live in
:mod:`bwstack.ops.updown`, the cache in :mod:`bwstack.host.fetch`, the baseline in
:mod:`bwstack.host.calibrate`. Registered on the command group by ``bwstack.cli``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from bwstack.cli.options import MAX_SOAK_S, file_option
from bwstack.errors import UserError


@click.command()
@file_option
@click.argument("profile")
@click.option("--url", default=None, help="The running known-good server (default http://127.0.0.1:<port>).")
@click.option(
    "--margin",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Nats/token below the baseline that read as garbage (default 1.0).",
)
def calibrate(file: Path, profile: str, url: str | None, margin: float | None) -> None:
    """Record the quality probe's baseline (passage score) of a running known-good server for the model."""
    from bwstack.host import calibrate as calib
    from bwstack.stack import loader
    from healthchecks import judging

    stack = loader.load_stack(file)
    loader.emit_warnings(stack)
    baseline, path = calib.calibrate(
        stack, profile, url=url, margin=judging.DEFAULT_MARGIN if margin is None else margin
    )
    click.echo(
        f"{path}: {stack.model_path_for(profile)} passage {baseline.passage}: {baseline.score:.4f} "
        "nats/token over "
        f"{baseline.tokens} tokens (SGLang {baseline.sglang or '?'}, profile {profile}); healthchecks report "
        f"garbage below {baseline.score - baseline.margin:.4f}. Run 'bwstack render' and commit both files."
    )


@click.command()
@file_option
@click.argument("profile", required=False)
@click.option("--force", is_flag=True, help="Start a profile that is known to fail.")
@click.option(
    "--retry",
    is_flag=True,
    help="Load the model again although this launch spec already failed in a way a restart cannot heal.",
)
@click.option("--timeout", type=click.IntRange(min=1), default=None, help="Seconds to wait for healthy.")
@click.option("--no-wait", is_flag=True, help="Return once the container is started.")
@click.option("--dry-run", is_flag=True, help="Print the profile that would start and why; start nothing.")
@click.option(
    "--skip-model-check",
    is_flag=True,
    help="Start even when 'bwstack fetch' has not verified the model (SGLang then downloads it).",
)
@click.option(
    "--soak",
    type=float,
    default=None,
    metavar="SECONDS",
    help="Once healthy, keep the sweep's soak (stack.soak settings) on the service for SECONDS; "
    "exit 1 unless its verdict is ok.",
)
def up(
    file: Path,
    profile: str | None,
    force: bool,
    retry: bool,
    timeout: int | None,
    no_wait: bool,
    dry_run: bool,
    skip_model_check: bool,
    soak: float | None,
) -> None:
    """Start one profile's service and wait until it is healthy (or print why it is not).

    Without PROFILE (and without BWSTACK_PROFILE), pick one for this host: its GPUs' arch and count, the
    profiles expected and predicted healthy there, the fastest measured, else the first in profiles.yaml.
    Refuses (exit 1) while the model is not fetched: run 'bwstack fetch' first.

    With --soak SECONDS, the healthy service then carries the sweep's soak: stack.soak.concurrency streamed
    requests from inside the container against 127.0.0.1, every logprob checked, a request with no token for
    stack.soak.stall_after_s ending it as hang, more than 2% failed requests named by their class; a progress
    line every 15 s, then the figures (requests, tokens, ITL p50/p99, stalls, worst window) and 'soak verdict:
    ...'. Exit 0 when the verdict is ok, 1 on hang, nan, garbage, failed requests or no result (the service is
    left as it is), 2 on bad input.
    """
    from bwstack.ops import choose, updown
    from bwstack.stack import loader

    if soak is not None:
        _check_soak(soak, dry_run=dry_run, no_wait=no_wait)
    stack = loader.load_stack(file)
    loader.emit_warnings(stack)
    if profile is None:
        from bwstack.host.doctor.probe import default_probe

        choice = choose.choose(stack, default_probe(), pinned=choose.pinned_profile())
        if dry_run or choice.profile is None:
            from bwstack import textlayout

            for line in choice.lines(textlayout.terminal_width()):
                click.echo(line)
            if choice.profile is not None:
                from bwstack.know.evidence import dry_run_line

                for line in textlayout.wrap(dry_run_line(stack, choice.profile), textlayout.terminal_width()):
                    click.echo(line)
        if choice.profile is None:
            sys.exit(1)
        if dry_run:
            return
        click.echo(f"bwstack: starting {choice.profile}: {choice.why}")
        profile = choice.profile
    elif dry_run:
        stack.profile(profile)
        click.echo(f"choice: {profile}: named on the command line")
        from bwstack import textlayout
        from bwstack.know.evidence import dry_run_line

        for line in textlayout.wrap(dry_run_line(stack, profile), textlayout.terminal_width()):
            click.echo(line)
        return
    sys.exit(
        updown.up(
            stack,
            profile,
            force=force,
            timeout=timeout,
            wait=not no_wait,
            skip_model_check=skip_model_check,
            soak_s=soak or 0.0,
            retry=retry,
        )
    )


def _check_soak(seconds: float, *, dry_run: bool, no_wait: bool) -> None:
    """``up --soak``: a positive, finite number of seconds on a start that waits for health."""
    import math

    if dry_run:
        raise UserError("up: --soak runs load against the started service; --dry-run starts nothing")
    if no_wait:
        raise UserError("up: --soak needs a healthy service; --no-wait does not wait for one")
    if not math.isfinite(seconds) or not 0 < seconds <= MAX_SOAK_S:
        raise UserError(f"up: --soak wants seconds, more than 0 and at most {MAX_SOAK_S}, got {seconds:g}")


@click.command()
@file_option
@click.argument("profile", required=False)
@click.option(
    "--cache-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Host folder of the cache (the services' HF_HOME); default stack.model_cache_path or the volume.",
)
@click.option(
    "--max-workers", type=click.IntRange(1, 64), default=8, show_default=True, help="Files in parallel."
)
def fetch(file: Path, profile: str | None, cache_dir: Path | None, max_workers: int) -> None:
    """Download the model at its pinned revision into the services' cache, verify it, record a manifest.

    Resumable: run it again after an interruption. Exit 0 when the cache holds the model complete, 1 when
    the download or the verification failed (what is left is printed), 2 on bad input.
    """
    from bwstack.host import fetch as fetch_mod
    from bwstack.stack import loader

    stack = loader.load_stack(file)
    loader.emit_warnings(stack)
    if profile is not None:
        stack.profile(profile)  # every profile serves model.path; the name is checked, not needed
    if stack.tiny_models:  # a CPU stack: its checkpoints are made here, not downloaded
        from bwstack.host import tinyimage
        from bwstack.tiny import ensure

        made = ensure.ensure_for_stack(stack, echo=click.echo, copy_writer=tinyimage.for_stack(stack))
        click.echo(f"ok: {len(made)} tiny model(s) in {made[0].parent}")
        return
    sys.exit(fetch_mod.fetch(stack, cache_dir=cache_dir, max_workers=max_workers, echo=click.echo))


@click.command()
@file_option
@click.option("--volumes", "-v", is_flag=True, help="Also remove volumes (model cache!).")
def down(file: Path, volumes: bool) -> None:
    """Stop and remove every bwstack service of this project."""
    from bwstack.ops import updown
    from bwstack.stack import loader

    stack = loader.load_stack(file)
    sys.exit(updown.down(stack, volumes=volumes))
