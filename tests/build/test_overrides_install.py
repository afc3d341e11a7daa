"""A GPU variant's Python overrides, installed the way the Dockerfile installs them, over what the base holds.

The v0.5.9 base holds SGLang 0.5.9's own ``transformers==4.57.1`` with the dependencies it allows (a
huggingface-hub below 1.0), and SGLang's ``openai`` and ``uvicorn`` (httpx, click). A throwaway venv gets exactly that (from PyPI, with deps), then ``overrides.lock``
with ``pip install --no-deps --require-hashes`` as the Dockerfile runs it; ``import transformers`` and
``pip check`` must then pass. Without the hub and what it newly needs in the lock, transformers 5.2.0 refuses
to import (its dependency_versions_check), which is what the first start on the real image would hit.
"""

from __future__ import annotations

import subprocess
import venv
from pathlib import Path

import pytest

from bwstack.stack import pins
from support.stack import ROOT

pytestmark = [pytest.mark.wheels, pytest.mark.slow]

#: what the v0.5.9 base holds that the override touches: SGLang 0.5.9's own pins (its wheel METADATA) of
#: transformers, and of openai and uvicorn, which bring the httpx and click that huggingface-hub 1.x and
#: typer-slim require
BASE_PACKAGES = ("transformers==4.57.1", "openai==2.6.1", "uvicorn")


def _run(*argv: str | Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in argv], capture_output=True, text=True, timeout=timeout, check=False
    )


def test_v059_overrides_import_over_the_bases_transformers(tmp_path: Path) -> None:
    variant = pins.load_variant(ROOT / "images", "v0.5.9-cu130")
    env = tmp_path / "venv"
    venv.create(env, with_pip=True)
    python = env / "bin" / "python"
    base = _run(python, "-m", "pip", "install", "-q", "--disable-pip-version-check", *BASE_PACKAGES)
    assert base.returncode == 0, base.stderr[-2000:]
    hub_before = _run(python, "-c", "import huggingface_hub; print(huggingface_hub.__version__)")
    assert hub_before.stdout.startswith("0."), (
        hub_before.stdout
    )  # the base's hub, as transformers 4.57.1 allows
    override = _run(
        python, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps", "--require-hashes",
        "-r", variant.lock_path,
    )  # fmt: skip
    assert override.returncode == 0, override.stderr[-2000:]
    imported = _run(python, "-c", "import transformers; print(transformers.__version__)")
    assert imported.returncode == 0, imported.stderr.strip().splitlines()[-1:]
    assert imported.stdout.strip() == variant.python["transformers"]
    check = _run(python, "-m", "pip", "check")
    assert check.returncode == 0, check.stdout
