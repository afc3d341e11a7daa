"""The rules engine: every shipped rule fires on its condition and not on a near miss; version ranges; the DSA
defaults table; the KV-layout derivation; and bad rules data refused with file:line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from bwstack.errors import UserError
from bwstack.know import backends, rules
from bwstack.know.rules import book
from bwstack.stack.schema import EXPECT_CLASSES
from bwstack.stack.yamlload import load_yaml
from healthchecks import signatures

BOOK = rules.load_rules()
GLM = "GlmMoeDsaForCausalLM"


def ctx(**changes: Any) -> rules.Context:
    """A GLM DSA profile on SGLang 0.5.23 / SM120 with SGLang's own native-DSA defaults; ``changes`` override."""
    effective: dict[str, str | None] = {
        "attention_backend": "dsa",
        "dsa_prefill_backend": "flashinfer_sparse_mla",
        "dsa_decode_backend": "flashinfer_sparse_mla",
        "kv_cache_dtype": "fp8_e4m3",
        "moe_runner_backend": "flashinfer_cutlass",
        "fp4_gemm_backend": "flashinfer_cutlass",
        "dsa_kv_layout": "packed_fp8",
    }
    for name in list(changes):
        if name in effective:
            effective[name] = changes.pop(name)
    base: dict[str, Any] = {
        "sglang_version": "0.5.23",
        "gpu_arch": "sm120",
        "model_arch": GLM,
        "dsa_model": True,
        "effective": effective,
        "packages": {"transformers": "5.19.0"},
    }
    base.update(changes)
    return rules.Context(**base)


def first(context: rules.Context) -> str | None:
    hit = next((r for r in BOOK.rules if r.matches(context)), None)
    return hit.id if hit else None


# (rule id, a context it fires on, a near miss it must not fire on)
CASES: list[tuple[str, rules.Context, rules.Context]] = [
    (
        "dsa-kv-dtype-bf16-or-fp8-only",
        ctx(attention_backend="flashinfer", kv_cache_dtype="fp8_e5m2", dsa_kv_layout=None),
        ctx(attention_backend="flashinfer", kv_cache_dtype="bfloat16", dsa_kv_layout="bf16"),
    ),
    (
        "tilelang-dsa-fp8-kv-rocm-only",
        ctx(sglang_version="0.5.19", dsa_prefill_backend="tilelang", dsa_decode_backend="tilelang"),
        ctx(
            sglang_version="0.5.19",
            dsa_prefill_backend="tilelang",
            dsa_decode_backend="tilelang",
            kv_cache_dtype="bfloat16",
            dsa_kv_layout="bf16",
        ),
    ),
    (
        "triton-dsa-backend-rocm-only",
        ctx(dsa_prefill_backend="triton"),
        ctx(dsa_prefill_backend="triton_sparse_mla"),
    ),
    (
        "trtllm-mla-attention-needs-sm100",
        ctx(attention_backend="trtllm_mla"),
        ctx(attention_backend="trtllm_mla", gpu_arch="sm100"),
    ),
    (
        "fa3-attention-hopper-only",
        ctx(attention_backend="fa3"),
        ctx(attention_backend="fa3", gpu_arch="sm90"),
    ),
    (
        "glm-sm12x-fp8-dsa-needs-flashinfer-sparse-mla",
        ctx(sglang_version="0.5.17", dsa_prefill_backend="trtllm", dsa_decode_backend="trtllm"),
        ctx(
            sglang_version="0.5.17",
            dsa_prefill_backend="trtllm",
            dsa_decode_backend="trtllm",
            kv_cache_dtype="bfloat16",
        ),
    ),
    (
        "glm-sm12x-fp8-dsa-needs-flashinfer-sparse-mla-or-triton-prefill",
        ctx(dsa_decode_backend="flashmla_kv"),
        ctx(dsa_prefill_backend="triton_sparse_mla"),
    ),
    ("flashinfer-sparse-mla-glm-sm12x-fp8-only", ctx(gpu_arch="sm100"), ctx(gpu_arch="sm121")),
    (
        "trtllm-dsa-needs-sm100",
        ctx(gpu_arch="sm90", dsa_prefill_backend="trtllm", dsa_decode_backend="trtllm"),
        ctx(gpu_arch="sm103", dsa_prefill_backend="trtllm", dsa_decode_backend="trtllm"),
    ),
    (
        "fa3-dsa-backend-hopper-only",
        ctx(gpu_arch="sm100", dsa_prefill_backend="flashmla_sparse", dsa_decode_backend="fa3"),
        ctx(gpu_arch="sm90", dsa_prefill_backend="flashmla_sparse", dsa_decode_backend="fa3"),
    ),
    (
        "dsa-indexer-deepgemm-no-kernel",
        ctx(sglang_version="0.5.9", missing=frozenset({"deep_gemm.mqa_logits"})),
        ctx(sglang_version="0.5.9", missing=frozenset({"deep_gemm.gemm"})),
    ),
    (
        "triton-attention-packed-fp8-dsa-kv",
        ctx(attention_backend="triton"),
        ctx(attention_backend="triton", dsa_kv_layout="raw_fp8"),
    ),
    (
        "flashinfer-attention-packed-fp8-dsa-kv",
        ctx(attention_backend="flashinfer"),
        ctx(attention_backend="flashinfer", dsa_kv_layout="bf16", kv_cache_dtype="bfloat16"),
    ),
    (
        "deepgemm-ue8m0-nan-sm120",
        ctx(
            sglang_version="0.5.9",
            attention_backend="flashinfer",
            kv_cache_dtype="bfloat16",
            dsa_kv_layout="bf16",
        ),
        ctx(
            sglang_version="0.5.9",
            attention_backend="flashinfer",
            kv_cache_dtype="bfloat16",
            dsa_kv_layout="bf16",
            env={"SGLANG_ENABLE_JIT_DEEPGEMM": "False"},
        ),
    ),
    (
        "transformers-too-old-for-glm5",
        ctx(
            attention_backend="flashinfer",
            kv_cache_dtype="bfloat16",
            dsa_kv_layout="bf16",
            packages={"transformers": "4.57.1"},
        ),
        ctx(
            attention_backend="flashinfer",
            kv_cache_dtype="bfloat16",
            dsa_kv_layout="bf16",
            packages={"transformers": "5.2.0"},
        ),
    ),
]


