"""Import shims for bwstack's throwaway CPU venvs of SGLang (never in an image, never imported by bwstack).

``bwstack.know.venvs`` copies this file into a venv's site-packages as ``bwstack_venv_shims.py`` and loads
it at interpreter start through a ``.pth`` file. It stands in for packages that SGLang imports at module
level but that cannot load next to a CPU build of torch: torchvision's PyPI wheels link against torch's CUDA
libraries. SGLang uses torchvision only for multimodal preprocessing, never while parsing arguments or
resolving backends, so a placeholder module is enough. A placeholder answers every attribute with a
placeholder class.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from typing import Any

#: top-level packages replaced when the real one is not installed
SHIMMED = ("torchvision",)

PLACEHOLDER_VERSION = "0.0.0+bwstack.placeholder"


class _PlaceholderMeta(type):
    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return Placeholder


class Placeholder(metaclass=_PlaceholderMeta):
    """Any class, function or constant of a shimmed package."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __call__(self, *args: Any, **kwargs: Any) -> Placeholder:
        return Placeholder()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return Placeholder


class _PlaceholderModule(types.ModuleType):
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return Placeholder


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``torchvision`` and its submodules as placeholder packages (consulted after the real finders)."""

    def __init__(self, roots: frozenset[str]) -> None:
        self.roots = roots

    def find_spec(
        self, fullname: str, path: Any = None, target: Any = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname.split(".", maxsplit=1)[0] not in self.roots:
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return _PlaceholderModule(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        module.__path__ = []
        module.__file__ = f"<bwstack placeholder for {module.__name__}>"
        module.__dict__["__version__"] = PLACEHOLDER_VERSION


def install() -> None:
    missing = frozenset(name for name in SHIMMED if importlib.util.find_spec(name) is None)
    if missing:
        sys.meta_path.append(_Finder(missing))


install()
