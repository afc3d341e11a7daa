"""The quality probe against real SGLang 0.5.23 on the CPU: healthy / garbage / never healthy.

A tiny model is trained here on the probe's reference passage (``bwstack.tiny.tinytrain``, torch in the CPU venv,
seconds), then served three ways: as trained (healthy, high passage score; ``bwstack calibrate`` records its
baseline and the rendered compose passes it on), with noise added to its weights (finite garbage), and with a
NaN ``lm_head`` under ``SGLANG_SANITIZE_NAN_LOGITS=1`` (NaN turned into a uniform distribution), that last one
under ``healthchecks/serve.py`` as the image runs it, whose readiness probe must stop it. Three server starts.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from bwstack.render import compose
from bwstack.stack import loader
from bwstack.tiny import tinytrain
from healthchecks import common
from support.realhc import healthcheck, stack_for
from support.realsglang import CPU_ENV, CPU_FLAGS, START_TIMEOUT, free_port, real_server, venv_python
from support.stack import ROOT

pytestmark = [pytest.mark.real, pytest.mark.slow]

PROFILE = "dense-fi-bf16"


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("trained")
    targets = {fault: folder / fault for fault in ("none", "noise", "nan-lm-head")}
    return tinytrain.write_in_venv(venv_python(), targets)


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
        rendered = YAML(typ="safe").load(compose.render_compose(loader.load_stack(profiles)))
        env = rendered["services"][PROFILE]["environment"]
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


def test_sanitized_nan_is_never_healthy_and_serve_stops_it_at_readiness(
    models: dict[str, Path], tmp_path: Path
) -> None:
    """serve.py (the image's entrypoint) wrapping real SGLang: its readiness probe finds the uniform logprobs
    of SGLANG_SANITIZE_NAN_LOGITS=1 and stops the server at once, verdict recorded in the state file."""
    state = tmp_path / "hc-state.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("BWSTACK_")}
    env.update({**CPU_ENV, "SGLANG_SANITIZE_NAN_LOGITS": "1", "BWSTACK_LOG": str(tmp_path / "server.log"),
                "BWSTACK_HC_STATE": str(state), "BWSTACK_API_KEY_FILE": str(tmp_path / "no-key"),
                "BWSTACK_HF_TOKEN_FILE": str(tmp_path / "no-token")})  # fmt: skip
    argv = [str(venv_python()), str(ROOT / "healthchecks" / "serve.py"), "--model-path", str(models["nan-lm-head"]),
            "--host", "127.0.0.1", "--port", str(free_port()), *CPU_FLAGS]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True)
    try:
        out, _ = proc.communicate(timeout=START_TIMEOUT + 120)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)  # forwarded to SGLang
        out, _ = proc.communicate(timeout=60)
        raise AssertionError(f"serve.py did not stop the server:\n{out[-3000:]}") from None
    verdict = [line for line in out.splitlines() if "bwstack-serve: readiness probe: " in line]
    assert verdict, out[-3000:]
    line = verdict[0].split("readiness probe: ", 1)[1]
    assert line.startswith(("unhealthy: garbage: ", "unhealthy: nan: ")), line
    assert proc.returncode == common.EXIT_FAIL_FAST, out[-3000:]
    assert "server stopped by fail-fast" in out
    recorded = json.loads(state.read_text())["verdict"]  # where Docker's healthcheck and the watcher read it
    assert recorded["class"] in ("garbage", "nan") and recorded["line"] == line
