"""``bwstack compare`` on real SGLang inside the CPU image (issue 39's proofs in the image, not the host venv):
the copying model (``cpu-long-copy``) and its sliding-window twin (``cpu-long-window``), each served by the
v0.5.23-cpu image in a container of its own on a free loopback port (:func:`bwstack.ops.upgrade_measure.serving`,
what ``upgrade --measure`` runs), both at once, from a scratch copy of the shipped profiles.cpu.yaml. The same
judgement as on the host venv (:mod:`support.compareproofs`): divergence only past the twin's window, and
retrieval that falls past it for the twin alone. (0.5.9 against 0.5.23 in the images is
tests/ops/test_upgrade_measure.py.)
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from rich.console import Console

from bwstack.ops import upgrade_measure
from bwstack.stack import loader
from bwstack.sweep import plan, run
from bwstack.sweep.streams import docker_client
from support import compareproofs, dockerstack
from support.stack import copy_stack

pytestmark = [pytest.mark.docker, pytest.mark.real, pytest.mark.slow]

VARIANT = "v0.5.23-cpu"
PAIR = ("cpu-long-copy", "cpu-long-window")


@pytest.fixture(scope="module")
def image_twin(docker_engine: None, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("image-compare")
    copy_stack(root)
    stack = loader.load_stack(root / "profiles.cpu.yaml")
    run.prepare_real_cpu(plan.Plan(stack=stack, names=list(PAIR)), Console(stderr=True))
    client, wait = docker_client(), 600.0
    with (
        upgrade_measure.serving(stack, PAIR[0], VARIANT, client, wait) as url_a,
        upgrade_measure.serving(stack, PAIR[1], VARIANT, client, wait) as url_b,
    ):
        done = subprocess.run(
            [sys.executable, "-m", "bwstack", "compare", *PAIR, "-f", str(root / "profiles.cpu.yaml"),
             "--url-a", url_a, "--url-b", url_b, "--json"],
            capture_output=True, text=True, timeout=900, cwd=root,
        )  # fmt: skip
    assert done.stdout.strip(), done.stderr[-3000:]
    report = json.loads(done.stdout)
    shown = {k: report[k] for k in ("mean_kl", "p99_kl", "top1_agreement", "retrieval", "seconds")}
    print(f"\nin the {VARIANT} image, copy vs window twin: {json.dumps(shown)}")
    left = dockerstack.docker("ps", "-aq", "--filter", f"label={upgrade_measure.LABEL}").stdout.split()
    left += dockerstack.docker(
        "volume", "ls", "-q", "--filter", f"label={upgrade_measure.LABEL}"
    ).stdout.split()
    return {"code": done.returncode, "report": report, "left": left}


def test_in_the_image_the_twin_diverges_only_past_its_window(image_twin: dict[str, Any]) -> None:
    report = image_twin["report"]
    assert (report["a"]["sglang"], report["b"]["sglang"]) == ("0.5.23", "0.5.23")
    compareproofs.assert_twin_diverges_past_its_window(image_twin["code"], report)
    assert image_twin["left"] == []  # both containers and their volumes removed


def test_in_the_image_retrieval_falls_past_the_window_for_the_twin_alone(image_twin: dict[str, Any]) -> None:
    compareproofs.assert_twin_retrieval(image_twin["report"])
