"""The ``bwstack build | lock | standin build`` commands: the image build's options and output; the build is
:mod:`bwstack.build.dockerbuild`, the lock files :mod:`bwstack.build.lock`, the stand-in's images
:mod:`bwstack.build.standin_image`. Registered on the command group by ``bwstack.cli``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path

import click

from bwstack.cli.options import ImageRef, file_option


@click.command()
@file_option
@click.option("--variant", required=True, help="Image variant (a folder under images/).")
@click.option("--tag", default=None, help="Image tag; default <image_repo>:<variant>.")
@click.option(
    "--base-image", default=None, help="Build on this base instead of the pinned one (testing only)."
)
@click.option("--dry-run", is_flag=True, help="Print the docker build argv and exit.")
@click.option(
    "--locked", is_flag=True, help="Build the locked base digest even when its tag moved in the registry."
)
def build(
    file: Path, variant: str, tag: str | None, base_image: str | None, dry_run: bool, locked: bool
) -> None:
    """Build the serving image of one variant, passing every pin as a build arg. A base locked by digest is
    built FROM name@digest; a tag that moved in the registry since 'bwstack lock' refuses the build (exit 1)
    unless --locked."""
    from bwstack.build import dockerbuild
    from bwstack.stack import loader

    stack = loader.load_stack(file)
    sys.exit(
        dockerbuild.build(stack, variant, tag=tag, base_image=base_image, dry_run=dry_run, locked=locked)
    )


@click.command()
@file_option
@click.option("--variant", "variants", multiple=True, help="Variant(s) to lock; default all.")
@click.option(
    "--digest/--no-digest", default=True, help="Resolve the base image digest (needs registry access)."
)
@click.option(
    "--python/--no-python", "python_", default=True, help="Hash the Python overrides into overrides.lock."
)
@click.option(
    "--args", "args_", is_flag=True, help="Regenerate sglang-args.json from the pinned SGLang's parser."
)
@click.option(
    "--kernel-facts",
    is_flag=True,
    help="Regenerate kernel-archs.json from the pinned wheels (downloads ~1 GB); with --check only compare.",
)
@click.option(
    "--check",
    is_flag=True,
    help="Check that every pin still resolves (base digest, locked wheels, git sources, model revision): one "
    "line per pin, exit 1 when one moved, vanished or could not be checked. With --kernel-facts: compare.",
)
@click.option(
    "--index-url", default=None, metavar="URL", help="With --check: the package index (default PyPI)."
)
@click.option("--json", "as_json", is_flag=True, help="With --check: machine-readable output.")
@click.option(
    "--inspect", "inspect_variant", metavar="VARIANT", help="Pull the base, judge the first-contact read."
)
@click.option(
    "--image", type=ImageRef(), default=None, help="With --inspect: a local image instead of the pulled base."
)
@click.option(
    "--out",
    default=None,
    type=click.Path(dir_okay=False, path_type=Path),
    help="With --inspect: JSON record.",
)
def lock(
    file: Path,
    variants: Sequence[str],
    digest: bool,
    python_: bool,
    args_: bool,
    kernel_facts: bool,
    check: bool,
    index_url: str | None,
    as_json: bool,
    inspect_variant: str | None,
    image: str | None,
    out: Path | None,
) -> None:
    """Fill what pins.toml cannot hold by hand: digest, override hashes, parser snapshot, kernel facts."""
    from bwstack.build.lock import command as locking
    from bwstack.stack import pins

    root = file.parent
    if inspect_variant is not None:
        from bwstack.build.lock.inspect import inspect as inspect_base

        sys.exit(inspect_base(root, inspect_variant, image=image, out=out, echo=click.echo))
    if kernel_facts:
        from bwstack.build.lock import kernel_facts as facts_mod

        names = list(variants) or [v for v in pins.list_variants(root / "images") if v.startswith("v")]
        sys.exit(facts_mod.run_kernel_facts(root / "images", names, check=check, echo=click.echo))
    if check:
        sys.exit(_lock_check(file, list(variants), index_url, as_json))
    sys.exit(
        locking.lock(
            root, variants=list(variants), digest=digest, python=python_, args=args_, echo=click.echo
        )
    )


def _lock_check(file: Path, variants: list[str], index_url: str | None, as_json: bool) -> int:
    from bwstack.build.lock import check as pin_check
    from bwstack.stack import loader, pins

    images = file.parent / "images"
    names = variants or pins.list_variants(images)
    model = None
    if file.is_file():
        stack = loader.load_stack(file)
        if stack.model.revision:
            model = (stack.model.path, stack.model.revision)
    found = pin_check.check(
        images,
        names,
        sources=pin_check.Sources(index_url),
        model=model,
        echo=None if as_json else click.echo,
    )
    if as_json:
        click.echo(json.dumps(pin_check.to_json(found), indent=2))
    else:
        click.echo(pin_check.summary(found))
    return pin_check.exit_status(found)


@click.group()
def standin() -> None:
    """The CPU stand-in for the SGLang server (tests and the demo)."""


@standin.command("build")
@file_option
@click.option("--variant", default=None, help="Variant whose serving image is rebuilt on the stand-in base.")
def standin_build(file: Path, variant: str | None) -> None:
    """Build the stand-in base image and the project's Dockerfile on top of it."""
    from bwstack.build import standin_image
    from bwstack.stack import loader

    stack = loader.load_stack(file)
    click.echo(standin_image.ensure_standin_image(stack, variant=variant, echo=click.echo))
