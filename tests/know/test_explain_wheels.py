"""``explain.resolve`` against the real SGLang wheels: the pinned version's own resolution code, run on the CPU.

Each case is a fact from the reference (sglang-by-version.md §4) that must come out of SGLang's code itself.
Results are computed fresh (``use_cache=False``), one venv run per SGLang version (SGLang is imported once, each
case runs in a forked child); the venvs are the ones test_snapshots.py builds.
"""

from __future__ import annotations

import pytest

from bwstack.know import explain

pytestmark = pytest.mark.wheels

GLM = explain.load_model_config("glm-5")
DSV32 = explain.load_model_config("deepseek-v3.2")
TP8 = ("--tp-size", "8")

#: name -> (version, arch, model config, requested, extra argv); each version's cases run in one venv call
CASES: dict[str, tuple[str, str, dict[str, object], dict[str, str | None], tuple[str, ...]]] = {
    "0523-glm-fp8-sm120": ("0.5.23", "sm120", GLM, {"kv_cache_dtype": "fp8_e4m3"}, TP8),
    "0523-glm-auto-sm120": ("0.5.23", "sm120", GLM, {}, TP8),
    "059-glm-auto-sm120": ("0.5.9", "sm120", GLM, {}, TP8),
    "0523-dense-fi-auto": ("0.5.23", "sm120", GLM, {"attention_backend": "flashinfer", "kv_cache_dtype": "auto"}, TP8),
    "059-glm-fp8-sm120": ("0.5.9", "sm120", GLM, {"kv_cache_dtype": "fp8_e4m3"}, TP8),
    "059-glm-fp8-sm90": ("0.5.9", "sm90", GLM, {"kv_cache_dtype": "fp8_e4m3"}, TP8),
    "0523-glm-fp8-sm90": ("0.5.23", "sm90", GLM, {"kv_cache_dtype": "fp8_e4m3"}, TP8),
    "0523-glm-fp8-sm100": (
        "0.5.23", "sm100", GLM, {"kv_cache_dtype": "fp8_e4m3"}, (*TP8, "--quantization", "modelopt_fp4"),
    ),
    "0523-dsv32-fp8-sm120": ("0.5.23", "sm120", DSV32, {"kv_cache_dtype": "fp8_e4m3"}, TP8),
    "0523-glm-trtllm-sm120": (
        "0.5.23", "sm120", GLM,
        {"attention_backend": "dsa", "dsa_prefill_backend": "trtllm", "dsa_decode_backend": "trtllm",
         "kv_cache_dtype": "fp8_e4m3"},
        TP8,
    ),
    "059-unknown-value": (
        "0.5.9", "sm120", GLM,
        {"attention_backend": "dsa", "dsa_decode_backend": "flashinfer_sparse_mla", "kv_cache_dtype": "fp8_e4m3"},
        TP8,
    ),
}  # fmt: skip


@pytest.fixture(scope="module")
def results() -> dict[str, explain.Resolution]:
    out: dict[str, explain.Resolution] = {}
    for version in sorted({case[0] for case in CASES.values()}):
        names = [name for name, case in CASES.items() if case[0] == version]
        queries = [explain.Query(CASES[n][1], CASES[n][2], CASES[n][3], CASES[n][4]) for n in names]
        out.update(zip(names, explain.resolve_many(version, queries, use_cache=False), strict=True))
    return out


def _backends(res: explain.Resolution) -> tuple[object, object]:
    return res.value("dsa_prefill_backend"), res.value("dsa_decode_backend")


def test_0523_glm_fp8_on_sm120_defaults_to_flashinfer_sparse_mla(
    results: dict[str, explain.Resolution],
) -> None:
    res = results["0523-glm-fp8-sm120"]
    assert res.error is None and res.startup_error is None
    assert res.value("attention_backend") == "dsa" and res.dsa_active
    assert _backends(res) == ("flashinfer_sparse_mla", "flashinfer_sparse_mla")
    assert res.page_size == 64
    assert any("GLM FP8 KV Cache on SM120/SM121" in w for w in res.warnings)
    assert res.api == "hooks" and res.model_arch == "GlmMoeDsaForCausalLM"