def test_every_shipped_rule_has_a_case() -> None:
    assert sorted(case[0] for case in CASES) == sorted(r.id for r in BOOK.rules)


@pytest.mark.parametrize(("rule_id", "hit", "miss"), CASES, ids=[c[0] for c in CASES])
def test_rule_fires_on_its_condition_and_not_on_a_near_miss(
    rule_id: str, hit: rules.Context, miss: rules.Context
) -> None:
    rule = BOOK.rule(rule_id)
    assert rule.matches(hit)
    assert first(hit) == rule_id, "a rule listed earlier shadows this one"
    assert not rule.matches(miss)


def test_healthy_native_dsa_matches_no_rule() -> None:
    assert first(ctx()) is None


def test_unknown_values_never_match() -> None:
    unknown = ctx(attention_backend="triton", dsa_kv_layout=None)
    assert not BOOK.rule("triton-attention-packed-fp8-dsa-kv").matches(unknown)
    sides_unknown = ctx(sglang_version="0.5.17", dsa_prefill_backend=None, dsa_decode_backend=None)
    assert not BOOK.rule("glm-sm12x-fp8-dsa-needs-flashinfer-sparse-mla").matches(sides_unknown)


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        ("0.5.16", None),
        ("0.5.17", "glm-sm12x-fp8-dsa-needs-flashinfer-sparse-mla"),
        ("0.5.22", "glm-sm12x-fp8-dsa-needs-flashinfer-sparse-mla"),
        ("0.5.23", "glm-sm12x-fp8-dsa-needs-flashinfer-sparse-mla-or-triton-prefill"),
        ("0.5.30rc1", "glm-sm12x-fp8-dsa-needs-flashinfer-sparse-mla-or-triton-prefill"),
        (None, None),
    ],
)
def test_version_ranges_of_the_glm_sm12x_gate(version: str | None, expected: str | None) -> None:
    context = ctx(
        sglang_version=version, dsa_prefill_backend="flashmla_auto", dsa_decode_backend="flashmla_kv"
    )
    gate = [r.id for r in BOOK.rules if r.id.startswith("glm-sm12x") and r.matches(context)]
    assert gate == ([expected] if expected else [])


def test_triton_sparse_mla_prefill_is_allowed_only_from_0523() -> None:
    mixed = {"dsa_prefill_backend": "triton_sparse_mla", "dsa_decode_backend": "flashinfer_sparse_mla"}
    assert first(ctx(**mixed)) is None
    assert first(ctx(sglang_version="0.5.19", **mixed)) == "glm-sm12x-fp8-dsa-needs-flashinfer-sparse-mla"


def test_deepgemm_nan_rule_covers_059_to_0514_only() -> None:
    dense = {"attention_backend": "flashinfer", "kv_cache_dtype": "bfloat16", "dsa_kv_layout": "bf16"}
    rule = BOOK.rule("deepgemm-ue8m0-nan-sm120")
    assert rule.matches(ctx(sglang_version="0.5.12", **dense))
    assert not rule.matches(ctx(sglang_version="0.5.15", **dense))
    assert not rule.matches(ctx(sglang_version="0.5.9", gpu_arch="sm100", **dense))
    assert not rule.matches(ctx(sglang_version="0.5.9", env={"SGLANG_ENABLE_JIT_DEEPGEMM": "0"}, **dense))
    assert rule.matches(ctx(sglang_version="0.5.9", env={"SGLANG_ENABLE_JIT_DEEPGEMM": "1"}, **dense))


