"""``bwstack compare`` against real SGLang on the CPU: two servers at once, the real command (a subprocess).

1. The copying model (``cpu-long-copy``) against its sliding-window twin (``cpu-long-window``: the same
   weights, the profile's own ``--json-model-override-args`` window of 1024): the prompts whose continuation
   copies from 1024 tokens back or less agree exactly, the ones that copy from 1152 back diverge; the twin's
   needle retrieval fails exactly for the needles further back than its window, the good model finds all.
2. The same tiny Llama on SGLang 0.5.9 and 0.5.23 (the pinned CPU variants): within the shipped thresholds.
3. The copying model with planted drift (noise of 1 % of each tensor's std on its weights): past the KL gate
   while its healthcheck, judged against the good model's calibrated baselines, stays healthy.
   (The copying model is an Olmo2, which 0.5.9's transformers cannot configure: ``Olmo2Config`` has no
   ``rope_theta`` there.)

Seen on the first real runs (2 shared CPU cores; docs/compare.md): twin mean KL 5.2, p99 12.8, top-1 39.6 %,
retrieval 8/8 4/8 2/8; 0.5.9 vs 0.5.23 below 1e-6; drift 0.01: mean KL 0.085, p99 1.16, healthy (passage -0.195,
long -0.307 against baselines -0.001 and -0.209, margin 1); drift 0.003 stays within the gate (mean 0.0006);
drift 0.05 is garbage to the healthcheck too. The module took 120 s.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bwstack.host import calibrate
from bwstack.quality import compare
from bwstack.stack import loader
from bwstack.sweep import quality
from bwstack.tiny import tinymodel
from healthchecks import common, judging, longprobe
from support import compareproofs
from support.realhc import healthcheck
from support.realsglang import real_server
from support.stack import ROOT

pytestmark = [pytest.mark.real, pytest.mark.slow]

PROFILES = ROOT / "profiles.cpu.yaml"


def run_compare(a: str, b: str, url_a: str, url_b: str, *extra: str) -> tuple[int, dict[str, Any], str]:
    done = subprocess.run(
        [sys.executable, "-m", "bwstack", "compare", a, b, "-f", str(PROFILES), "--url-a", url_a, "--url-b",
         url_b, "--json", *extra],
        capture_output=True, text=True, timeout=600, cwd=ROOT,
    )  # fmt: skip
    assert done.stdout.strip(), done.stderr[-3000:]
    return done.returncode, json.loads(done.stdout), done.stderr


def run_compare_from(recording: Path, b: str, url_b: str) -> tuple[int, dict[str, Any], str]:
    """``compare A B --a-from FILE``: B scored against A's recorded answers (A's server not asked)."""
    done = subprocess.run(
        [sys.executable, "-m", "bwstack", "compare", "cpu-long-copy", b, "-f", str(PROFILES), "--a-from",
         str(recording), "--url-b", url_b, "--json"],
        capture_output=True, text=True, timeout=600, cwd=ROOT,
    )  # fmt: skip
    assert done.stdout.strip(), done.stderr[-3000:]
    return done.returncode, json.loads(done.stdout), done.stderr


@pytest.fixture(scope="module")
def twin_report(copy_models: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The copying model (A, up throughout) against its window twin, then against its drifted copy (and the
    drifted copy's healthcheck, judged against the good model's calibrated baselines)."""
    tmp = tmp_path_factory.mktemp("compare-twin")
    window_args = loader.load_stack(PROFILES).profile("cpu-long-window").extra_args
    out: dict[str, Any] = {}
    with real_server(copy_models["good"], tmp / "a.log") as a:
        with real_server(copy_models["good"], tmp / "b.log", extra_args=window_args) as b:
            out["code"], out["report"], _err = run_compare("cpu-long-copy", "cpu-long-window", a.url, b.url)
            # the sweep's --compare-to step on the same two servers, one after the other: the reference's
            # answers recorded to a file, the twin scored against the file; then the command's --a-from
            step = quality.Step(loader.load_stack(PROFILES), tmp / "sweep", "cpu-long-copy")
            out["quality"] = {name: step.measure(name, url, None)
                              for name, url in (("cpu-long-copy", a.url), ("cpu-long-window", b.url))}  # fmt: skip
            recording = step.answers_path("cpu-long-copy")
            out["from_file"] = run_compare_from(recording, "cpu-long-window", b.url)
        good = calibrate.measure(a.url, window=longprobe.DEFAULT_WINDOW)
        out["env"] = {
            common.ENV_HC_BASELINE: f"{judging.PASSAGE_ID}={good['score']:.4f}",
            common.ENV_HC_LONG_BASELINE: f"{good['long'][0]}={good['long'][1]:.4f}",
        }
        drifted = compareproofs.drift(copy_models["good"], tmp / "drifted")
        with real_server(drifted, tmp / "d.log") as d:
            out["drift_code"], out["drift"], _err = run_compare(
                "cpu-long-copy", "cpu-long-copy", a.url, d.url, "--no-retrieval"
            )
            out["drift_health"] = healthcheck(d.url, tmp, tmp / "d.log", env=out["env"])
    shown = {k: out["report"][k] for k in ("mean_kl", "p99_kl", "top1_agreement", "retrieval", "seconds")}
    print(f"\ncopy vs window twin: {json.dumps(shown)}")
    shown = {k: out["drift"][k] for k in ("mean_kl", "p99_kl", "top1_agreement", "seconds")}
    print(f"copy vs drift {compareproofs.DRIFT}: {json.dumps(shown)}; its healthcheck: {out['drift_health']}")
    return out


