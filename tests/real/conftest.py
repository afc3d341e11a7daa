"""Fixtures shared by the real-SGLang modules of this folder: the copying tiny model and its twin, built once
per session (``bwstack.tiny.tinycopy``, 12-63 s on two cores)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from bwstack.tiny import tinycopy
from support.realsglang import venv_python


@pytest.fixture(scope="session")
def copy_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("copy")
    started = time.monotonic()
    summary = tinycopy.write_in_venv(venv_python(), folder / "good", folder / "broken")
    return {"good": folder / "good", "broken": folder / "broken", "summary": summary,
            "seconds": time.monotonic() - started}  # fmt: skip
