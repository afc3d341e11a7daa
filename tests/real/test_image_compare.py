"""``bwstack compare`` on real SGLang inside the CPU image (issue 39's proofs in the image, not the host venv):
the copying model (``cpu-long-copy``) and its sliding-window twin (``cpu-long-window``), each served by the
v0.5.23-cpu image in a container of its own on a free loopback port (:func:`bwstack.ops.upgrade_measure.serving`,
what ``upgrade --measure`` runs), both at once, from a scratch copy of the shipped profiles.cpu.yaml. The same
judgement as on the host venv (:mod:`support.compareproofs`): divergence only past the twin's window, and
retrieval that falls past it for the twin alone; and the copying model with planted drift (its weights with
noise, served by the same profile from a second scratch stack's model cache) past the KL gate while its
healthcheck stands; and the sweep's ``--compare-to`` step and ``compare --a-from`` on the same two servers.
(0.5.9 against 0.5.23 in the images is tests/ops/test_upgrade_measure.py.)
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from bwstack.host import calibrate
from bwstack.ops import upgrade_measure
from bwstack.stack import loader
from bwstack.sweep import plan, quality, run
from bwstack.sweep.streams import docker_client
from healthchecks import common, judging, longprobe
from support import compareproofs, dockerstack, docsblock
from support.realhc import healthcheck
from support.stack import copy_stack

pytestmark = [pytest.mark.docker, pytest.mark.real, pytest.mark.slow]

VARIANT = "v0.5.23-cpu"
PAIR = ("cpu-long-copy", "cpu-long-window")


def compare_cli(root: Path, b: str, *args: str) -> tuple[int, dict[str, Any]]:
    """``bwstack compare cpu-long-copy B ARGS --json`` in the scratch stack: its exit status and report."""
    done = subprocess.run(
        [sys.executable, "-m", "bwstack", "compare", PAIR[0], b, "-f", str(root / "profiles.cpu.yaml"), *args,
         "--json"],
        capture_output=True, text=True, timeout=900, cwd=root,
    )  # fmt: skip
    assert done.stdout.strip(), done.stderr[-3000:]
    return done.returncode, json.loads(done.stdout)


@pytest.fixture(scope="module")
def image_twin(docker_engine: None, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The copying model (up throughout) against its window twin, then against its drifted copy: a second
    scratch stack whose model cache holds the copying model's weights with planted noise, served by the same
    profile and image (and the drifted server's healthcheck, judged against the good model's calibrated
    baselines)."""
    root, other = tmp_path_factory.mktemp("image-compare"), tmp_path_factory.mktemp("image-drift")
    copy_stack(root)
    copy_stack(other)
    stack = loader.load_stack(root / "profiles.cpu.yaml")
    run.prepare_real_cpu(plan.Plan(stack=stack, names=list(PAIR)), Console(stderr=True))
    cache = stack.settings.model_cache_path
    assert cache is not None
    good = root / cache / "copy"
    compareproofs.drift(good, other / cache / "copy")
    drifted = loader.load_stack(other / "profiles.cpu.yaml")
    client, wait = docker_client(), 600.0
    out: dict[str, Any] = {}
    with upgrade_measure.serving(stack, PAIR[0], VARIANT, client, wait) as url_a:
        with upgrade_measure.serving(stack, PAIR[1], VARIANT, client, wait) as url_b:
            out["code"], out["report"] = compare_cli(root, PAIR[1], "--url-a", url_a, "--url-b", url_b)
            # the same comparison as a person runs it, the human report (docs/compare.md shows it)
            command = ["compare", *PAIR, "-f", "profiles.cpu.yaml", "--url-a", url_a, "--url-b", url_b]
            text = subprocess.run([sys.executable, "-m", "bwstack", *command], capture_output=True, text=True,
                                  timeout=900, cwd=root)  # fmt: skip
            out["text"] = (text.returncode, "bwstack " + " ".join(command), text.stdout)
            # the sweep's --compare-to step on the same two servers, one after the other: the reference's
            # answers recorded to a file, the twin scored against the file; then the command's --a-from
            step = quality.Step(stack, root / "sweep", PAIR[0])
            out["quality"] = {name: step.measure(name, url, None)
                              for name, url in ((PAIR[0], url_a), (PAIR[1], url_b))}  # fmt: skip
            out["from_file"] = compare_cli(
                root, PAIR[1], "--a-from", str(step.answers_path(PAIR[0])), "--url-b", url_b
            )
        measured = calibrate.measure(url_a, window=longprobe.DEFAULT_WINDOW)
        env = {
            common.ENV_HC_BASELINE: f"{judging.PASSAGE_ID}={measured['score']:.4f}",
            common.ENV_HC_LONG_BASELINE: f"{measured['long'][0]}={measured['long'][1]:.4f}",
        }
        with upgrade_measure.serving(drifted, PAIR[0], VARIANT, client, wait) as url_d:
            out["drift_code"], out["drift"] = compare_cli(
                root, PAIR[0], "--url-a", url_a, "--url-b", url_d, "--no-retrieval"
            )
            (other / "d.log").write_text("", encoding="utf-8")  # the server's log stays in its container
            out["drift_health"] = healthcheck(url_d, other, other / "d.log", env=env)
    report = out["report"]
    shown = {k: report[k] for k in ("mean_kl", "p99_kl", "top1_agreement", "retrieval", "seconds")}
    print(f"\nin the {VARIANT} image, copy vs window twin: {json.dumps(shown)}")
    shown = {k: out["drift"][k] for k in ("mean_kl", "p99_kl", "top1_agreement", "seconds")}
    print(f"copy vs drift {compareproofs.DRIFT}: {json.dumps(shown)}; its healthcheck: {out['drift_health']}")
    out["left"] = dockerstack.docker("ps", "-aq", "--filter", f"label={upgrade_measure.LABEL}").stdout.split()
    out["left"] += dockerstack.docker(
        "volume", "ls", "-q", "--filter", f"label={upgrade_measure.LABEL}"
    ).stdout.split()
    return out


