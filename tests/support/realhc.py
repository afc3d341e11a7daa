"""The healthcheck and a stack around a model folder, for tests against real SGLang on the CPU (imported as
``support.realhc``; tests/real/test_real_quality.py, tests/real/test_real_longprobe.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from support.stack import ROOT

WARMUP = ROOT / "healthchecks" / "warmup.py"


def healthcheck(url: str, tmp: Path, log: Path, env: Mapping[str, str] | None = None) -> tuple[int, str]:
    """warmup.py as the container runs it (full mode), with only the given BWSTACK_* environment."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("BWSTACK_")}
    done = subprocess.run(
        [sys.executable, str(WARMUP), "--url", url, "--mode", "full", "--timeout", "90", "--log", str(log),
         "--state", str(tmp / "hc-state.json"), "--api-key-file", str(tmp / "no-key")],
        capture_output=True, text=True, timeout=150, env={**base, **dict(env or {})}, check=False,
    )  # fmt: skip
    return done.returncode, done.stdout.strip().splitlines()[-1]


def stack_for(tiny: Path, folder: Path) -> Path:
    """profiles.yaml of the repository with the tiny model as the stack's model, beside images/ + templates/."""
    text = (ROOT / "profiles.yaml").read_text(encoding="utf-8")
    assert "  path: nvidia/GLM-5-NVFP4\n" in text
    (folder / "profiles.yaml").write_text(text.replace("  path: nvidia/GLM-5-NVFP4\n", f"  path: {tiny}\n"))
    for name in ("images", "templates"):
        (folder / name).symlink_to(ROOT / name)
    return folder / "profiles.yaml"
