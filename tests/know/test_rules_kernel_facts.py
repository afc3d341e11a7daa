"""The committed kernel facts (images/<variant>/kernel-archs.json): form, agreement with the pins, verdicts that
follow from the recorded SASS/PTX targets, the generator on a synthetic inventory, and the wheel lookup.

Regenerating them from the real wheels downloads about 1.2 GB, so it is opt-in:
``BWSTACK_REGEN_KERNEL_FACTS=1 pytest -m wheels tests/know/test_rules_kernel_facts.py``.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from bwstack.build.lock import kernel_facts
from bwstack.know import inventory as sources
from bwstack.know import rules
from bwstack.know.fatbin import CodeTarget, FileScan
from bwstack.stack import pins
from support.stack import ROOT

IMAGES = ROOT / "images"
VARIANTS = ("v0.5.23-cu130", "v0.5.9-cu130")


@pytest.mark.parametrize("variant", VARIANTS)
def test_committed_facts_are_well_formed_and_match_the_pins(variant: str) -> None:
    assert kernel_facts.check_kernel_facts(IMAGES, variant) == []


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_audited_sglang_wheel_is_the_one_the_parser_snapshot_came_from(variant: str) -> None:
    facts = rules.load_kernel_facts(IMAGES / variant)
    snapshot = json.loads((IMAGES / variant / "sglang-args.json").read_text(encoding="utf-8"))
    assert facts is not None
    sglang = next(w for w in facts.doc["wheels"] if w["package"] == "sglang")
    assert sglang["sha256"] == snapshot["provenance"]["sha256"]


def test_facts_record_the_known_sm120_gaps() -> None:
    new = rules.load_kernel_facts(IMAGES / "v0.5.23-cu130")
    old = rules.load_kernel_facts(IMAGES / "v0.5.9-cu130")
    assert new is not None and old is not None
    assert new.verdict("sgl_kernel.common_ops", "sm120") == "native"  # sm_120a cubin (sm120-backends.md §8)
    assert new.verdict("flash_mla", "sm120") == "missing" and new.verdict("flash_mla", "sm100") == "native"
    assert new.verdict("deep_gemm.mqa_logits", "sm120") == "jit"  # sgl-deep-gemm 0.2.3.post2: SM120 sources
    assert old.verdict("deep_gemm.mqa_logits", "sm120") == "missing"  # sgl-kernel 0.3.21's bundled DeepGEMM
    assert new.verdict("flashinfer.sparse_mla_sm120", "sm120") == "jit"
    assert old.verdict("flashinfer.sparse_mla_sm120", "sm120") == "missing"
    assert new.verdict("flashinfer.trtllm_gen_fmha", "sm100") is None  # cubins downloaded at run time
    assert old.verdict("flashinfer.trtllm_gen_fmha", "sm100") == "native"  # flashinfer-cubin 0.6.3
    assert old.verdict("flash_mla", "sm90") == "absent"  # 0.5.9 has FlashMLA in sgl-kernel only
    assert new.verdict("torch", "sm120") is None


def _copy_images(tmp_path: Path) -> Path:
    images = tmp_path / "images"
    shutil.copytree(IMAGES, images, ignore=shutil.ignore_patterns("__pycache__"))
    return images


def test_a_verdict_that_does_not_follow_from_the_targets_is_drift(tmp_path: Path) -> None:
    images = _copy_images(tmp_path)
    path = images / "v0.5.23-cu130" / rules.KERNEL_FACTS_FILE
    doc = json.loads(path.read_text(encoding="utf-8"))
    doc["libraries"]["flash_mla"]["verdicts"]["sm120"] = "native"
    path.write_text(json.dumps(doc), encoding="utf-8")
    problems = kernel_facts.check_kernel_facts(images, "v0.5.23-cu130")
    assert len(problems) == 1 and "flash_mla: verdicts for sm120 do not follow" in problems[0]


def test_a_pin_change_makes_the_facts_stale(tmp_path: Path) -> None:
    images = _copy_images(tmp_path)
    pins_path = images / "v0.5.23-cu130" / pins.PINS_FILE
    text = pins_path.read_text(encoding="utf-8")
    pins_path.write_text(
        text.replace('flashinfer-python = "0.7.2"', 'flashinfer-python = "0.7.3"'), encoding="utf-8"
    )
    problems = kernel_facts.check_kernel_facts(images, "v0.5.23-cu130")
    assert any("do not match the variant's pins" in p and "0.7.3" in p for p in problems)


def test_missing_facts_are_reported(tmp_path: Path) -> None:
    images = _copy_images(tmp_path)
    (images / "v0.5.9-cu130" / rules.KERNEL_FACTS_FILE).unlink()
    assert kernel_facts.check_kernel_facts(images, "v0.5.9-cu130") == [
        f"{images / 'v0.5.9-cu130' / rules.KERNEL_FACTS_FILE}: missing"
    ]


def test_source_built_packages_are_not_audited_from_wheels() -> None:
    variant = pins.load_variant(IMAGES, "nightly-cu13-20260705-754524d8")
    wanted, skipped = kernel_facts.kernel_packages(variant, None)
    assert ("flashinfer-cubin", "0.6.13") in wanted
    assert {"flashinfer-python", "sgl-deep-gemm"} <= set(skipped)
    assert all(p not in dict(wanted) for p in skipped)


def test_generator_on_a_synthetic_inventory() -> None:
    variant = pins.load_variant(IMAGES, "v0.5.23-cu130")
    inv = sources.Inventory("wheels", "synthetic", "python")
    inv.files = [
        FileScan(
            "sgl_kernel/sm100/common_ops.abi3.so",
            (CodeTarget("sass", 90, "a"), CodeTarget("sass", 120, "a")),
            2,
        ),
        FileScan("flash_mla/cuda.abi3.so", (CodeTarget("sass", 100, "a"),), 1),
    ]
    inv.paths = {
        "sgl_kernel/sm100/common_ops.abi3.so",
        "flash_mla/cuda.abi3.so",
        "flashinfer/__init__.py",
        "flashinfer/data/csrc/sparse_mla_sm120/kernel.cu",
    }
    wheels = [
        {"package": "sglang-kernel", "version": "0.4.10", "file": "x.whl", "sha256": "0" * 64},
        {"package": "sgl-flash-mla", "version": "1.0.0", "file": "y.whl", "sha256": "1" * 64},
        {"package": "flashinfer-python", "version": "0.7.2", "file": "z.whl", "sha256": "2" * 64},
    ]
    doc = kernel_facts._facts_document(variant, None, inv, wheels, {})
    libs = doc["libraries"]
    assert libs["sgl_kernel.common_ops"]["verdicts"] == {
        "sm90": "native",
        "sm100": "missing",
        "sm103": "missing",
        "sm120": "native",
        "sm121": "missing",
    }
    assert (
        libs["flash_mla"]["verdicts"]["sm100"] == "native"
        and libs["flash_mla"]["verdicts"]["sm103"] == "missing"
    )
    assert libs["flashinfer.sparse_mla_sm120"]["verdicts"]["sm120"] == "jit"
    assert (
        libs["flashinfer.attention"]["verdicts"]["sm120"] == "missing"
    )  # no batch_prefill.cu in this inventory
    assert doc["absent"]["sgl_kernel.flashmla_ops"] == "not in sglang-kernel 0.4.10"
    assert "flashinfer.trtllm_gen_fmha" in doc["not_audited"] and "torch" in doc["not_audited"]
    assert kernel_facts._check_libraries(doc) == []


def test_find_wheel_picks_the_linux_x86_wheel_of_the_exact_version(tmp_path: Path) -> None:
    for name in (
        "sgl_kernel-0.3.21-cp310-abi3-manylinux2014_aarch64.whl",
        "sgl_kernel-0.3.20-cp310-abi3-manylinux2014_x86_64.whl",
        "sgl_kernel-0.3.21-cp310-abi3-manylinux2014_x86_64.whl",
        "not-a-wheel.whl",
    ):
        (tmp_path / name).write_bytes(b"")
    found = kernel_facts.find_wheel(tmp_path, "sgl-kernel", "0.3.21")
    assert found is not None and found.name == "sgl_kernel-0.3.21-cp310-abi3-manylinux2014_x86_64.whl"
    assert kernel_facts.find_wheel(tmp_path, "sgl_kernel", "0.3.19") is None
    assert kernel_facts.find_wheel(tmp_path / "none", "sgl-kernel", "0.3.21") is None


@pytest.mark.wheels
@pytest.mark.slow
@pytest.mark.skipif(
    not os.environ.get("BWSTACK_REGEN_KERNEL_FACTS"), reason="set BWSTACK_REGEN_KERNEL_FACTS=1"
)
@pytest.mark.parametrize("variant", VARIANTS)
def test_committed_facts_match_a_fresh_audit_of_the_wheels(variant: str) -> None:
    fresh = kernel_facts.generate_kernel_facts(IMAGES, variant)
    committed = rules.load_kernel_facts(IMAGES / variant)
    assert committed is not None and dict(committed.doc) == fresh