def test_the_window_twin_diverges_only_where_the_copy_lies_past_its_window(
    twin_report: dict[str, Any],
) -> None:
    compareproofs.assert_twin_diverges_past_its_window(twin_report["code"], twin_report["report"])


def test_retrieval_fails_for_the_twin_alone_and_only_past_its_window(twin_report: dict[str, Any]) -> None:
    compareproofs.assert_twin_retrieval(twin_report["report"])


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The CPU profiles' tiny Llama (``tiny_models.tiny``: the shipped default spec)."""
    return tinymodel.write(tmp_path_factory.mktemp("llama") / "tiny", tinymodel.TinySpec())


def test_the_same_model_on_sglang_0_5_9_and_0_5_23_is_within_the_thresholds(
    tiny_llama: Path, tmp_path: Path
) -> None:
    """The measurement the shipped thresholds were set from (docs/compare.md)."""
    with (
        real_server(tiny_llama, tmp_path / "old.log", variant="v0.5.9-cpu") as old,
        real_server(tiny_llama, tmp_path / "new.log", variant="v0.5.23-cpu") as new,
    ):
        code, report, err = run_compare(
            "cpu-torch-native", "cpu-torch-native", old.url, new.url, "--no-retrieval"
        )
    print(
        f"\n0.5.9 vs 0.5.23: mean KL {report['mean_kl']}, p99 {report['p99_kl']}, top-1 {report['top1_agreement']}"
    )
    assert (report["a"]["sglang"], report["b"]["sglang"]) == ("0.5.9", "0.5.23")
    assert code == 0 and report["passed"], (report["failures"], err[-2000:])
    assert report["positions"] > 3000
    assert report["mean_kl"] < compare.MAX_MEAN_KL / 100 and report["p99_kl"] < compare.MAX_P99_KL / 100
    assert report["top1_agreement"] >= compare.MIN_TOP1


def test_planted_drift_is_caught_by_the_kl_gate_while_its_healthcheck_stands(
    twin_report: dict[str, Any],
) -> None:
    compareproofs.assert_drift_caught(
        twin_report["drift_code"], twin_report["drift"], twin_report["drift_health"]
    )


def test_the_sweep_step_scores_the_twin_against_the_references_recorded_answers(
    twin_report: dict[str, Any],
) -> None:
    """``sweep --compare-to``'s step: the reference's row holds its retrieval and no comparison, the twin's
    row the comparison against the reference's file, with the live two-server report's figures."""
    live = twin_report["report"]
    ref, twin = twin_report["quality"]["cpu-long-copy"], twin_report["quality"]["cpu-long-window"]
    print(f"\nsweep step: reference {quality.words(ref)}; twin {quality.words(twin)}")
    assert ref.get("reference") is True and "compare" not in ref, ref
    assert ref["answers"] == "quality/cpu-long-copy.json", ref
    assert [(r["length"], r["right"]) for r in ref["retrieval"]] == [
        (r["length"], r["right"]) for r in live["retrieval"]["a"]
    ]
    assert [(r["length"], r["right"]) for r in twin["retrieval"]] == [
        (r["length"], r["right"]) for r in live["retrieval"]["b"]
    ]
    vs = twin["compare"]
    assert vs is not None and vs["to"] == "cpu-long-copy" and vs["passed"] is False, twin
    assert vs["positions"] == live["positions"] and vs["worst"] == live["worst"]
    for key in ("mean_kl", "p99_kl", "top1_agreement"):  # the same greedy CPU prefill: the same numbers
        assert vs[key] == pytest.approx(live[key], rel=1e-3, abs=1e-6), key
    code, from_file, _err = twin_report["from_file"]
    assert code == 1 and from_file["a"]["label"] == "cpu-long-copy" and not from_file["passed"]
    assert from_file["positions"] == live["positions"]
    assert from_file["mean_kl"] == pytest.approx(live["mean_kl"], rel=1e-3, abs=1e-6)
    assert from_file["retrieval"]["a"] == live["retrieval"]["a"]
