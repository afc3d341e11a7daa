"""Before ``bwstack build``: is the base a variant's pins.toml locks by digest still what its tag names?

A locked variant builds ``FROM <image>@<digest>`` (``Variant.base_ref``), so a tag that moved in the registry
after ``bwstack lock`` never changes what is built. It is still news: the operator locked one image and the
registry now serves another under that name. Before building, the tag's current ``Docker-Content-Digest`` is
asked of the registry (``HEAD /v2/<repo>/manifests/<tag>``, the same request as ``bwstack lock --check``); a
different digest refuses the build with one line (exit 1) naming the locked digest, the registry's and what to
run; ``--locked`` builds the locked digest anyway. A registry that cannot be asked is said in one line and the
locked digest is built (it needs no tag).

A CPU variant whose ``[base] image`` names a registry (``host[:port]/repo:tag``) is locked and built the same
way as a GPU variant (no local base is made for it): ``Variant.base_pulled``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bwstack.build.lock import command as lock_command
from bwstack.errors import ExternalError
from bwstack.stack.pins import Variant

Echo = Callable[[str], Any]

#: the exit status of a build refused because its base tag moved (as ``bwstack lock --check``'s "moved")
EXIT_MOVED = 1


class BaseMoved(ExternalError):
    """The tag of a locked base names another digest in the registry now (one line; exit 1)."""


def moved_line(variant: Variant, now: str) -> str:
    return (
        f"images/{variant.name}/pins.toml: base: {variant.base_image} moved: locked {variant.base_digest}, "
        f"registry now {now}; run 'bwstack lock --variant {variant.name}' to take the new base, "
        "or build the locked digest with 'bwstack build --locked'"
    )


def check(variant: Variant, *, locked: bool, echo: Echo) -> None:
    """Refuse (BaseMoved) when the tag of a locked base moved, unless ``locked``; say so when unchecked."""
    if not variant.base_digest:
        return
    try:
        now = lock_command.head_manifest(variant.base_image)
    except ExternalError as exc:
        echo(f"base: {variant.base_image} not checked ({exc}); building the locked {variant.base_digest}")
        return
    if now is None:
        echo(
            f"base: {variant.base_image} is gone from the registry; building the locked {variant.base_digest}"
        )
        return
    if now == variant.base_digest:
        echo(f"base: {variant.base_ref} (the tag still names it)")
        return
    if locked:
        echo(
            f"base: {variant.base_image} moved to {now}; --locked: building the locked {variant.base_digest}"
        )
        return
    raise BaseMoved(moved_line(variant, now))
