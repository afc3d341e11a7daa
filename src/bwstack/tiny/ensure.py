"""A CPU stack's ``tiny_models``, made in ``stack.model_cache_path`` before ``up``, ``fetch`` or a sweep.

``kind: random`` entries are written by :mod:`bwstack.tiny.tinymodel` (numpy, seeded: seconds). A ``copy``
entry, the long-context model of :mod:`bwstack.tiny.tinycopy` (an induction circuit), needs torch and
transformers: it is built once, by the writer the caller names (bwstack's commands build it in the stack's CPU
image, as the operator's own uid: :mod:`bwstack.host.tinyimage`), and every ``copy`` entry is written from
that one build. A folder whose
recorded spec matches is kept. (A profile breaks it past a length with SGLang's own
``--json-model-override-args``: the same weights, a sliding window the engine applies.)
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bwstack.errors import UserError
from bwstack.stack.schema import Stack, TinyModel
from bwstack.tiny import tinycopy, tinymodel

#: writes the copy pair (the good model, its windowed twin) into two folders; its summary
CopyWriter = Callable[[Path, Path], dict[str, Any]]

#: the spec each built kind records (tinymodel.write keeps it in bwstack-tiny-model.json)
COPY_SPECS: dict[str, tinymodel.TinySpec] = {"copy": tinycopy.SPEC}


def spec_of(entry: TinyModel) -> tinymodel.TinySpec:
    """The spec an entry is made with."""
    if entry.kind in COPY_SPECS:
        return COPY_SPECS[entry.kind]
    return tinymodel.TinySpec(
        arch=entry.arch, fault=entry.fault, seed=entry.seed, max_positions=entry.context_length
    )


def ensure_for_stack(
    stack: Stack,
    echo: Callable[[str], object] = print,
    copy_writer: CopyWriter | None = None,
) -> list[Path]:
    """Make every ``tiny_models`` entry in ``stack.model_cache_path`` (kept when already right).
    ``copy_writer(good, broken)``: writes the copy pair into two folders (torch needed), called only when
    needed."""
    if not stack.tiny_models:
        return []
    if stack.settings.model_cache_path is None:
        raise UserError(
            "tiny_models need stack.model_cache_path (the host folder the services mount)",
            file=stack.path,
            field="stack.model_cache_path",
        )
    root = (stack.root / stack.settings.model_cache_path).resolve()
    made: list[Path] = []
    stale_copies: dict[str, Path] = {}
    for name, entry in sorted(stack.tiny_models.items()):
        target = root / name
        made.append(target)
        spec = spec_of(entry)
        if tinymodel.recorded_spec(target) == spec.__dict__:
            continue
        if entry.kind in COPY_SPECS:
            stale_copies[entry.kind] = stale_copies.get(entry.kind) or target
            continue
        echo(f"tiny-model: writing {name} ({entry.arch}, fault {entry.fault}) into {root}")
        tinymodel.write(target, spec)
    if stale_copies:
        _write_copies(stack, root, echo, copy_writer)
    root.chmod(0o755)
    return made


def _write_copies(
    stack: Stack, root: Path, echo: Callable[[str], object], copy_writer: CopyWriter | None
) -> dict[str, Any]:
    """Build the copy model once and write it to every ``copy`` entry of the stack."""
    if copy_writer is None:
        raise UserError(
            "tiny_models of kind copy need torch to be built: run this from bwstack's own "
            "commands (fetch, up, sweep), which build them in the stack's CPU image",
            file=stack.path,
            field="tiny_models",
        )
    echo("tiny-model: building the copy model (an induction circuit)")
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".copy-pair.", dir=root))
    try:
        summary = copy_writer(staging / "copy", staging / "copy-window")
        for name, entry in sorted(stack.tiny_models.items()):
            if entry.kind in COPY_SPECS:
                target = root / name
                if target.exists():
                    shutil.rmtree(target)
                shutil.copytree(staging / entry.kind, target)
                echo(f"tiny-model: wrote {name} ({entry.kind}) into {root}")
        return summary
    finally:
        shutil.rmtree(staging, ignore_errors=True)