@pytest.mark.parametrize(
    ("version", "arch", "kv", "expected"),
    [
        ("0.5.23", "sm120", "fp8_e4m3", ("flashinfer_sparse_mla", "flashinfer_sparse_mla")),
        ("0.5.17", "sm121", "fp8_e4m3", ("flashinfer_sparse_mla", "flashinfer_sparse_mla")),
        ("0.5.16", "sm120", "fp8_e4m3", ("trtllm", "trtllm")),
        ("0.5.23", "sm100", "fp8_e4m3", ("trtllm", "trtllm")),
        ("0.5.23", "sm90", "fp8_e4m3", ("flashmla_kv", "flashmla_kv")),
        ("0.5.23", "sm120", "bfloat16", ("flashmla_sparse", "trtllm")),
        ("0.5.23", "sm90", "bfloat16", ("flashmla_sparse", "fa3")),
        ("0.5.9", "sm120", "fp8_e4m3", ("flashmla_auto", "flashmla_kv")),
        ("0.5.9", "sm90", "bfloat16", ("flashmla_sparse", "fa3")),
        # read in the 0.5.11-0.5.14 wheels (server_args.py _set_default_nsa_backends / _dsa_backends)
        ("0.5.12", "sm120", "fp8_e4m3", ("trtllm", "trtllm")),
        ("0.5.10", "sm90", "fp8_e4m3", ("flashmla_auto", "flashmla_kv")),
        ("0.5.8", "sm120", "fp8_e4m3", None),  # older than any wheel read: left unknown
        (None, "sm120", "fp8_e4m3", None),  # version unknown: left unknown
    ],
)
def test_dsa_defaults_table(
    version: str | None, arch: str, kv: str, expected: tuple[str, str] | None
) -> None:
    row = rules.dsa_default(version, arch, GLM, kv)
    assert (None if row is None else (row.prefill, row.decode)) == expected


def test_dsa_defaults_glm_row_is_for_glm_only() -> None:
    row = rules.dsa_default("0.5.23", "sm120", "DeepseekV32ForCausalLM", "fp8_e4m3")
    assert row is not None and (row.prefill, row.decode) == ("trtllm", "trtllm")


@pytest.mark.parametrize(
    ("kv", "sides", "version", "layout"),
    [
        ("bfloat16", ("flashmla_sparse", "trtllm"), "0.5.23", "bf16"),
        ("fp8_e4m3", ("flashinfer_sparse_mla", "flashinfer_sparse_mla"), "0.5.23", "packed_fp8"),
        ("fp8_e4m3", ("trtllm", "trtllm"), "0.5.23", "raw_fp8"),
        ("fp8_e4m3", ("flashmla_sparse", "trtllm"), "0.5.9", "raw_fp8"),
        ("fp8_e4m3", ("tilelang", "tilelang"), "0.5.23", "raw_fp8"),
        ("fp8_e4m3", ("tilelang", "tilelang"), "0.5.19", "packed_fp8"),
        ("fp8_e4m3", ("flashmla_auto", None), "0.5.9", None),
        ("fp8_e5m2", ("trtllm", "trtllm"), "0.5.23", None),
    ],
)
def test_dsa_kv_layout(
    kv: str, sides: tuple[str | None, str | None], version: str, layout: str | None
) -> None:
    eff = {"kv_cache_dtype": kv, "dsa_prefill_backend": sides[0], "dsa_decode_backend": sides[1]}
    assert rules.dsa_kv_layout(eff, dsa_model=True, version=version) == layout
    assert rules.dsa_kv_layout(eff, dsa_model=False, version=version) is None


def test_canonical_spellings() -> None:
    assert rules.canonical("attention_backend", "nsa") == "dsa"
    assert rules.canonical("kv_cache_dtype", "bf16") == "bfloat16"
    assert rules.canonical("kv_cache_dtype", None) is None


@pytest.mark.parametrize("arch", ["sm120", "SM_120", "sm_120"])
def test_normalize_arch(arch: str) -> None:
    assert rules.normalize_arch(arch) == "sm120"


def test_normalize_arch_refuses_unknown() -> None:
    with pytest.raises(UserError, match="unknown arch 'sm80'"):
        rules.normalize_arch("sm80")


# --- the rules file and its schema ---------------------------------------------------------------------------


