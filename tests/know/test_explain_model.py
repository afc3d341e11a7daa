"""explain without SGLang: how a resolution is read (kept / overridden / unused), rendered, cached, and how a
profile of the real stack becomes a query (argv, env, model config, variant). SGLang itself runs in
tests/know/test_explain_wheels.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bwstack import launch
from bwstack.errors import UserError
from bwstack.know import explain
from bwstack.stack import schema
from healthchecks import vocabulary

pytestmark = pytest.mark.usefixtures("scratch_cache")  # an empty $BWSTACK_CACHE per test


def _raw(**resolved: Any) -> dict[str, Any]:
    base = {
        "attention_backend": "dsa",
        "dsa_prefill_backend": "flashinfer_sparse_mla",
        "dsa_decode_backend": "flashinfer_sparse_mla",
        "kv_cache_dtype": "fp8_e4m3",
        "page_size": 64,
        "moe_runner_backend": "auto",
        "fp4_gemm_backend": "auto",
    }
    return {
        "sglang_version": "0.5.23",
        "api": "hooks",
        "model_arch": "GlmMoeDsaForCausalLM",
        "resolved": {**base, **resolved},
        "log": [
            {
                "level": "INFO",
                "logger": "sglang.x",
                "message": "Use dsa attention backend for DeepSeek with DSA.",
            },
            {
                "level": "WARNING",
                "logger": "sglang.y",
                "message": "Setting page size to 64 for DeepSeek DSA.",
            },
        ],
        "error": None,
        "startup_error": None,
        "argv": ["--tp-size", "8"],
        "steps": ["model_hook.handle_model_specific_adjustments"],
    }


def _resolution(requested: dict[str, str | None], **resolved: Any) -> explain.Resolution:
    return explain._from_raw(_raw(**resolved), "sm120", explain._request("sm120", requested))


def test_outcomes_mark_what_sglang_changes() -> None:
    res = _resolution(
        {"attention_backend": "nsa", "dsa_decode_backend": "trtllm", "kv_cache_dtype": "bf16"},
        kv_cache_dtype="bfloat16",
    )
    status = {o.name: o.status for o in res.outcomes()}
    assert status == {
        "attention_backend": "normalised",  # nsa is 0.5.15+'s deprecated spelling of dsa
        "dsa_prefill_backend": "default",
        "dsa_decode_backend": "overridden",
        "kv_cache_dtype": "normalised",
        "moe_runner_backend": "default",
        "fp4_gemm_backend": "default",
    }
    assert [o.name for o in res.overridden()] == ["dsa_decode_backend"]
    assert res.warnings == ("Setting page size to 64 for DeepSeek DSA.",)


def test_dense_attention_leaves_the_dsa_backends_unused_and_auto_is_resolved() -> None:
    res = _resolution(
        {"attention_backend": "flashinfer", "kv_cache_dtype": "auto"}, attention_backend="flashinfer"
    )
    status = {o.name: o.status for o in res.outcomes()}
    assert not res.dsa_active
    assert status["dsa_prefill_backend"] == status["dsa_decode_backend"] == "unused"
    assert status["kv_cache_dtype"] == "resolved" and res.overridden() == []


def test_render_text_and_json() -> None:
    raw = _raw(dsa_decode_backend="trtllm")
    raw["startup_error"] = {
        "stage": "DeepseekSparseAttnBackend.__init__",
        "type": "ValueError",
        "message": "no",
    }
    res = explain._from_raw(raw, "sm120", explain._request("sm120", {"dsa_decode_backend": "flashmla_kv"}))
    text = explain.Explanation("p", "v0.5.23-cu130", "sm120", res, ("a note",)).render_text()
    assert text.splitlines()[0].startswith("p on sm120: variant v0.5.23-cu130, sglang 0.5.23")
    assert "compute capability 12.0" in text.splitlines()[0]
    assert "OVERRIDDEN: requested flashmla_kv" in text
    assert "page size" in text and "64" in text
    assert "WARNING: Setting page size to 64 for DeepSeek DSA." in text
    assert "fail after loading the model (DeepseekSparseAttnBackend.__init__): ValueError: no" in text
    assert "note: a note" in text
    doc = explain.Explanation("p", "v", "sm120", res).to_json()
    json.dumps(doc)  # plain JSON
    assert doc["fields"]["dsa_decode_backend"] == {
        "requested": "flashmla_kv",
        "effective": "trtllm",
        "status": "overridden",
    }
    assert doc["startup_error"]["type"] == "ValueError" and doc["error"] is None
    assert doc["profile"] == "p" and doc["dsa_active"] is True


def test_model_config_fixtures() -> None:
    glm = explain.load_model_config("glm-5")
    dsv = explain.load_model_config("deepseek-v3.2")
    assert glm["architectures"] == ["GlmMoeDsaForCausalLM"] and glm["index_topk"] == 2048
    assert dsv["architectures"] == ["DeepseekV32ForCausalLM"] and dsv["index_n_heads"] == 64
    for cfg in (glm, dsv):
        assert "quantization_config" not in cfg and "learnable_sink" not in cfg
        assert cfg["kv_lora_rank"] == 512 and cfg["qk_rope_head_dim"] == 64


def test_model_config_by_path_and_unknown(tmp_path: Path) -> None:
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text('{"architectures": ["X"]}')
    assert explain.load_model_config("m", base=tmp_path) == {"architectures": ["X"]}
    with pytest.raises(UserError) as err:
        explain.load_model_config("nope", base=tmp_path)
    assert "glm-5" in err.value.message and err.value.field == "model.config"
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(UserError):
        explain.load_model_config("bad.json", base=tmp_path)


def test_bad_arch_and_field_are_user_errors() -> None:
    with pytest.raises(UserError) as err:
        explain.resolve_cached("0.5.23", "sm75", {"architectures": ["X"]}, {})
    assert err.value.field == "--arch" and "sm120" in err.value.message
    with pytest.raises(UserError):
        explain.resolve_cached("0.5.23", "sm120", {"architectures": ["X"]}, {"attn": "x"})


def test_cache_roundtrip_and_key() -> None:
    cfg = explain.load_model_config("glm-5")
    query = explain.Query("sm120", cfg, {"kv_cache_dtype": "fp8_e4m3"}, ("--tp-size", "8"))
    assert (
        explain.resolve_cached(
            "0.5.23", "sm120", cfg, {"kv_cache_dtype": "fp8_e4m3"}, extra_argv=query.extra_argv
        )
        is None
    )
    explain._store(explain._cache_path("0.5.23", query), _raw())
    found = explain.resolve_cached(
        "0.5.23", "sm120", cfg, {"kv_cache_dtype": "fp8_e4m3"}, extra_argv=query.extra_argv
    )
    assert found is not None and found.value("dsa_decode_backend") == "flashinfer_sparse_mla"
    assert found.requested["kv_cache_dtype"] == "fp8_e4m3" and found.requested["attention_backend"] is None
    others = [
        explain.Query("sm100", cfg, query.requested, query.extra_argv),
        explain.Query("sm120", cfg, {"kv_cache_dtype": "bf16"}, query.extra_argv),
        explain.Query("sm120", cfg, query.requested, ("--tp-size", "4")),
        explain.Query("sm120", cfg, query.requested, query.extra_argv, {"SGLANG_X": "1"}),
        explain.Query("sm120", {**cfg, "index_topk": None}, query.requested, query.extra_argv),
    ]
    keys = {explain.cache_key("0.5.23", q) for q in [query, *others]} | {explain.cache_key("0.5.9", query)}
    assert len(keys) == 7
    # a change of the vocabulary's tables the resolver is sent is a new key too
    spellings = dict(vocabulary.VALUE_SPELLINGS)
    spellings["moe_runner_backend"] = {"flashinfer_cutlass": ("flashinfer_cutlass", "fi_cutlass")}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(vocabulary, "VALUE_SPELLINGS", spellings)
        assert explain.cache_key("0.5.23", query) not in keys
    explain.clear_cache()
    assert (
        explain.resolve_cached(
            "0.5.23", "sm120", cfg, {"kv_cache_dtype": "fp8_e4m3"}, extra_argv=query.extra_argv
        )
        is None
    )


def test_profile_query_carries_what_the_server_gets(stack: schema.Stack) -> None:
    version, query, notes = explain.profile_query(stack, "dsa-fi-sparse-fp8", arch="sm120")
    profile = stack.profiles["dsa-fi-sparse-fp8"]
    assert version == stack.variant_for("dsa-fi-sparse-fp8").sglang_version
    assert notes == ()
    assert query.arch == "sm120" and query.model_config == explain.load_model_config(stack.model.config)
    assert query.requested == profile.backends()
    argv = list(query.extra_argv)
    assert argv[:2] == ["--tp-size", str(stack.model.tp_size)]
    if stack.model.quantization:
        assert argv[argv.index("--quantization") + 1] == stack.model.quantization
    for arg in [*stack.model.extra_args, *profile.extra_args]:
        assert arg in argv
    for key, value in profile.env.items():
        assert query.env[key] == value


def test_explain_uses_the_variants_version_and_notes_a_proxy(
    stack: schema.Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[tuple[str, explain.Query]] = []

    def fake_many(version: str, queries: list[explain.Query], **_: Any) -> list[explain.Resolution]:
        seen.extend((version, q) for q in queries)
        return [explain._from_raw(_raw(), q.arch, q.request()) for q in queries]

    monkeypatch.setattr(explain, "resolve_many", fake_many)
    result = explain.explain(stack, "dsa-fi-sparse-fp8", arch="sm90", variant=None)
    assert seen[-1][0] == stack.variant_for("dsa-fi-sparse-fp8").sglang_version and seen[-1][1].arch == "sm90"
    assert result.variant == stack.variant_name_for("dsa-fi-sparse-fp8")
    assert result.notes == (launch.launch_spec(stack, "dsa-fi-sparse-fp8").hang_bound.line(),)  # only that
    nightly = next(p.name for p in stack.images_dir.iterdir() if p.name.startswith("nightly"))
    result = explain.explain(stack, "dsa-fi-sparse-fp8", arch="sm120", variant=nightly)
    snapshot = stack.snapshot(nightly)
    assert seen[-1][0] == snapshot.sglang_version != ""
    assert result.variant == nightly and "not on PyPI" in result.notes[0]
    assert "note:" in result.render_text()


def test_cached_explanation_never_runs_sglang(stack: schema.Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*_: Any, **__: Any) -> None:
        raise AssertionError("must not run SGLang")

    monkeypatch.setattr(explain, "resolve_many", boom)
    assert explain.cached_explanation(stack, "dense-fi-bf16", arch="sm120") is None
    version, query, _ = explain.profile_query(stack, "dense-fi-bf16", arch="sm120")
    explain._store(explain._cache_path(version, query), _raw(attention_backend="flashinfer"))
    found = explain.cached_explanation(stack, "dense-fi-bf16", arch="sm120")
    assert found is not None and not found.resolution.dsa_active
