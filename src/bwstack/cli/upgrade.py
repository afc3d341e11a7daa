"""The ``bwstack variant new`` and ``bwstack upgrade`` commands: options and output only; the work is in
:mod:`bwstack.build.lock.variant_new` and :mod:`bwstack.ops.upgrade`. Registered on the command group by
``bwstack.cli`` (its own module, so ``cli/__init__.py`` stays small); imports nothing heavy at module level.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from bwstack.cli.options import file_option


@click.group("variant")
def variant() -> None:
    """Image variants (images/<variant>/)."""


@variant.command("new")
@click.argument("name")
@click.option(
    "--sglang", "version", required=True, help="The SGLang release (a version on the package index)."
)
@click.option("--from", "source", default=None, help="The variant to copy [cuda], [overrides], [env] from "
              "(default: the stack's variant).")  # fmt: skip
@click.option("--base", default=None, help="The base image (default: --from's tag with the version swapped).")
@file_option
def variant_new(name: str, version: str, source: str | None, base: str | None, file: Path) -> None:
    """Write images/NAME/ for an SGLang release from its own wheel: [python] pins from its requirements, the
    base image tag, the parser snapshot and versions.json; the rest copied from --from, changes printed."""
    from bwstack.build.lock import variant_new
    from bwstack.stack import loader, pins

    stack = loader.parse_stack_file(file)[0] if file.is_file() else None
    images = (file.resolve().parent if file.is_file() else Path.cwd()) / "images"
    from bwstack.errors import UserError

    variant_new.check_name(name)
    origin = source or (stack.stack.variant if stack else None)
    if origin is None:
        raise UserError(f"no {file} to take the default --from from: name a variant", field="--from")
    if (images / name).exists():
        raise UserError(f"variant {name} exists already (images/{name}/); pick another NAME", field="NAME")
    made = variant_new.plan(name, version, pins.load_variant(images, origin), base=base)
    click.echo(f"variant {name}: sglang {version} from {made.release.wheel.name}, the rest from {origin}")
    for line in made.changes:
        click.echo(f"  {line}")
    path = variant_new.write(images, made, echo=click.echo)
    click.echo(f"wrote images/{path.name}/ (pins.toml, overrides.lock, sglang-args.json, versions.json)")
    click.echo(f"next: bwstack upgrade {origin} {name}   (what it changes for every profile)")


@click.command("upgrade")
@click.argument("old")
@click.argument("new")
@click.argument("profiles", nargs=-1)
@click.option(
    "--arch", "archs", multiple=True, help="GPU arch(s) to resolve on (default: the profiles' own)."
)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--measure", is_flag=True, help="Run both (CPU variants in containers; GPU variants on this "
              "host's GPUs as `up` runs them), compare their token distributions on the same prompts and add "
              "the measured divergence (Docker).")  # fmt: skip
@click.option("--apply", "apply", is_flag=True, help="Rewrite the profiles file where a flag's spelling "
              "changed (comments kept), printing the diff.")  # fmt: skip
@file_option
def upgrade(
    old: str,
    new: str,
    profiles: tuple[str, ...],
    *,
    archs: tuple[str, ...],
    as_json: bool,
    measure: bool,
    apply: bool,
    file: Path,
) -> None:
    """What moving PROFILES (default: all) from OLD to NEW does: OLD and NEW are variants (images/<name>/)
    or SGLang releases (the stack's variant with that release's wheel). Exit 1 when a profile is predicted to
    get worse. --measure runs both, one at a time (CPU variants in containers of their own, GPU variants on
    this host's GPUs as up runs them), and adds the measured divergence; exit 1 also when it is past
    compare's thresholds."""
    from bwstack.errors import ExternalError
    from bwstack.ops import upgrade as upgrade_mod
    from bwstack.ops import upgrade_render
    from bwstack.stack import loader

    stack = loader.load_stack(file)
    if measure:  # what the measurement would refuse, before the prediction's minutes
        from bwstack.ops import upgrade_measure

        upgrade_measure.preflight(
            stack, upgrade_mod.side(stack, old).variant, upgrade_mod.side(stack, new).variant, profiles
        )
    try:
        report = upgrade_mod.compare(stack, old, new, profiles=list(profiles), archs=list(archs))
    except ExternalError as exc:
        if not measure:
            raise
        # the prediction could not run (a CPU variant's resolution): the measurement still can
        sides = upgrade_mod.side(stack, old), upgrade_mod.side(stack, new)
        measured = measure_sides(stack, sides, profiles)
        if as_json:
            click.echo(json.dumps({"prediction_error": str(exc), "measured": measured}, indent=2))
        else:
            click.echo(f"# bwstack upgrade: {sides[0].label} -> {sides[1].label}\n")
            click.echo(f"prediction: not available ({exc!s})\n")
            click.echo("\n".join(upgrade_render.measured_lines(measured)).rstrip())
        sys.exit(0 if measured["report"]["passed"] else 1)
    if measure:
        import dataclasses

        report = dataclasses.replace(
            report, measured=measure_sides(stack, (report.old, report.new), profiles)
        )
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=2))
    else:
        click.echo(upgrade_render.render_markdown(report), nl=False)
    if apply:
        diff = upgrade_mod.apply(file, report)
        click.echo(diff or "--apply: no spelling to rewrite", err=as_json)
    diverged = report.measured is not None and not report.measured["report"]["passed"]
    sys.exit(1 if report.regressions or diverged else 0)


def measure_sides(stack: Any, sides: Any, profiles: tuple[str, ...]) -> dict[str, Any]:
    """``--measure``: both sides run, one at a time, compared (:mod:`bwstack.ops.upgrade_measure`)."""
    from bwstack.ops import upgrade_measure

    old, new = sides
    return upgrade_measure.measure(
        stack, (old.variant, old.version), (new.variant, new.version), list(profiles),
        echo=lambda m: click.echo(m, err=True),
    )  # fmt: skip
