"""The backend → kernel-library table: consistency, and its globs against file names seen in real wheels."""

from __future__ import annotations

import re

import pytest

from bwstack.know import backends, fatbin


def test_every_needed_library_exists_and_fields_are_known() -> None:
    keys = {lib.key for lib in backends.LIBRARIES}
    assert len(keys) == len(backends.LIBRARIES), "duplicate library key"
    for use in backends.BACKENDS:
        assert use.field in backends.FIELDS, use
        assert use.needs, use
        for group in use.needs:
            assert group, use
            for key in group:
                assert key in keys, f"{use.field}={use.value} needs unknown library {key}"
        assert use.source.strip(), use


def test_no_duplicate_backend_entries() -> None:
    pairs = [(u.field, u.value) for u in backends.BACKENDS]
    assert len(pairs) == len(set(pairs))


def test_every_library_has_source_and_a_way_to_judge_it() -> None:
    families = {"any", "sm90", "sm100", "sm120"}
    for lib in backends.LIBRARIES:
        assert lib.source.strip() and lib.title.strip() and lib.packages and lib.present, lib.key
        assert lib.binaries or lib.jit_sources, f"{lib.key}: neither binaries nor JIT sources"
        assert {fam for fam, _ in lib.jit_sources} <= families, lib.key
        for glob in lib.all_globs():
            assert not glob.startswith("/"), glob
            fatbin.glob_regex(glob)  # compiles


def test_lookup_spellings_and_groups() -> None:
    assert backends.lookup("attention_backend", "nsa") == backends.lookup("attention_backend", "dsa")
    assert backends.lookup("attention_backend", "nope") is None
    groups = backends.libraries_for("dsa_decode_backend", "flashmla_kv")
    assert [[lib.key for lib in group] for group in groups] == [["flash_mla", "sgl_kernel.flashmla_ops"]]
    assert backends.libraries_for("dsa_decode_backend", "unknown") == ()
    assert {u.value for u in backends.backend_uses("common")} == {"torch", "sgl_kernel"}
    with pytest.raises(KeyError):
        backends.library("no.such.library")


@pytest.mark.parametrize("field", ["dsa_prefill_backend", "dsa_decode_backend"])
def test_dsa_sub_backends_of_the_reference_are_covered(field: str) -> None:
    # sglang-by-version.md §3.3 / sm120-backends.md §2: the CUDA DSA sub-backend values.
    wanted = {
        "flashmla_sparse",
        "flashmla_kv",
        "flashmla_auto",
        "fa3",
        "trtllm",
        "tilelang",
        "flashinfer_sparse_mla",
    }
    assert wanted <= {u.value for u in backends.backend_uses(field)}


def test_family_of() -> None:
    assert backends.family_of((12, 0)) == backends.family_of((12, 1)) == "sm120"
    assert backends.family_of((10, 3)) == "sm100"
    assert backends.family_of((9, 0)) == "sm90"


def _owners(path: str, family: str = "sm120") -> set[str]:
    """Library keys whose binaries or JIT sources (for ``family``) match a site-relative path."""
    owners = set()
    for lib in backends.LIBRARIES:
        globs = (*lib.binaries, *lib.jit_globs(family))
        if any(fatbin.glob_regex(g).match(path) for g in globs):
            owners.add(lib.key)
    return owners


@pytest.mark.parametrize(
    ("path", "family", "owner"),
    [
        # file names read in sglang-kernel 0.4.10, sgl-kernel 0.3.21, sgl-flash-mla 1.0.0, flashinfer-cubin 0.6.12,
        # sgl-deep-gemm 0.2.3.post2 and flashinfer-python 0.7.2 wheels
        ("sgl_kernel/sm100/common_ops.abi3.so", "sm120", "sgl_kernel.common_ops"),
        ("sgl_kernel/sm90/common_ops.abi3.so", "sm90", "sgl_kernel.common_ops"),
        ("sgl_kernel/flash_ops.abi3.so", "sm120", "sgl_kernel.flash_ops"),
        ("sgl_kernel/flashmla_ops.abi3.so", "sm120", "sgl_kernel.flashmla_ops"),
        ("flash_mla/cuda.abi3.so", "sm120", "flash_mla"),
        ("flash_mla/_C_legacy.abi3.so", "sm120", "flash_mla"),
        ("torch/lib/libtorch_cuda.so", "sm120", "torch"),
        (
            "flashinfer_cubin/cubins/158f6fa11ef139a098cfddcdddce73ca99d164ad/fmha/trtllm-gen/"
            "fmhaSm100aKernel_QE4m3KvE2m1OE4m3H128PagedKvCausalP16VarSeqQ128Kv128PersistentContext.cubin",
            "sm120",
            "flashinfer.trtllm_gen_fmha",
        ),
        (
            "flashinfer_cubin/cubins/c21ddd11585c1eea5764927465d0be15dd957e45/batched_gemm-91e0ba0-da44fdf/"
            "Bmm_Bfloat16_Bfloat16Bfloat16_Fp32_t128x128x64_s5_et128x128_m256x1.cubin",
            "sm120",
            "flashinfer.trtllm_gen_gemm",
        ),
        ("deep_gemm/include/deep_gemm/impls/sm120_fp8_paged_mqa_logits.cuh", "sm120", "deep_gemm.mqa_logits"),
        ("deep_gemm/include/deep_gemm/impls/sm90_fp8_paged_mqa_logits.cuh", "sm90", "deep_gemm.mqa_logits"),
        ("deep_gemm/include/deep_gemm/impls/sm100_mqa_logits.cuh", "sm100", "deep_gemm.mqa_logits"),
        ("deep_gemm/include/deep_gemm/impls/sm120_fp8_fp4_gemm_1d1d.cuh", "sm120", "deep_gemm.gemm"),
        ("flashinfer/data/csrc/sparse_mla_sm120/decode_dispatch.cu", "sm120", "flashinfer.sparse_mla_sm120"),
        ("flashinfer/data/csrc/batch_prefill.cu", "sm120", "flashinfer.attention"),
        ("flashinfer/data/csrc/fp4_gemm_cutlass_sm120.cu", "sm120", "flashinfer.fp4_gemm_cutlass"),
        (
            "flashinfer/data/csrc/fused_moe/cutlass_backend/cutlass_fused_moe_instantiation.cu",
            "sm90",
            "flashinfer.cutlass_moe",
        ),
        ("triton/backends/nvidia/compiler.py", "sm120", "triton"),
    ],
)
def test_globs_match_real_layouts(path: str, family: str, owner: str) -> None:
    assert _owners(path, family) == {owner}


@pytest.mark.parametrize(
    ("path", "family"),
    [
        ("deep_gemm/include/deep_gemm/impls/sm90_fp8_paged_mqa_logits.cuh", "sm120"),
        ("flashinfer/data/csrc/sparse_mla_sm120/decode_dispatch.cu", "sm100"),
        ("sgl_kernel/spatial_ops.abi3.so", "sm120"),
        ("flashinfer_cubin/cubins/x/fmha/cute-dsl/x86_64/sm_100a/checksums.txt", "sm120"),
    ],
)
def test_globs_do_not_match_other_files(path: str, family: str) -> None:
    assert _owners(path, family) == set()


def test_sources_cite_something_checkable() -> None:
    """Every library's evidence names a wheel, an issue/PR or a path in a package."""
    checkable = re.compile(r"#\d+|wheel|\.py|\.cu|/|\d+\.\d+")
    for lib in backends.LIBRARIES:
        assert checkable.search(lib.source), lib.key
