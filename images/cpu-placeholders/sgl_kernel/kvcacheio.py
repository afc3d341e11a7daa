"""PLACEHOLDER submodule (see ``sgl_kernel``): every attribute is a kernel that raises NotImplementedError."""

from __future__ import annotations

from typing import Any

from sgl_kernel import _missing


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    return _missing(f"kvcacheio.{name}")
