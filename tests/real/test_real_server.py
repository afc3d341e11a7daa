"""Real SGLang 0.5.23 on the CPU (host venv of the v0.5.23-cpu closure) serving `bwstack tiny-model` models.

These are the facts the rest of the suite builds on; each was first seen in a real run, then written down.
"""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import pytest

from bwstack.tiny import tinymodel
from healthchecks import common
from support.realsglang import real_server, venv_python

pytestmark = [pytest.mark.real, pytest.mark.slow]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tinymodel.write(tmp_path_factory.mktemp("m") / "tiny", tinymodel.TinySpec())


def test_tiny_model_serves_a_sampled_decode_with_finite_logprobs(tiny: Path, tmp_path: Path) -> None:
    with real_server(tiny, tmp_path / "server.log") as server:
        status, body = server.post(
            "/generate",
            {
                "text": "The quick brown fox",
                "sampling_params": {"temperature": 0.7, "max_new_tokens": 8, "ignore_eos": True},
                "return_logprob": True,
            },
        )
        assert status == 200, body
        reply = json.loads(body)
        logprobs = [item[0] for item in reply["meta_info"]["output_token_logprobs"]]
        assert len(logprobs) == 8
        assert all(lp is not None and math.isfinite(lp) for lp in logprobs)
        status, body = server.get("/server_info")
        assert status == 200
        info = json.loads(body)
        assert info["version"] == "0.5.23"
        assert info["attention_backend"] == "torch_native"
        assert info["device"] == "cpu"


@pytest.mark.parametrize("variant", ["v0.5.9-cpu", "v0.5.23-cpu"])
def test_the_real_parser_takes_a_key_beginning_with_a_dash_for_an_option(
    tmp_path: Path, variant: str
) -> None:
    """Why serve.py refuses such a key (healthchecks.common.api_key_problem): the pinned SGLang's own
    ``--config`` merge puts ``--api-key -x...`` on its argv and argparse exits before anything loads."""
    config = tmp_path / "api-key.yaml"
    config.write_text('api-key: "-xsecretkey"\n')
    done = subprocess.run(
        [str(venv_python(variant)), "-m", "sglang.launch_server", "--model-path", str(tmp_path), "--config",
         str(config)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr[-2000:]
    assert "--api-key: expected one argument" in done.stderr, done.stderr[-2000:]
    assert common.api_key_problem("-xsecretkey") is not None and common.api_key_problem("sk-x") is None
