"""PLACEHOLDER for ``sgl_kernel`` in bwstack's CPU image variants — not SGLang's kernels.

SGLang imports names from ``sgl_kernel`` at module level even when it runs on the CPU, but a small model
on the CPU engine (``--device cpu --attention-backend torch_native``) calls none of them. PyPI's
``sglang-kernel`` is a CUDA-only build (sm90/sm100 shared objects), and SGLang's own CPU kernels (the Intel
AMX build) are not in this image either. So this package answers every attribute with a function that
raises ``NotImplementedError`` the moment it is called: an import succeeds, any real use fails loudly,
by name.

Submodules: ``kvcacheio`` (imported unguarded by SGLang 0.5.9) answers the same way; every other submodule
(``scalar_type``, ``flash_attn`` …) does not exist, so SGLang's ``try: import … except ImportError`` guards
take their CPU path.
"""

from __future__ import annotations

from typing import Any, NoReturn

PLACEHOLDER = True
__version__ = "0.0.1+bwstack.placeholder"


def _missing(name: str) -> Any:
    def kernel(*_args: Any, **_kwargs: Any) -> NoReturn:
        raise NotImplementedError(
            f"sgl_kernel.{name}: this image carries bwstack's CPU placeholder for sgl_kernel, "
            "not SGLang's kernels"
        )

    kernel.__name__ = name
    kernel.__qualname__ = name
    return kernel


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    return _missing(name)