def test_the_human_report_is_the_one_docs_compare_shows(image_twin: dict[str, Any]) -> None:
    """docs/compare.md's block is this run's text report (by shape: durations and ports vary); exit 1 past the
    thresholds, as with --json."""
    code, command, stdout = image_twin["text"]
    assert code == 1 == image_twin["code"], stdout
    assert "DIVERGES" in stdout and "needle retrieval accuracy by length" in stdout
    docsblock.check("docs/compare.md", "tests/real/test_image_compare.py", command, stdout, floats=True)


def test_in_the_image_the_twin_diverges_only_past_its_window(image_twin: dict[str, Any]) -> None:
    report = image_twin["report"]
    assert (report["a"]["sglang"], report["b"]["sglang"]) == ("0.5.23", "0.5.23")
    compareproofs.assert_twin_diverges_past_its_window(image_twin["code"], report)
    assert image_twin["left"] == []  # both containers and their volumes removed


def test_in_the_image_retrieval_falls_past_the_window_for_the_twin_alone(image_twin: dict[str, Any]) -> None:
    compareproofs.assert_twin_retrieval(image_twin["report"])


def test_in_the_image_planted_drift_is_caught_by_the_kl_gate_while_its_healthcheck_stands(
    image_twin: dict[str, Any],
) -> None:
    compareproofs.assert_drift_caught(
        image_twin["drift_code"], image_twin["drift"], image_twin["drift_health"]
    )


def test_the_sweep_step_scores_the_twin_against_the_references_recorded_answers(
    image_twin: dict[str, Any],
) -> None:
    """``sweep --compare-to``'s step: the reference's row holds its retrieval and no comparison, the twin's
    row the comparison against the reference's file, with the live two-server report's figures; and
    ``compare --a-from`` on the same file."""
    live = image_twin["report"]
    ref, twin = image_twin["quality"][PAIR[0]], image_twin["quality"][PAIR[1]]
    print(f"\nsweep step: reference {quality.words(ref)}; twin {quality.words(twin)}")
    assert ref.get("reference") is True and "compare" not in ref, ref
    assert ref["answers"] == f"quality/{PAIR[0]}.json", ref
    assert [(r["length"], r["right"]) for r in ref["retrieval"]] == [
        (r["length"], r["right"]) for r in live["retrieval"]["a"]
    ]
    assert [(r["length"], r["right"]) for r in twin["retrieval"]] == [
        (r["length"], r["right"]) for r in live["retrieval"]["b"]
    ]
    vs = twin["compare"]
    assert vs is not None and vs["to"] == PAIR[0] and vs["passed"] is False, twin
    assert vs["positions"] == live["positions"] and vs["worst"] == live["worst"]
    for key in ("mean_kl", "p99_kl", "top1_agreement"):  # the same greedy CPU prefill: the same numbers
        assert vs[key] == pytest.approx(live[key], rel=1e-3, abs=1e-6), key
    code, from_file = image_twin["from_file"]
    assert code == 1 and from_file["a"]["label"] == PAIR[0] and not from_file["passed"]
    assert from_file["positions"] == live["positions"]
    assert from_file["mean_kl"] == pytest.approx(live["mean_kl"], rel=1e-3, abs=1e-6)
    assert from_file["retrieval"]["a"] == live["retrieval"]["a"]
