"""The stand-in against recorded real SGLang: same probes, same structure, same NaN behaviour, per version.

The recordings (``data/real/<version>/<case>.json``) come from real SGLang on the CPU
(``python tests/standin/record_real.py``; ``tests/real/test_standin_contract_live.py`` re-records live and checks
they have not drifted). Here the stand-in imitating the same version, started with the same argv (the CPU
variant's parser snapshot, ``--device cpu`` …) and the matching fault, answers the same probes; every
difference in structure (``support.contract.compare``) fails the test with its JSON path.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from bwstack import classify
from bwstack.tiny import tinymodel
from support import contract
from support.realsglang import CPU_VARIANTS, cpu_flags
from support.standin_helpers import ROOT, StandinFactory

RECORDED = sorted(
    (path.parent.name, path.stem) for path in contract.DATA.glob("*/*.json") if path.stem in contract.PROBES
)


def test_every_pinned_cpu_variant_and_case_is_recorded() -> None:
    from bwstack.stack import pins

    versions = {pins.load_variant(ROOT / "images", v).sglang_version for v in CPU_VARIANTS}
    assert {(v, c) for v in versions for c in contract.PROBES} <= set(RECORDED)


@pytest.mark.parametrize(("version", "case"), RECORDED)
def test_recordings_are_the_recorders_and_hold_no_machine_path(version: str, case: str) -> None:
    path = contract.fixture_path(version, case)
    text = path.read_text(encoding="utf-8")
    data = contract.load(version, case)
    assert data["schema"] == contract.SCHEMA and data["sglang_version"] == version and data["case"] == case
    assert [p.name for p in contract.PROBES[case]] == list(data["answers"])
    for needle in {tempfile.gettempdir(), str(Path.home()), str(ROOT)}:
        assert needle + "/" not in text, f"{path.name} holds a path of this machine ({needle})"
    assert "<model>" in text  # the recorder replaced the model folder


def standin_recording(standin: StandinFactory, tmp_path: Path, variant: str, case: str) -> dict[str, Any]:
    """Start the stand-in as the recorder started real SGLang; answer the same probes."""
    model = tinymodel.write(
        tmp_path / "model", tinymodel.TinySpec(fault="none" if case == "healthy" else case)
    )
    server = standin.start(
        ["--model-path", str(model), *cpu_flags(variant)],
        fault=contract.STANDIN_FAULT[case],
        extra_env={"BWSTACK_STANDIN_ARGS": str(ROOT / "images" / variant / "sglang-args.json")},
    )
    server.wait_ready()

    def call(method: str, path: str, body: Mapping[str, Any] | None) -> tuple[int, bytes]:
        reply = server.request(method, path, body)
        return reply.status, reply.body

    answers = contract.run_probes(case, call)
    if any(a["kind"] == "no_answer" for a in answers.values()):
        deadline = time.monotonic() + contract.EXIT_WAIT
        while server.proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
    exited = server.proc.poll() is not None
    log_class = str(classify.classify_text(server.log())["class"])
    return {"answers": answers, "facts": contract.facts(answers, exited=exited, log_class=log_class)}


def variant_of(version: str) -> str:
    from bwstack.stack import pins

    for name in CPU_VARIANTS:
        if pins.load_variant(ROOT / "images", name).sglang_version == version:
            return name
    raise AssertionError(f"no pinned CPU variant runs SGLang {version}")


@pytest.mark.parametrize(("version", "case"), RECORDED)
def test_standin_answers_like_the_recorded_real_server(
    standin: StandinFactory, tmp_path: Path, version: str, case: str
) -> None:
    real = contract.load(version, case)
    mine = standin_recording(standin, tmp_path, variant_of(version), case)
    problems = contract.compare(real, mine)
    assert problems == [], f"stand-in {version} {case} differs from real SGLang:\n" + "\n".join(problems)


def _mutated(data: dict[str, Any], edit: Any) -> dict[str, Any]:
    copy: dict[str, Any] = json.loads(json.dumps(data))
    edit(copy)
    return copy


def test_the_comparison_sees_each_kind_of_difference() -> None:
    """The contract can fail: each old stand-in mistake, applied to a copy of a real recording, is reported."""
    real = contract.load("0.5.23", "healthy")

    def meta(d: dict[str, Any], probe: str = "greedy_logprob") -> dict[str, Any]:
        found: dict[str, Any] = d["answers"][probe]["body"]["meta_info"]
        return found

    def renamed(d: dict[str, Any]) -> None:
        meta(d)["total_retractions"] = meta(d).pop("num_retractions")

    def prompt_logprob(d: dict[str, Any]) -> None:
        meta(d)["input_token_logprobs"] = [[-1.5, 7, None]]

    def null_logprob(d: dict[str, Any]) -> None:
        meta(d, "sampled_logprob")["output_token_logprobs"][1][0] = None

    def startup_float(d: dict[str, Any]) -> None:
        d["answers"]["server_info"]["body"]["startup_time"] = 1.0

    def status(d: dict[str, Any]) -> None:
        d["answers"]["health"]["status"] = 503

    def survived(d: dict[str, Any]) -> None:
        d["facts"]["server_exited"] = True

    expected = {
        renamed: "keys missing in the stand-in: ['num_retractions']",
        prompt_logprob: "input_token_logprobs: length real 0, stand-in 1",
        null_logprob: "output_token_logprobs[*][0]: real float, stand-in float|null",
        startup_float: "startup_time: real {",
        status: "health: $.status: real 200, stand-in 503",
        survived: "facts.server_exited",
    }
    assert contract.compare(real, real) == []
    for edit, needle in expected.items():
        problems = contract.compare(real, _mutated(real, edit))
        assert any(needle in p for p in problems), (edit.__name__, problems)
