"""The model's Hugging Face ``config.json``, as ``model.config`` names it: a fixture shipped with bwstack
(``data/model-configs/<name>/config.json``) or a config.json (or a folder holding one) next to profiles.yaml.

Explain feeds it to SGLang's own backend resolution; the sweep's ``--fast`` mode reads its layer count;
calibrate's long probe and the soak's default prompt lengths read its sparse window (:func:`sparse_window`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bwstack.errors import UserError

if TYPE_CHECKING:
    from bwstack.stack.schema import Stack

#: the fixtures shipped with bwstack, one folder per model
FIXTURES = Path(__file__).resolve().parents[1] / "data" / "model-configs"


def fixture_names() -> list[str]:
    return sorted(p.name for p in FIXTURES.iterdir() if (p / "config.json").is_file())


def find(ref: str, *, base: Path | None = None) -> Path | None:
    """The file ``ref`` names: a fixture by that name, else a path relative to ``base``; else None."""
    candidates = [FIXTURES / ref / "config.json"]
    if base is not None:
        path = base / ref
        candidates.append(path / "config.json" if path.is_dir() else path)
    return next((c for c in candidates if c.is_file()), None)


def read(path: Path, *, field: str = "model.config") -> dict[str, Any]:
    """The JSON object in ``path``; a file that is not one is bad input (exit 2)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise UserError(f"not JSON: {exc}", file=path, field=field) from None
    if not isinstance(data, dict):
        raise UserError("a model config is a JSON object", file=path, field=field)
    return data


def load(ref: str, *, base: Path | None = None) -> dict[str, Any]:
    """The config ``ref`` names; it must exist and name its ``architectures`` (SGLang dispatches on them)."""
    path = find(ref, base=base)
    if path is None:
        known = ", ".join(fixture_names())
        raise UserError(
            f"unknown model config {ref!r} (fixtures: {known}; or a path to a config.json)",
            field="model.config",
        )
    data = read(path)
    if not data.get("architectures"):
        raise UserError("a model config needs 'architectures'", file=path)
    return data


def sparse_window(stack: Stack) -> int | None:
    """The model's sparse window (``index_topk`` of its config, when ``model.config`` names one that has it);
    None otherwise (the callers then take ``longprobe.DEFAULT_WINDOW``)."""
    ref = getattr(stack.model, "config", None)
    if not ref:
        return None
    try:
        value = load(str(ref), base=stack.root).get("index_topk")
    except UserError:
        return None
    return value if isinstance(value, int) and value > 0 else None
