"""bwstack calibrate: baselines.json beside profiles.yaml -> the rendered healthcheck environment; list/up notes.

The end-to-end run (calibrate against real SGLang, then the rendered healthcheck against it) is
tests/real/test_real_quality.py; here the file format, its errors and calibrate's refusals (fake server).
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from bwstack import launch
from bwstack.errors import ExternalError, UserError
from bwstack.host import calibrate
from bwstack.ops import listing
from bwstack.render import compose, k8s
from bwstack.stack import baselines, loader
from healthchecks import common, judging, settings
from support.hc_fakes import FakeSGLang, generate_body
from support.stack import edit_yaml

MODEL = "nvidia/GLM-5-NVFP4"


def _write(stack_copy: Path, entry: object) -> Path:
    path = stack_copy.parent / baselines.BASELINES_FILE
    data = {"schema": baselines.SCHEMA, "models": {MODEL: {judging.PASSAGE_ID: entry}}}
    path.write_text(json.dumps(data))
    return path


GOOD = {"score": -0.4321, "margin": 1.5, "tokens": 60, "profile": "dense-fi-bf16", "sglang": "0.5.23"}


def test_no_baseline_renders_nothing_and_list_says_so(stack_copy: Path) -> None:
    stack = loader.load_stack(stack_copy)
    assert baselines.load_baseline(stack) is None
    assert "only the baseline-free checks run" in baselines.describe(stack)
    env = launch.launch_spec(stack, "dense-fi-bf16").env()
    assert common.ENV_HC_BASELINE not in env
    assert listing.list_data(stack, arch=None)["quality_baseline"] is None


def test_a_baseline_reaches_every_rendered_healthcheck(stack_copy: Path) -> None:
    _write(stack_copy, GOOD)
    stack = loader.load_stack(stack_copy)
    rendered = YAML(typ="safe").load(compose.render_compose(stack))
    for name in stack.profiles:
        env = rendered["services"][name]["environment"]
        assert env[common.ENV_HC_BASELINE] == f"{judging.PASSAGE_ID}=-0.4321"
        assert env[common.ENV_HC_MARGIN] == "1.5"
    manifests = "".join(o.text for o in k8s.render_k8s(stack, nodes=1, profiles=["dense-fi-bf16"]))
    assert f"{judging.PASSAGE_ID}=-0.4321" in manifests
    assert "below -1.932 is garbage" in baselines.describe(stack)
    assert listing.list_data(stack, arch=None)["quality_baseline"]["score"] == -0.4321
    # what warmup.py makes of the rendered value
    assert settings.parse_baseline(f"{judging.PASSAGE_ID}=-0.4321") == (judging.PASSAGE_ID, -0.4321)


@pytest.mark.parametrize(
    ("entry", "message"),
    [({"score": "x"}, "malformed baseline"), ({**GOOD, "score": 0.5}, "score must be a logprob <= 0")],
)
def test_a_malformed_file_is_one_line_exit_2(stack_copy: Path, entry: object, message: str) -> None:
    path = _write(stack_copy, entry)
    with pytest.raises(UserError) as err:
        baselines.load_baseline(loader.load_stack(stack_copy))
    assert message in err.value.render() and str(path) in err.value.render()
    done = subprocess.run(
        [str(Path(sys.executable).parent / "bwstack"), "render", "-f", str(stack_copy), "--check"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and message in done.stderr


def test_calibrate_refuses_another_model_and_a_flat_server(stack_copy: Path) -> None:
    stack = loader.load_stack(stack_copy)
    path = stack_copy.parent / baselines.BASELINES_FILE
    before = path.read_bytes() if path.exists() else None  # the stack's committed calibration, if any
    with FakeSGLang() as fake:  # its /server_info says nvidia/GLM-5.2-NVFP4
        body = generate_body()
        body["meta_info"]["input_token_logprobs"] = [[None, 1, None], [-0.3, 2, None], [-0.5, 3, None]]
        fake.set_json("POST", "/generate", body)
        with pytest.raises(UserError) as err:
            calibrate.calibrate(stack, "dense-fi-bf16", url=fake.url)
        assert "serves nvidia/GLM-5.2-NVFP4, not profile dense-fi-bf16's model" in err.value.render()
        body["meta_info"]["input_token_logprobs"] = [[None, 1, None], *[[-6.2383, 9, None]] * 8]
        fake.set_json("POST", "/generate", body)
        with pytest.raises(ExternalError, match="not fit to calibrate on: garbage"):
            calibrate.calibrate(stack, "dense-fi-bf16", url=fake.url)
    assert (path.read_bytes() if path.exists() else None) == before  # nothing written


def test_calibrate_writes_the_file_atomically_and_keeps_other_models(stack_copy: Path) -> None:
    path = stack_copy.parent / baselines.BASELINES_FILE
    other = {"schema": baselines.SCHEMA, "models": {"other/model": {"p": {"score": -1.0}}}}
    path.write_text(json.dumps(other))
    edit_yaml(stack_copy, lambda d: d["model"].update(path="nvidia/GLM-5.2-NVFP4"))
    stack = loader.load_stack(stack_copy)
    with FakeSGLang() as fake:
        body = generate_body()
        body["meta_info"]["input_token_logprobs"] = [[None, 1, None], [-0.3, 2, None], [-0.5, 3, None]]
        fake.set_json("POST", "/generate", body)
        baseline, written = calibrate.calibrate(stack, "dense-fi-bf16", url=fake.url, margin=0.5)
    assert written == path and baseline.score == -0.4 and baseline.tokens == 2 and baseline.sglang == "0.5.23"
    data = json.loads(path.read_text())
    assert data["models"]["other/model"] == {"p": {"score": -1.0}}
    assert data["models"]["nvidia/GLM-5.2-NVFP4"][judging.PASSAGE_ID]["margin"] == 0.5
    assert baselines.load_baseline(loader.load_stack(stack_copy)) == baseline


def test_calibrate_sends_the_stacks_api_key_to_a_key_protected_server(stack_copy: Path) -> None:
    """Issue 37: a server behind stack.api_key answers 401 without the key; calibrate reads secrets/api_key."""
    key = "calibrate-key-0123456789"

    def edit(doc: Any) -> None:
        doc["model"]["path"] = "nvidia/GLM-5.2-NVFP4"
        doc["stack"]["api_key"] = True

    edit_yaml(stack_copy, edit)
    secrets = stack_copy.parent / "secrets"
    secrets.mkdir(exist_ok=True)
    (secrets / "api_key").write_text(key + "\n", encoding="utf-8")
    stack = loader.load_stack(stack_copy)
    with FakeSGLang(api_key=key) as fake:
        body = generate_body()
        body["meta_info"]["input_token_logprobs"] = [[None, 1, None], [-0.3, 2, None], [-0.5, 3, None]]
        fake.set_json("POST", "/generate", body)
        baseline, _ = calibrate.calibrate(stack, "dense-fi-bf16", url=fake.url)
    assert baseline.score == -0.4


def test_calibrate_on_a_closed_port_says_nothing_answers(stack_copy: Path) -> None:
    """Issue 37: not 'after a healthy pass: the server process is gone' when nothing ever answered."""
    stack = loader.load_stack(stack_copy)
    with socket.socket() as probe:  # a port nothing listens on: bound, never listening
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        with pytest.raises(ExternalError) as err:
            calibrate.calibrate(stack, "dense-fi-bf16", url=f"http://127.0.0.1:{port}")
    assert "nothing answers" in str(err.value) and "healthy pass" not in str(err.value)
