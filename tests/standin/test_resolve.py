"""Backend resolution for DSA models per SGLang version and GPU arch (sglang-by-version.md §4.2)."""

from __future__ import annotations

from typing import Any

import pytest

from bwstack.standin import resolve
from bwstack.standin.env import EnvError, arch_capability, read_env
from bwstack.standin.models import load_model

GLM = load_model("nvidia/GLM-5-NVFP4")
DSV32 = load_model("deepseek-ai/DeepSeek-V3.2")
LLAMA = load_model("meta-llama/Llama-3.1-8B-Instruct")

DSA_ARGS = {
    "dsa_prefill_backend": None,
    "dsa_decode_backend": None,
    "attention_backend": None,
    "prefill_attention_backend": None,
    "decode_attention_backend": None,
    "kv_cache_dtype": "auto",
    "tp_size": 1,
    "dp_size": 1,
    "moe_runner_backend": "auto",
    "moe_a2a_backend": "none",
    "quantization": None,
}
NSA_ARGS = {("nsa" + k[3:] if k.startswith("dsa_") else k): v for k, v in DSA_ARGS.items()}
DSA_CHOICES = ("triton", "dsa", "nsa", "flashinfer")
NSA_CHOICES = ("triton", "nsa", "flashinfer")


def run(
    version: tuple[int, ...], arch: str, model: Any = GLM, override: bool = False, **args: Any
) -> resolve.Resolution:
    legacy = version <= (0, 5, 12)
    base = dict(NSA_ARGS if legacy else DSA_ARGS)
    base.update(args)
    target = resolve.Target(
        version, arch_capability(arch), model, NSA_CHOICES if legacy else DSA_CHOICES, {}, override
    )
    return resolve.resolve(base, target)


def backends(result: resolve.Resolution) -> tuple[str, str]:
    updates = result.updates
    prefix = "nsa" if "nsa_decode_backend" in updates else "dsa"
    return updates[f"{prefix}_prefill_backend"], updates[f"{prefix}_decode_backend"]


# (version, arch, model, kv) -> (prefill, decode): the table of sglang-by-version.md §4.2
EXPECTED = [
    ((0, 5, 9), "sm90", GLM, "fp8_e4m3", ("flashmla_auto", "flashmla_kv")),
    ((0, 5, 9), "sm100", GLM, "auto", ("flashmla_auto", "flashmla_kv")),
    ((0, 5, 9), "sm120", GLM, "auto", ("flashmla_auto", "flashmla_kv")),
    ((0, 5, 9), "sm90", GLM, "auto", ("flashmla_sparse", "fa3")),
    ((0, 5, 9), "sm120", GLM, "bf16", ("flashmla_sparse", "trtllm")),
    ((0, 5, 10), "sm100", GLM, "auto", ("trtllm", "trtllm")),
    ((0, 5, 10), "sm90", GLM, "fp8_e4m3", ("flashmla_auto", "flashmla_kv")),
    ((0, 5, 12), "sm90", GLM, "fp8_e4m3", ("flashmla_kv", "flashmla_kv")),
    ((0, 5, 12), "sm120", GLM, "auto", ("trtllm", "trtllm")),
    ((0, 5, 15), "sm120", GLM, "auto", ("trtllm", "trtllm")),
    ((0, 5, 16), "sm100", DSV32, "fp8_e4m3", ("trtllm", "trtllm")),
    ((0, 5, 17), "sm120", GLM, "auto", ("flashinfer_sparse_mla", "flashinfer_sparse_mla")),
    ((0, 5, 23), "sm120", GLM, "auto", ("flashinfer_sparse_mla", "flashinfer_sparse_mla")),
    ((0, 5, 23), "sm120", DSV32, "auto", ("trtllm", "trtllm")),
    ((0, 5, 23), "sm100", GLM, "auto", ("trtllm", "trtllm")),
    ((0, 5, 23), "sm90", GLM, "fp8_e4m3", ("flashmla_kv", "flashmla_kv")),
    ((0, 5, 23), "sm120", GLM, "bfloat16", ("flashmla_sparse", "trtllm")),
    ((0, 5, 23), "sm90", DSV32, "auto", ("flashmla_sparse", "fa3")),
]


