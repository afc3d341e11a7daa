"""Semantic fields -> SGLang flags, against the committed parser snapshots of 0.5.9 and 0.5.23.

These read the real snapshots (generated from the PyPI wheels, drift-checked in test_snapshots.py), so they run
without network; they pin the facts of the --nsa-* -> --dsa-* rename and the flags 0.5.23 dropped.
"""

from __future__ import annotations

import pytest

from bwstack.stack import snapshots
from support.stack import ROOT


@pytest.fixture(scope="module")
def v059() -> snapshots.Snapshot:
    return snapshots.load_snapshot(ROOT / "images" / "v0.5.9-cu130" / "sglang-args.json")


@pytest.fixture(scope="module")
def v0523() -> snapshots.Snapshot:
    return snapshots.load_snapshot(ROOT / "images" / "v0.5.23-cu130" / "sglang-args.json")


def test_versions_and_provenance(v059: snapshots.Snapshot, v0523: snapshots.Snapshot) -> None:
    assert v059.sglang_version == "0.5.9" and v0523.sglang_version == "0.5.23"
    for snap in (v059, v0523):
        assert snap.provenance["method"] == "wheel" and len(snap.provenance["sha256"]) == 64
    assert v059.requires_dist["transformers"] == "==4.57.1"
    assert v0523.requires_dist["transformers"] == "==5.19.0"
    assert v0523.requires_dist["flashinfer_python"] == "==0.7.2"


def test_dsa_flags_are_spelt_per_version(v059: snapshots.Snapshot, v0523: snapshots.Snapshot) -> None:
    assert v059.option_for("dsa_decode_backend") == "--nsa-decode-backend"
    assert v059.option_for("dsa_prefill_backend") == "--nsa-prefill-backend"
    assert v0523.option_for("dsa_decode_backend") == "--dsa-decode-backend"
    assert v0523.option_for("dsa_prefill_backend") == "--dsa-prefill-backend"
    assert v059.flag("--dsa-decode-backend") is None


def test_nsa_flags_are_unknown_to_0523(v0523: snapshots.Snapshot) -> None:
    assert v0523.flag("--nsa-decode-backend") is None and v0523.flag("--nsa-prefill-backend") is None
    problems = snapshots.check_argv(v0523, ["--nsa-decode-backend", "flashmla_kv"])
    assert problems and "unknown flag --nsa-decode-backend" in problems[0].message


def test_flags_gone_in_0523(v059: snapshots.Snapshot, v0523: snapshots.Snapshot) -> None:
    for gone in ("--enable-nan-detection", "--cuda-graph-max-bs"):
        assert v059.flag(gone) is not None
        assert v0523.flag(gone) is None
        assert snapshots.check_argv(v0523, [gone] if gone.startswith("--enable") else [gone, "32"])
    assert v0523.flag("--cuda-graph-max-bs-decode") is not None


def test_dsa_backend_choices_per_version(v059: snapshots.Snapshot, v0523: snapshots.Snapshot) -> None:
    old = set(v059.valid_values("dsa_decode_backend") or ())
    new_decode = set(v0523.valid_values("dsa_decode_backend") or ())
    new_prefill = set(v0523.valid_values("dsa_prefill_backend") or ())
    assert old == {"flashmla_sparse", "flashmla_kv", "flashmla_auto", "fa3", "tilelang", "aiter", "trtllm"}
    assert "flashinfer_sparse_mla" not in old
    assert {"flashinfer_sparse_mla", "flashmla_sparse_q8", "triton", "intel_xpu"} <= new_decode
    assert "triton_sparse_mla" in new_prefill and "triton_sparse_mla" not in new_decode
    assert v059.spell_value("dsa_decode_backend", "flashinfer_sparse_mla") is None
    assert v0523.spell_value("dsa_decode_backend", "flashinfer_sparse_mla") == "flashinfer_sparse_mla"
    problems = snapshots.check_argv(v059, ["--nsa-decode-backend", "flashinfer_sparse_mla"])
    assert problems and "valid: flashmla_sparse" in problems[0].message


def test_dsa_attention_value_spelling(v059: snapshots.Snapshot, v0523: snapshots.Snapshot) -> None:
    assert v059.spell_value("attention_backend", "dsa") == "nsa"
    assert v0523.spell_value("attention_backend", "dsa") == "dsa"
    assert "cutlass_mla" in (v059.valid_values("attention_backend") or ())
    assert "cutlass_mla" not in (v0523.valid_values("attention_backend") or ())


def test_kv_cache_dtype_choices(v059: snapshots.Snapshot, v0523: snapshots.Snapshot) -> None:
    assert {"auto", "fp8_e4m3", "bf16", "bfloat16"} <= set(v059.valid_values("kv_cache_dtype") or ())
    assert {"mxfp8", "nvfp4"} <= set(v0523.valid_values("kv_cache_dtype") or ())
    assert "fp4_e2m1" not in (v0523.valid_values("kv_cache_dtype") or ())


def test_fp4_gemm_flag_and_default(v059: snapshots.Snapshot, v0523: snapshots.Snapshot) -> None:
    old, new = v059.flag_for("fp4_gemm_backend"), v0523.flag_for("fp4_gemm_backend")
    assert old is not None and new is not None
    assert old.dest == new.dest == "fp4_gemm_runner_backend"
    assert old.default == "flashinfer_cutlass" and new.default == "auto"
    assert "marlin" in (new.choices or ())


def test_snapshot_flags_sorted_and_unique(v059: snapshots.Snapshot, v0523: snapshots.Snapshot) -> None:
    for snap in (v059, v0523):
        firsts = [flag.option_strings[0] for flag in snap.flags]
        assert firsts == sorted(firsts)
        options = [o for flag in snap.flags for o in flag.option_strings]
        assert len(options) == len(set(options))
