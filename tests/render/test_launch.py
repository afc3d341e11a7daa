"""The launch spec of the real stack: the server's argv as profiles.yaml asks for it, flag by flag, and the
compose service, the Kubernetes pod and explain all reading that one spec."""

from __future__ import annotations

from pathlib import Path

import pytest
from ruamel.yaml import YAML

from bwstack import launch
from bwstack.know import explain
from bwstack.render import compose
from bwstack.stack import loader, schema


def test_argv_of_the_glm_profile_as_profiles_yaml_writes_it(stack: schema.Stack) -> None:
    spec = launch.launch_spec(stack, "dsa-fi-sparse-fp8")
    # profiles.yaml: model.* in the order of sglang_cli.MODEL_FLAGS, then the listen address, the backends
    # spelt for v0.5.23 (--dsa-*), model.extra_args and the profile's extra_args
    assert spec.argv == [
        "--model-path", "nvidia/GLM-5-NVFP4",
        "--served-model-name", "glm-5",
        "--tp-size", "8",
        "--quantization", "modelopt_fp4",
        "--reasoning-parser", "glm45",
        "--tool-call-parser", "glm47",
        "--context-length", "32768",
        "--mem-fraction-static", "0.85",
        "--trust-remote-code",
        "--host", "0.0.0.0",
        "--port", "30000",
        "--attention-backend", "dsa",
        "--dsa-prefill-backend", "flashinfer_sparse_mla",
        "--dsa-decode-backend", "flashinfer_sparse_mla",
        "--kv-cache-dtype", "fp8_e4m3",
        "--moe-runner-backend", "flashinfer_cutlass",
        "--fp4-gemm-backend", "flashinfer_cutlass",
        "--disable-shared-experts-fusion",
        "--disable-custom-all-reduce",
        "--cuda-graph-max-bs-decode", "256",
    ]  # fmt: skip
    assert spec.model_argv("quantization", "tp_size") == ["--tp-size", "8", "--quantization", "modelopt_fp4"]
    assert spec.image == "bwstack/sglang:v0.5.23-cu130" and spec.gpus == 8 and spec.port == 30000


def test_unset_model_settings_leave_their_flags_out(stack_copy: Path) -> None:
    text = stack_copy.read_text(encoding="utf-8")
    for line in ("  context_length: 32768\n", "  mem_fraction_static: 0.85\n", "  trust_remote_code: true\n"):
        assert line in text
        text = text.replace(line, "")
    stack_copy.write_text(text.replace("  served_name: glm-5\n", ""), encoding="utf-8")
    argv = launch.launch_spec(loader.load_stack(stack_copy), "dsa-fi-sparse-fp8").argv
    for flag in ("--context-length", "--mem-fraction-static", "--trust-remote-code", "--served-model-name"):
        assert flag not in argv
    assert argv[:6] == [
        "--model-path",
        "nvidia/GLM-5-NVFP4",
        "--tp-size",
        "8",
        "--quantization",
        "modelopt_fp4",
    ]


def test_every_room_reads_the_one_spec(stack: schema.Stack) -> None:
    """Compose and explain start the same server: literal argv and env of profiles.yaml's dsa-fi-sparse-fp8."""
    service = YAML(typ="safe").load(compose.render_compose(stack))["services"]["dsa-fi-sparse-fp8"]
    assert service["command"][:4] == ["--model-path", "nvidia/GLM-5-NVFP4", "--served-model-name", "glm-5"]
    assert service["healthcheck"]["test"][:3] == ["CMD", "python3", "/opt/bwstack/healthchecks/warmup.py"]
    assert service["image"] == "bwstack/sglang:v0.5.23-cu130"
    assert service["environment"]["SGLANG_DSA_PREFILL_DENSE_ATTN_KV_LEN_THRESHOLD"] == "0"
    _version, query, _notes = explain.profile_query(stack, "dsa-fi-sparse-fp8", arch="sm120")
    # model.tp_size and model.quantization, then model.extra_args and the profile's extra_args as written
    assert list(query.extra_argv) == [
        "--tp-size", "8", "--quantization", "modelopt_fp4",
        "--disable-shared-experts-fusion", "--disable-custom-all-reduce",
        "--cuda-graph-max-bs-decode", "256",
    ]  # fmt: skip
    assert dict(query.env) == {"SGLANG_DSA_PREFILL_DENSE_ATTN_KV_LEN_THRESHOLD": "0"}
    for flag in ("--disable-shared-experts-fusion", "--cuda-graph-max-bs-decode"):
        assert flag in service["command"]


def test_an_explain_variant_spells_with_its_own_snapshot(stack: schema.Stack) -> None:
    own = launch.launch_spec(stack, "legacy-nsa-default-fp8")  # v0.5.9: its parser says nsa
    other = launch.launch_spec(stack, "legacy-nsa-default-fp8", "v0.5.23-cu130")
    assert own.variant == "v0.5.9-cu130" and other.image == "bwstack/sglang:v0.5.23-cu130"
    assert own.backend_argv[own.backend_argv.index("--attention-backend") + 1] == "nsa"
    assert other.backend_argv[other.backend_argv.index("--attention-backend") + 1] == "dsa"


def test_explain_reads_a_spec_whose_backends_that_variant_cannot_spell(stack: schema.Stack) -> None:
    # 0.5.9 has no flashinfer_sparse_mla: the server argv cannot be built, but explain's parts can (SGLang
    # itself then refuses the request, which is what explain reports)
    spec = launch.launch_spec(stack, "dsa-fi-sparse-fp8", "v0.5.9-cu130")
    with pytest.raises(launch.LaunchError, match=r"flashinfer_sparse_mla not renderable for sglang 0\.5\.9"):
        _ = spec.argv
    _version, query, _notes = explain.profile_query(
        stack, "dsa-fi-sparse-fp8", arch="sm120", variant=spec.variant
    )
    assert query.extra_argv[:4] == ("--tp-size", "8", "--quantization", "modelopt_fp4")
