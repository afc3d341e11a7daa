"""The quality probe against real SGLang 0.5.23 on the CPU: healthy / garbage / never healthy.

A tiny model is trained here on the probe's reference passage (``bwstack.tinytrain``, torch in the CPU venv,
seconds), then served three ways: as trained (healthy, high passage score; ``bwstack calibrate`` records its
baseline and the rendered compose passes it on), with noise added to its weights (finite garbage), and with a
NaN ``lm_head`` under ``SGLANG_SANITIZE_NAN_LOGITS=1`` (NaN turned into a uniform distribution). Three server
starts in all.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from bwstack import model, render, tinytrain
from healthchecks import common
from support.realsglang import real_server, venv_python
from support.stack import ROOT

pytestmark = [pytest.mark.real, pytest.mark.slow]

WARMUP = ROOT / "healthchecks" / "warmup.py"
PROFILE = "dense-fi-bf16"


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("trained")
    targets = {fault: folder / fault for fault in ("none", "noise", "nan-lm-head")}
    return tinytrain.write_in_venv(venv_python(), targets)


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


@pytest.fixture(scope="module")
def good(models: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One server life of the trained model: plain healthcheck, calibrate, rendered healthcheck."""
    tmp = tmp_path_factory.mktemp("good")
    profiles = stack_for(models["none"], tmp)
    log = tmp / "server.log"
    with real_server(models["none"], log) as server:
        plain = healthcheck(server.url, tmp, log)
        bwstack = shutil.which("bwstack") or str(Path(sys.executable).parent / "bwstack")
        calibrated = subprocess.run(
            [bwstack, "calibrate", PROFILE, "-f", str(profiles), "--url", server.url],
            capture_output=True, text=True, timeout=150, check=False,
        )  # fmt: skip
        compose = YAML(typ="safe").load(render.render_compose(model.load_stack(profiles)))
        env = compose["services"][PROFILE]["environment"]
        rendered = healthcheck(
            server.url, tmp, log, env={k: v for k, v in env.items() if k.startswith("BWSTACK_HC")}
        )
    # stopped before the other tests start theirs: one real server at a time
    return {"plain": plain, "calibrate": calibrated, "env": env, "rendered": rendered, "folder": tmp}


def test_trained_model_is_healthy_with_a_high_passage_score(good: dict[str, Any]) -> None:
    code, line = good["plain"]
    assert code == 0, line
    assert "(no calibrated baseline)" in line
    score = float(line.split(" score ")[1].split()[0])
    assert score > -0.5, line  # it reproduces the passage: a random model scores about -ln(512) = -6.2


def test_calibrate_writes_a_baseline_that_the_rendered_healthcheck_uses(good: dict[str, Any]) -> None:
    done = good["calibrate"]
    assert done.returncode == 0, done.stderr
    assert (good["folder"] / "baselines.json").is_file()
    passage, score = good["env"][common.ENV_HC_BASELINE].split("=")
    assert passage.startswith("gettysburg-") and -0.5 < float(score) <= 0
    assert good["env"][common.ENV_HC_MARGIN] == "1"
    code, line = good["rendered"]
    assert code == 0, line
    assert f"(baseline {float(score):.3f}, margin 1)" in line


def test_noisy_weights_are_garbage_against_the_baseline(
    models: dict[str, Path], good: dict[str, Any], tmp_path: Path
) -> None:
    env = {k: v for k, v in good["env"].items() if k.startswith("BWSTACK_HC")}
    log = tmp_path / "server.log"
    with real_server(models["noise"], log) as server:
        code, line = healthcheck(server.url, tmp_path, log, env=env)
    assert code == 1, line
    assert line.startswith("unhealthy: garbage: passage gettysburg-"), line
    assert "below the calibrated baseline" in line


def test_sanitized_nan_is_never_healthy(models: dict[str, Path], tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    with real_server(models["nan-lm-head"], log, env={"SGLANG_SANITIZE_NAN_LOGITS": "1"}) as server:
        code, line = healthcheck(server.url, tmp_path, log)  # no baseline: the baseline-free checks
    assert code == 1, line
    assert line.startswith(("unhealthy: garbage: ", "unhealthy: nan: ")), line
