"""The long-context probe against real SGLang 0.5.23 on the CPU: a model that copies across 2,000+ tokens, and
its twin whose config breaks attention past 1024 tokens.

``bwstack.tiny.tinycopy`` builds the good model (an induction circuit, then the passage trained on top) and
writes the twin with the same weights and ``sliding_window: 1024`` on every layer (SGLang's Olmo2 honours it).
``bwstack calibrate`` records both baselines on the good model (``repeat-2304``: GLM-5's ``index_topk`` 2048 +
256); the rendered healthcheck then passes the good model and calls the twin ``garbage`` at 2304 tokens while
its short passage probe stays healthy. Two server starts.

Seen on the first real run (2 shared CPU cores), in nats/token: good model passage -0.001, repeat-2304 -0.209;
twin passage -0.001, repeat-2304 -11.707 (confidently wrong copies: worse than uniform over 240 ids, -5.5).
Build 12-63 s (idle to busy cores), the whole module 100-130 s (docs/healthcheck.md).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from bwstack.host import calibrate
from bwstack.render import compose
from bwstack.stack import loader
from healthchecks import common
from support.realhc import healthcheck, stack_for
from support.realsglang import real_server

pytestmark = [pytest.mark.real, pytest.mark.slow]

PROFILE = "dense-fi-bf16"
LENGTH = 2304


@pytest.fixture(scope="module")
def copy_runs(copy_models: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The good model: plain healthcheck, calibrate, rendered healthcheck; then the twin under the rendered
    healthcheck, and the raw scores of both (calibrate's own measurement)."""
    tmp = tmp_path_factory.mktemp("copy-runs")
    profiles = stack_for(copy_models["good"], tmp)
    bwstack = shutil.which("bwstack") or str(Path(sys.executable).parent / "bwstack")
    out: dict[str, Any] = {"folder": tmp}
    with real_server(copy_models["good"], tmp / "good.log") as server:
        out["good_plain"] = healthcheck(server.url, tmp, tmp / "good.log")
        out["calibrate"] = subprocess.run(
            [bwstack, "calibrate", PROFILE, "-f", str(profiles), "--url", server.url],
            capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        env = YAML(typ="safe").load(compose.render_compose(loader.load_stack(profiles)))["services"][PROFILE][
            "environment"
        ]
        out["env"] = {k: v for k, v in env.items() if k.startswith("BWSTACK_HC")}
        (tmp / "hc-state.json").unlink(missing_ok=True)
        out["good"] = healthcheck(server.url, tmp, tmp / "good.log", env=out["env"])
        out["good_scores"] = calibrate.measure(server.url, window=2048)
    (tmp / "hc-state.json").unlink(missing_ok=True)
    with real_server(copy_models["broken"], tmp / "broken.log") as server:
        out["broken"] = healthcheck(server.url, tmp, tmp / "broken.log", env=out["env"])
        out["broken_scores"] = calibrate.measure(server.url, window=2048)
    print(
        f"\ncopy models built in {copy_models['seconds']:.0f} s ({copy_models['summary']}); good: passage "
        f"{out['good_scores']['score']:.3f}, {out['good_scores']['long']}; broken: passage "
        f"{out['broken_scores']['score']:.3f}, {out['broken_scores']['long']}\ngood: {out['good'][1]}\n"
        f"broken: {out['broken'][1]}"
    )
    return out


def test_calibrate_records_the_long_baseline_of_the_copying_model(copy_runs: dict[str, Any]) -> None:
    done = copy_runs["calibrate"]
    assert done.returncode == 0, done.stderr
    probe, score = copy_runs["env"][common.ENV_HC_LONG_BASELINE].split("=")
    assert probe == f"repeat-{LENGTH}"
    assert -1.0 < float(score) <= 0, score  # it copies: a model that cannot scores about -ln(240) = -5.5
    code, line = copy_runs["good_plain"]
    assert code == 0, line


def test_the_copying_model_is_healthy_short_and_long(copy_runs: dict[str, Any]) -> None:
    code, line = copy_runs["good"]
    assert code == 0, line
    assert f"long context ({LENGTH} tokens) score" in line and "(baseline " in line, line
    assert copy_runs["good_scores"]["score"] > -0.5


def test_the_twin_broken_past_its_window_is_long_context_garbage(copy_runs: dict[str, Any]) -> None:
    """Same weights, sliding_window 1024 in config.json: the short probe is untouched, the long one fails."""
    good, broken = copy_runs["good_scores"], copy_runs["broken_scores"]
    assert abs(broken["score"] - good["score"]) < 0.05, (good, broken)  # short passage: as calibrated
    assert broken["long"][1] < good["long"][1] - 3, (good, broken)
    code, line = copy_runs["broken"]
    assert code == 1, line
    assert line.startswith(f"unhealthy: garbage: long context ({LENGTH} tokens): score "), line
    assert "below the calibrated baseline" in line