def test_schema_is_valid_and_the_shipped_file_follows_it() -> None:
    schema = rules.rules_schema()
    Draft202012Validator.check_schema(schema)
    data, _ = load_yaml(rules.RULES_FILE)
    assert list(Draft202012Validator(schema).iter_errors(data)) == []


def test_schema_classes_are_the_failure_classes() -> None:
    enum = rules.rules_schema()["$defs"]["failure_class"]["enum"]
    assert sorted(enum) == sorted(c for c in EXPECT_CLASSES if c != "healthy")
    assert set(enum) <= set(signatures.CLASSES)


def test_every_rule_cites_evidence_and_known_libraries() -> None:
    keys = {lib.key for lib in backends.LIBRARIES}
    for rule in BOOK.rules:
        assert rule.evidence and all(book._EVIDENCE.search(e) for e in rule.evidence), rule.id
        assert set(rule.when.missing_kernel) <= keys
        assert "\n" not in rule.reason and "\n" not in rule.fix


def test_rules_data_and_text_list_every_rule() -> None:
    data = rules.rules_data()
    assert [r["id"] for r in data["rules"]] == [r.id for r in BOOK.rules]
    assert json.loads(json.dumps(data)) == data
    text = rules.render_rules_text(width=400)
    for rule in BOOK.rules:
        assert rule.id in text
    assert "kv_cache_dtype not in [bfloat16, fp8_e4m3]" in text  # brackets are not taken for markup


def test_rules_text_fits_80_columns_with_ids_whole() -> None:
    lines = rules.render_rules_text(width=80).splitlines()
    assert max(len(line) for line in lines) <= 80
    for rule in BOOK.rules:
        assert any(line.split()[:1] == [rule.id] for line in lines), rule.id


GOOD_RULE = """\
version: 1
rules:
  - id: example-rule
    class: nan
    sglang: ">=0.5.9"
    when:
      attention_backend: [flashinfer]
    reason: an example
    fix: none
    evidence:
      - "sgl-project/sglang#1"
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "rules.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_minimal_rules_file_parses(tmp_path: Path) -> None:
    book = rules.load_rules(_write(tmp_path, GOOD_RULE))
    assert [r.id for r in book.rules] == ["example-rule"] and book.rules[0].line == 3


@pytest.mark.parametrize(
    ("old", "new", "line", "message"),
    [
        (
            "      attention_backend: [flashinfer]",
            "      attention_backend: [flashinfer]\n      colour: [red]",
            8,
            "unknown key 'colour'",
        ),
        ("    class: nan", "    class: broken", 4, "invalid value 'broken'"),
        ('      - "sgl-project/sglang#1"', "      []", 10, "should be non-empty"),
        ('    evidence:\n      - "sgl-project/sglang#1"\n', "", 3, "'evidence' is a required property"),
        ('      - "sgl-project/sglang#1"', "      - trust me", 11, "not a public reference"),
        ('    sglang: ">=0.5.9"', '    sglang: "newest"', 5, "not a version specifier"),
        ("      attention_backend: [flashinfer]", "      gpu_arch: [sm80]", 7, "unknown gpu_arch 'sm80'"),
        (
            "      attention_backend: [flashinfer]",
            "      missing_kernel: [flash_mlaa]",
            7,
            "unknown kernel library 'flash_mlaa'",
        ),
        (
            "      attention_backend: [flashinfer]",
            "      attention_backend: {nott: [x]}",
            7,
            "expected a list of values or {not: [values]}",
        ),
        ("    reason: an example", "    reason: ''", 8, "is too short"),
        # SGLang's DSA defaults have one table, healthchecks/vocabulary.py; a rules file may not add another
        (
            '      - "sgl-project/sglang#1"',
            '      - "sgl-project/sglang#1"\ndsa_defaults: []',
            12,
            "unknown key",
        ),
    ],
)
def test_bad_rules_data_is_refused_with_file_and_line(
    tmp_path: Path, old: str, new: str, line: int, message: str
) -> None:
    assert old in GOOD_RULE
    path = _write(tmp_path, GOOD_RULE.replace(old, new))
    with pytest.raises(UserError) as info:
        rules.load_rules(path)
    err = info.value
    assert err.file == str(path) and err.line == line, err.render()
    assert message in err.message


def test_duplicate_rule_ids_are_refused(tmp_path: Path) -> None:
    body = GOOD_RULE.split("rules:\n", 1)[1]
    path = _write(tmp_path, GOOD_RULE + body)
    with pytest.raises(UserError, match="duplicate rule id 'example-rule'") as info:
        rules.load_rules(path)
    assert info.value.line == 12


def test_missing_rules_file_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="file not found"):
        rules.load_rules(tmp_path / "nope.yaml")
