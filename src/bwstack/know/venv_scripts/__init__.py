"""Scripts that run in foreign interpreters, never inside bwstack's own process.

Each file here is handed, by path or on stdin, to a Python that is not bwstack's: ``resolve.py`` and
``dump_args.py`` run under the pinned SGLang's venv or the image's own ``python3`` (standard library and
SGLang only), ``venv_shims.py`` is copied into a venv's site-packages and the CPU placeholder wheel. bwstack
imports them only in tests; the host side reaches them through :data:`SCRIPTS`.
"""

from __future__ import annotations

from pathlib import Path

#: where the scripts are, for the host code that runs or copies them
SCRIPTS = Path(__file__).parent
RESOLVE = SCRIPTS / "resolve.py"
DUMP_ARGS = SCRIPTS / "dump_args.py"
VENV_SHIMS = SCRIPTS / "venv_shims.py"