@pytest.mark.parametrize("version", ["0.5.9", "0.5.23"])
def test_auto_kv_on_sm120_becomes_fp8(version: str, results: dict[str, explain.Resolution]) -> None:
    res = results[{"0.5.9": "059", "0.5.23": "0523"}[version] + "-glm-auto-sm120"]
    assert res.value("kv_cache_dtype") == "fp8_e4m3"
    assert "Setting KV cache dtype to fp8_e4m3 for DeepSeek DSA on SM12 device." in res.warnings


def test_0523_auto_kv_outcome_is_marked_resolved(results: dict[str, explain.Resolution]) -> None:
    res = results["0523-dense-fi-auto"]
    fields = {o.name: o for o in res.outcomes()}
    assert fields["kv_cache_dtype"].status == "resolved" and fields["kv_cache_dtype"].effective == "fp8_e4m3"
    assert fields["dsa_decode_backend"].status == "unused"  # dense attention: the DSA sub-backends do not run


@pytest.mark.parametrize("arch", ["sm120", "sm90"])
def test_059_fp8_picks_flashmla(arch: str, results: dict[str, explain.Resolution]) -> None:
    res = results[f"059-glm-fp8-{arch}"]
    assert res.value("attention_backend") == "nsa"
    assert _backends(res) == ("flashmla_auto", "flashmla_kv")
    assert any(w.startswith("Set NSA backends for fp8_e4m3 KV Cache") for w in res.warnings)
    assert res.api == "methods"


def test_059_glm_on_blackwell_forces_mla_prefill(results: dict[str, explain.Resolution]) -> None:
    blackwell, hopper = results["059-glm-fp8-sm120"], results["059-glm-fp8-sm90"]
    line = "Force NSA prefill to use MLA (i.e. disable MHA_ONE_SHOT) for GlmMoeDsaForCausalLM on Blackwell."
    assert line in blackwell.warnings and line not in hopper.warnings


def test_0523_hopper_fp8_picks_flashmla_kv(results: dict[str, explain.Resolution]) -> None:
    res = results["0523-glm-fp8-sm90"]
    assert _backends(res) == ("flashmla_kv", "flashmla_kv")


def test_0523_sm100_fp8_picks_trtllm_and_the_sm100_moe_runner(results: dict[str, explain.Resolution]) -> None:
    res = results["0523-glm-fp8-sm100"]
    assert _backends(res) == ("trtllm", "trtllm")
    assert res.value("moe_runner_backend") == "flashinfer_trtllm"


def test_0523_deepseek_v32_on_sm120_keeps_the_blackwell_default(
    results: dict[str, explain.Resolution],
) -> None:
    res = results["0523-dsv32-fp8-sm120"]
    assert _backends(res) == ("trtllm", "trtllm")
    assert res.startup_error is None  # the SM12x gate applies to GLM only; trtllm then fails in the kernel


def test_0523_trtllm_on_sm120_fails_when_the_dsa_backend_starts(
    results: dict[str, explain.Resolution],
) -> None:
    res = results["0523-glm-trtllm-sm120"]
    assert res.error is None  # resolution keeps the user's choice ...
    assert _backends(res) == ("trtllm", "trtllm")
    assert res.startup_error is not None  # ... the attention backend refuses it at start-up
    assert res.startup_error.type == "ValueError"
    assert "supports only flashinfer_sparse_mla" in res.startup_error.message
    assert not res.overridden()


def test_059_refuses_a_value_it_does_not_know(results: dict[str, explain.Resolution]) -> None:
    res = results["059-unknown-value"]
    assert res.error is not None and res.error.stage == "argparse"
    assert "flashinfer_sparse_mla" in res.error.message