@pytest.mark.parametrize(("version", "arch", "model", "kv", "expected"), EXPECTED)
def test_dsa_defaults(
    version: tuple[int, ...], arch: str, model: Any, kv: str, expected: tuple[str, str]
) -> None:
    assert backends(run(version, arch, model, kv_cache_dtype=kv)) == expected


def test_kv_auto_rule_and_log_lines_0523_sm120() -> None:
    result = run((0, 5, 23), "sm120")
    texts = [line.text for line in result.lines]
    assert result.updates["kv_cache_dtype"] == "fp8_e4m3"
    assert result.updates["attention_backend"] == "dsa"
    assert result.updates["page_size"] == 64
    assert texts == [
        "Set dense attention kv len threshold to model index_topk=2048 for DeepSeek with DSA.",
        "Use dsa attention backend for DeepSeek with DSA.",
        "Setting page size to 64 for DeepSeek DSA.",
        "Setting KV cache dtype to fp8_e4m3 for DeepSeek DSA on SM12 device.",
        "Set DSA backends for GLM FP8 KV Cache on SM120/SM121: prefill=flashinfer_sparse_mla, "
        "decode=flashinfer_sparse_mla.",
    ]


def test_059_spelling() -> None:
    result = run((0, 5, 9), "sm120", tp_size=8)
    texts = [line.text for line in result.lines]
    assert result.updates["attention_backend"] == "nsa"
    assert (
        texts[0]
        == "Force NSA prefill to use MLA (i.e. disable MHA_ONE_SHOT) for GlmMoeDsaForCausalLM on Blackwell."
    )
    assert "Use nsa attention backend for DeepSeek with DSA." in texts
    assert (
        "DSA with TP mode is active, dp_size=1, tp_size=8, attn_tp_size=8, attention weights will be sharded "
        "across 8 ranks."
    ) in texts
    assert texts[-1] == "Set NSA backends for fp8_e4m3 KV Cache: prefill=flashmla_auto, decode=flashmla_kv."


def test_kv_on_hopper_and_bf16_normalised() -> None:
    hopper = run((0, 5, 23), "sm90")
    assert hopper.updates["kv_cache_dtype"] == "bfloat16"
    assert "Setting KV cache dtype to bfloat16 for DeepSeek DSA on SM9 device." in [
        x.text for x in hopper.lines
    ]
    explicit = run((0, 5, 23), "sm120", kv_cache_dtype="bf16")
    assert explicit.updates["kv_cache_dtype"] == "bfloat16"
    assert not any("Setting KV cache dtype" in x.text for x in explicit.lines)


def test_user_backends_kept_except_0510_on_blackwell() -> None:
    kept = run(
        (0, 5, 23),
        "sm120",
        kv_cache_dtype="bfloat16",
        attention_backend="flashinfer",
        dsa_decode_backend="flashmla_kv",
    )
    assert backends(kept) == ("flashmla_sparse", "flashmla_kv")
    assert "attention_backend" not in kept.updates  # the user's dense backend stays
    ignored = run((0, 5, 10), "sm100", kv_cache_dtype="fp8_e4m3", nsa_decode_backend="flashmla_kv")
    assert backends(ignored) == ("trtllm", "trtllm")
    warned = run((0, 5, 23), "sm120", dsa_decode_backend="trtllm")
    assert any("you should also explicitly set --kv-cache-dtype" in x.text for x in warned.lines)


def test_override_fault_reports_another_decode_backend() -> None:
    result = run(
        (0, 5, 23),
        "sm120",
        override=True,
        kv_cache_dtype="fp8_e4m3",
        dsa_decode_backend="flashinfer_sparse_mla",
    )
    assert backends(result)[1] == "trtllm"
    assert (
        result.lines[-1].text
        == "Set DSA backends for fp8_e4m3 KV Cache: prefill=flashinfer_sparse_mla, decode=trtllm."
    )
    assert resolve.override_value("trtllm") != "trtllm"


