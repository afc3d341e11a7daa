"""Options shared by the ``bwstack`` commands wherever they are defined (``cli/__init__.py``, its command
modules).

Kept apart from ``cli/__init__.py`` so that a command module it registers can use them without importing
the group back.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from healthchecks import soak_client

F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_PROFILES = "profiles.yaml"
#: the longest soak (``up --soak``, ``sweep --soak``): a day, the soak client's own cap
MAX_SOAK_S = int(soak_client.MAX_SECONDS)


class ImageRef(click.ParamType[str]):
    """``--image``: a Docker image reference or id (:data:`bwstack.stack.pins.IMAGE_REF`), never an option
    (``--image=--help``) nor anything else placed into a ``docker`` argv."""

    name = "image"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        from bwstack.stack.pins import IMAGE_REF

        text = str(value)
        if not IMAGE_REF.match(text):
            shown = text[:60].encode("unicode_escape").decode("ascii")
            example = "e.g. lmsysorg/sglang:v0.5.9"
            self.fail(
                f"{shown!r} is not an image reference (name[:tag][@sha256:digest], {example})", param, ctx
            )
        return text


class SoakSeconds(click.ParamType[float]):
    """``sweep --soak``: finite seconds from 0 (no soak) to :data:`MAX_SOAK_S`; ``nan``, ``1e309`` (infinity)
    and ``1e12`` are refused before they reach results.json."""

    name = "seconds"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        try:
            seconds = float(value)
        except (TypeError, ValueError):
            self.fail(f"wants seconds, 0 (off) to {MAX_SOAK_S}, got {str(value)[:40]!r}", param, ctx)
        if not math.isfinite(seconds) or not 0 <= seconds <= MAX_SOAK_S:
            self.fail(f"wants seconds, 0 (off) to {MAX_SOAK_S}, got {seconds:g}", param, ctx)
        return seconds


def stack_file(ctx: click.Context, _param: click.Parameter | None, value: Path | None) -> Path:
    """A command's -f, else the group's (``bwstack -f profiles.cpu.yaml sweep``), else profiles.yaml."""
    if value is not None:
        return value
    given = ctx.find_root().params.get("stack_file")
    return given if isinstance(given, Path) else Path(DEFAULT_PROFILES)


def file_option(func: F) -> F:
    """``-f/--file``: the profiles file of one command (resolved by :func:`stack_file`)."""
    return click.option(
        "-f",
        "--file",
        "file",
        default=None,
        callback=stack_file,
        help=f"The profiles file (default: the one given before the command, else {DEFAULT_PROFILES}).",
        type=click.Path(path_type=Path),
    )(func)


def keep_option(func: F) -> F:
    """``--keep``: leave the stand-in's network and volumes in place (``sweep --standin``, ``demo``)."""
    return click.option(
        "--keep", is_flag=True, help="With the stand-in: keep its network and volumes at the end."
    )(func)


def standin_load_option(func: F) -> F:
    """``--standin-load-seconds``: the stand-in's simulated load time (``sweep --standin``, ``demo``)."""
    return click.option(
        "--standin-load-seconds",
        type=click.FloatRange(min=0),
        default=None,
        help="With the stand-in: its simulated weight-load time (default: the stand-in's own, 2 s).",
    )(func)
