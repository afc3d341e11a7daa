"""The ``bwstack bisect`` command: options and output; the search is :mod:`bwstack.bisect.search`, one step
:mod:`bwstack.bisect.step`. Registered on the command group by ``bwstack.cli`` (its own module, so
``cli/__init__.py`` stays small); imports nothing heavy at module level.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from bwstack.cli.options import file_option

DEFAULT_REPO = "lmsysorg/sglang"


@click.command("bisect")
@click.argument("profile")
@click.option("--good", required=True, help="A dated nightly tag with the known verdict (the older one).")
@click.option("--bad", required=True, help="A dated nightly tag whose verdict differs (the newer one).")
@click.option(
    "--tags",
    "tags_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Candidate tags, one per line, optionally with a push time (default: local images + registry).",
)
@click.option("--repo", default=DEFAULT_REPO, show_default=True, help="The image repository of the tags.")
@click.option(
    "--good-verdict",
    default="healthy",
    show_default=True,
    help="The verdict of the --good tag; any other verdict is a change.",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="State and reports (default reports/bisect-<profile>-<good sha>-<bad sha>/).",
)
@click.option(
    "--resume", is_flag=True, help="Continue the bisect in --out (after Ctrl-C, a kill, the time bound)."
)
@click.option(
    "--timeout", type=click.IntRange(min=1), default=None, help="Seconds per step (the sweep's bound)."
)
@click.option("--fast", is_flag=True, help="Each step as a --fast sweep (dummy weights, fewer layers).")
@file_option
def bisect(
    profile: str,
    *,
    good: str,
    bad: str,
    tags_file: Path | None,
    repo: str,
    good_verdict: str,
    out: Path | None,
    resume: bool,
    timeout: int | None,
    fast: bool,
    file: Path,
) -> None:
    """Find the first dated nightly image on which PROFILE's verdict changes (binary search, one sweep step
    per tag, resumable). Exit 0 when placed, 1 when the time bound or untestable tags leave it open."""
    from rich.console import Console

    from bwstack.bisect import search, step
    from bwstack.errors import UserError
    from bwstack.stack import loader, schema
    from bwstack.sweep.run import default_timeout, signal_handlers

    stack = loader.load_stack(file)
    loader.emit_warnings(stack)
    stack.profile(profile)
    if good_verdict not in schema.EXPECT_CLASSES:
        raise UserError(
            f"unknown class {good_verdict!r} (valid: {', '.join(schema.EXPECT_CLASSES)})",
            field="--good-verdict",
        )
    good_tag = search.parse_tag(good, field="--good")
    bad_tag = search.parse_tag(bad, field="--bad")
    folder = out or stack.root / "reports" / f"bisect-{profile}-{good_tag.sha[:12]}-{bad_tag.sha[:12]}"
    inputs = _inputs(
        stack,
        profile,
        repo=repo,
        good=good,
        bad=bad,
        good_verdict=good_verdict,
        tags_file=tags_file,
        fast=fast,
    )
    if resume:
        state = search.load_state(folder, inputs)
        if state["status"] == "done":  # the answer is replayed from the steps, never read back as written
            state["result"] = search.result_of(state, good_verdict)
    else:
        if (folder / search.STATE_FILE).exists():
            raise UserError(
                "a bisect is already here; pass --resume or another --out", file=folder / search.STATE_FILE
            )
        candidates = search.resolve_candidates(
            repo,
            good,
            bad,
            tags_file=tags_file,
            local_tags=lambda: step.local_tags(repo),
            registry=None if search.registry_disabled() else search.hub_tags,
        )
        state = search.new_state(inputs, candidates)
        search.save_state(folder, state)
    for note in state["notes"]:
        click.echo(f"bwstack: note: {note}", err=True)
    per_step = float(timeout) if timeout else default_timeout(stack, standin=False)
    tags = search.tags_of(state)
    left = search.Search(tags, search.steps_of(state)).steps_left()
    click.echo(
        f"bisect: {profile}: {len(tags)} tags from {state['source']}, {good} .. {bad}; "
        f"≤{left} step(s) left, time bound {left} x {per_step:.0f} s; state in {folder}"
    )
    if state["status"] == "done":
        code = 0 if state["result"]["placed"] else 1
    else:
        console = Console(highlight=False, soft_wrap=True)
        runner = step.StepRunner(
            stack,
            profile,
            repo,
            folder,
            fast=fast,
            good_verdict=good_verdict,
            console=console,
            echo=click.echo,
        )
        code = _run(
            search,
            state,
            folder,
            good_verdict=good_verdict,
            runner=runner,
            per_step=per_step,
            handlers=signal_handlers,
        )
    if state["result"] is not None:
        for line in search.summary_lines(state, folder):
            click.echo(line)
    sys.exit(code)


def _run(
    search: Any, state: Any, folder: Path, *, good_verdict: str, runner: Any, per_step: float, handlers: Any
) -> int:
    def interrupt(signum: int, _frame: object) -> None:
        raise search.Interrupted(signum)

    with handlers(interrupt):
        try:
            return int(
                search.run(
                    state,
                    folder,
                    good_verdict=good_verdict,
                    step=runner,
                    discard=runner.discard,
                    per_step_s=per_step,
                    echo=click.echo,
                )
            )
        except search.Interrupted as exc:
            click.echo(
                "bwstack: bisect interrupted; nothing left running, state saved: --resume continues",
                err=True,
            )
            return 128 + int(exc.signum)


def _inputs(
    stack: Any,
    profile: str,
    *,
    repo: str,
    good: str,
    bad: str,
    good_verdict: str,
    tags_file: Path | None,
    fast: bool,
) -> dict[str, Any]:
    """What a resume must find unchanged."""
    from bwstack.bisect.search import digest, tags_file_text

    tags_digest = None
    if tags_file is not None:
        tags_digest = digest(tags_file_text(tags_file))
    variant = stack.variant_for(profile)
    return {
        "stack_file": stack.path.name,
        "profile": profile,
        "profile_spec": digest(stack.profile(profile).model_dump(mode="json")),
        "variant": variant.name,
        "variant_pins": digest(variant.manifest()),
        "repo": repo,
        "good": good,
        "bad": bad,
        "good_verdict": good_verdict,
        "tags_file": tags_digest,
        "fast": fast,
    }