def test_moe_runner_only_switches_on_sm100() -> None:
    sm100 = run((0, 5, 23), "sm100")
    assert sm100.updates["moe_runner_backend"] == "flashinfer_trtllm"
    assert sm100.updates["quantization"] == "modelopt_fp4"
    assert "moe_runner_backend" not in run((0, 5, 23), "sm120").updates
    assert "moe_runner_backend" not in run((0, 5, 9), "sm90").updates


def test_non_dsa_model_is_left_alone() -> None:
    result = run((0, 5, 23), "sm120", LLAMA)
    assert result.updates == {}
    assert result.lines == []
    assert not result.is_dsa


def test_refused_configurations() -> None:
    with pytest.raises(resolve.ResolutionError, match="DeepSeek DSA only supports bf16/bfloat16 or fp8_e4m3"):
        run((0, 5, 23), "sm120", kv_cache_dtype="fp8_e5m2")
    with pytest.raises(resolve.ResolutionError, match="The triton DSA backend is only supported on ROCm/HIP"):
        run((0, 5, 23), "sm120", kv_cache_dtype="bfloat16", dsa_decode_backend="triton")


def test_glm_sm12_rejection() -> None:
    args = {
        **DSA_ARGS,
        "attention_backend": "dsa",
        "kv_cache_dtype": "fp8_e4m3",
        "dsa_prefill_backend": "flashinfer_sparse_mla",
        "dsa_decode_backend": "trtllm",
    }
    target = resolve.Target((0, 5, 23), (12, 0), GLM)
    message = resolve.glm_sm12_rejection((0, 5, 23), args, target)
    assert message == (
        "GLM DSA with FP8 KV cache on NVIDIA SM120/SM121 supports only flashinfer_sparse_mla (default) "
        "or triton_sparse_mla (prefill), but got ['trtllm']."
    )
    ok = {**args, "dsa_decode_backend": "flashinfer_sparse_mla"}
    assert resolve.glm_sm12_rejection((0, 5, 23), ok, target) is None
    dsv = resolve.Target((0, 5, 23), (12, 0), DSV32)
    assert "flashinfer_sparse_mla supports only GLM DSA" in str(
        resolve.glm_sm12_rejection((0, 5, 23), ok, dsv)
    )
    assert resolve.glm_sm12_rejection((0, 5, 12), args, target) is None  # no such check before 0.5.17


def test_env_interface() -> None:
    env = read_env({})
    assert (env.arch, env.fault, env.load_seconds, env.args_path) == (
        "sm120",
        "none",
        2.0,
        "/opt/bwstack/sglang-args.json",
    )
    assert read_env({"BWSTACK_STANDIN_FAULT": "slow_start"}).load_seconds == 30.0
    assert read_env({"BWSTACK_STANDIN_ARCH": "sm100"}).capability == (10, 0)
    with pytest.raises(EnvError, match="valid: none, nan, device_assert"):
        read_env({"BWSTACK_STANDIN_FAULT": "meltdown"})
    with pytest.raises(EnvError, match="BWSTACK_STANDIN_ARCH"):
        read_env({"BWSTACK_STANDIN_ARCH": "ampere"})


def test_model_from_local_config(tmp_path: Any) -> None:
    (tmp_path / "config.json").write_text(
        '{"architectures": ["DeepseekV32ForCausalLM"], "index_topk": 2048, "model_type": "deepseek_v32"}'
    )
    model = load_model(str(tmp_path), '{"num_hidden_layers": 4}')
    assert model.architecture == "DeepseekV32ForCausalLM"
    assert model.config["num_hidden_layers"] == 4
    assert resolve.is_dsa_model(model)
    no_indexer = load_model(str(tmp_path), '{"index_topk": null}')
    assert not resolve.is_dsa_model(no_indexer)
