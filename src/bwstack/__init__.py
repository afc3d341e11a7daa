"""bwstack: reproducible SGLang serving on NVIDIA Blackwell.

This package imports nothing at import time, so that its stdlib-only modules (``sglang_argv``, ``standin``)
can be copied into a container image and imported there without the host-side dependencies.
"""

__version__ = "0.1.0"
