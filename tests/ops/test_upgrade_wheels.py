"""``bwstack variant new`` and ``bwstack upgrade`` through the real sglang wheels from the package index.

Every expected fact below was read in the wheel itself (file and line given with it), not taken from bwstack's
output: the shipped profiles from 0.5.9 to 0.5.23 (the committed parser snapshots of both variants, each
version's own resolution in its CPU venv), and the ``dense-triton-auto`` flip between 0.5.16 and 0.5.17, made
from those two releases' wheels (bare versions, then ``variant new`` + ``upgrade`` on the command line).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from bwstack.ops import upgrade
from bwstack.stack import schema
from support.stack import ROOT, edit_yaml

pytestmark = [pytest.mark.wheels, pytest.mark.slow]

CLI = [sys.executable, "-m", "bwstack.cli"]


@pytest.fixture(scope="module")
def report_059_0523(module_stack: schema.Stack) -> upgrade.Report:
    return upgrade.compare(module_stack, "v0.5.9-cu130", "v0.5.23-cu130", archs=["sm120"])


def _profile(report: upgrade.Report, name: str) -> upgrade.ProfileUpgrade:
    return next(p for p in report.profiles if p.profile == name)


def _findings(prof: upgrade.ProfileUpgrade, kind: str) -> dict[str, upgrade.Finding]:
    return {f.old: f for f in prof.flags if f.kind == kind}


def test_059_to_0523_every_shipped_profile_is_reported(
    report_059_0523: upgrade.Report, module_stack: schema.Stack
) -> None:
    assert [p.profile for p in report_059_0523.profiles] == list(module_stack.profiles)
    assert all(len(p.archs) == 1 and p.archs[0].arch == "sm120" for p in report_059_0523.profiles)
    assert all(a.old.config_source == a.new.config_source == "explain" for p in report_059_0523.profiles
               for a in p.archs)  # fmt: skip


def test_059_to_0523_cuda_graph_max_bs_is_gone(report_059_0523: upgrade.Report) -> None:
    # 0.5.9 wheel sglang/srt/server_args.py:4477-4482 declares --cuda-graph-max-bs; the 0.5.23 wheel declares
    # only cuda_graph_max_bs_decode / cuda_graph_max_bs_prefill (sglang/srt/arg_groups/fields/exec_.py:629-634),
    # and its parser (sglang/srt/server_args.py:679, argparse with prefix matching) finds the old name ambiguous
    prof = _profile(report_059_0523, "legacy-dense-fi-bf16")
    removed = _findings(prof, "removed")["--cuda-graph-max-bs"]
    assert removed.new is None and not removed.rewrite
    assert "--cuda-graph-max-bs-decode" in removed.detail and "--cuda-graph-max-bs-prefill" in removed.detail
    arch = prof.archs[0]
    assert (arch.old.verdict, arch.kind) == ("healthy", "regression")
    assert "ambiguous option: --cuda-graph-max-bs" in arch.new.decision.reason


def test_059_to_0523_dsa_spellings(report_059_0523: upgrade.Report) -> None:
    # 0.5.9 wheel server_args.py:3871-3884 (--nsa-prefill-backend, --nsa-decode-backend) and :127 ("nsa" among
    # ATTENTION_BACKEND_CHOICES); 0.5.23 wheel arg_groups/fields/exec_.py:341 (dsa_decode_backend -> the flag
    # --dsa-decode-backend) and arg_groups/choices.py:74 ("dsa")
    prof = _profile(report_059_0523, "dsa-trtllm-fp8")
    renamed = _findings(prof, "renamed")
    assert renamed["--nsa-decode-backend"].new == "--dsa-decode-backend"
    assert renamed["--nsa-prefill-backend"].new == "--dsa-prefill-backend"
    assert _findings(prof, "spelling")["--attention-backend nsa"].new == "--attention-backend dsa"


def test_059_to_0523_fp4_gemm_default(report_059_0523: upgrade.Report) -> None:
    # 0.5.9 wheel server_args.py:456 fp4_gemm_runner_backend: str = "flashinfer_cutlass"; 0.5.23 wheel
    # arg_groups/fields/exec_.py:282-291 (--fp4-gemm-backend ... = "auto")
    prof = _profile(report_059_0523, "dense-triton-auto")
    changed = _findings(prof, "default_changed")["flashinfer_cutlass"]
    assert (changed.where, changed.new) == ("profiles.dense-triton-auto.fp4_gemm_backend", "auto")


def test_059_to_0523_flashinfer_sparse_mla_arrives(report_059_0523: upgrade.Report) -> None:
    # 0.5.9 wheel server_args.py:162-170: NSA_CHOICES has no flashinfer_sparse_mla, so 0.5.9's parser refuses the
    # profile; 0.5.23 wheel arg_groups/fields/exec_.py:341-350 lists it among --dsa-decode-backend's choices
    arch = _profile(report_059_0523, "dsa-fi-sparse-fp8").archs[0]
    assert arch.old.verdict != "healthy" and "flashinfer_sparse_mla" in arch.old.decision.reason
    assert (arch.new.verdict, arch.kind) == ("healthy", "improvement")
    assert report_059_0523.regressions >= 1


@pytest.fixture(scope="module")
def report_0516_0517(module_stack: schema.Stack) -> upgrade.Report:
    return upgrade.compare(
        module_stack, "0.5.16", "0.5.17", profiles=["dense-triton-auto", "dense-triton-bf16"]
    )


def test_dense_triton_auto_flips_between_0516_and_0517(report_0516_0517: upgrade.Report) -> None:
    # 0.5.16 wheel sglang/srt/arg_groups/overrides.py:1293-1299: FP8 KV on major >= 10 -> trtllm for both DSA
    # sides; 0.5.17 wheel overrides.py:1600-1612: GLM (GlmMoeDsaForCausalLM) + FP8 KV on major 12 ->
    # flashinfer_sparse_mla for both. trtllm keeps the KV raw FP8, any other DSA backend packs it, and the Triton
    # backend's set_kv_buffer asserts on the packed layout (the rule's wheel citations, data/rules.yaml)
    assert (report_0516_0517.old.made_from, report_0516_0517.new.made_from) == ("v0.5.23-cu130",) * 2
    auto, bf16 = (p.archs[0] for p in report_0516_0517.profiles)
    assert auto.effective_changes["dsa_prefill_backend"] == ("trtllm", "flashinfer_sparse_mla")
    assert auto.effective_changes["dsa_decode_backend"] == ("trtllm", "flashinfer_sparse_mla")
    assert auto.effective_changes["dsa_kv_layout"] == ("raw_fp8", "packed_fp8")
    assert (auto.old.verdict, auto.new.verdict, auto.kind) == ("healthy", "assertion", "regression")
    assert auto.rules_started == ["triton-attention-packed-fp8-dsa-kv"]
    assert auto.new.effective["kv_cache_dtype"] == auto.old.effective["kv_cache_dtype"] == "fp8_e4m3"
    assert bf16.kind is None and bf16.new.verdict == "healthy"  # a BF16 KV cache is never packed


def test_variant_new_and_upgrade_on_the_command_line(stack_copy: Path) -> None:
    root = stack_copy.parent
    made = subprocess.run([*CLI, "-f", str(stack_copy), "variant", "new", "v0.5.17-cu130", "--sglang", "0.5.17",
                           "--from", "v0.5.23-cu130"], capture_output=True, text=True, timeout=900, cwd=root)  # fmt: skip
    assert made.returncode == 0, made.stderr
    # the 0.5.17 wheel's METADATA (sglang-0.5.17.dist-info): Requires-Dist torch==2.11.0, transformers==5.12.1,
    # flashinfer_python[cu13]==0.6.15.post1, sglang-kernel==0.4.5, sgl-deep-gemm==0.1.5.post1
    pins = tomllib.loads((root / "images" / "v0.5.17-cu130" / "pins.toml").read_text(encoding="utf-8"))
    # flashinfer-cubin is no requirement of the wheel: the first-contact policy pins it equal to flashinfer-python
    assert {k: v for k, v in pins["python"].items() if k != "reasons"} == {"torch": "2.11.0", "transformers": "5.12.1", "flashinfer-python": "0.6.15.post1",
                              "flashinfer-cubin": "0.6.15.post1", "sglang-kernel": "0.4.5", "sgl-deep-gemm": "0.1.5.post1"}  # fmt: skip
    assert list(pins["python"]["reasons"]) == ["flashinfer-cubin"]
    assert pins["base"]["image"] == "lmsysorg/sglang:v0.5.17-cu130" and pins["sglang"]["version"] == "0.5.17"
    assert "python.torch: 2.14.1 -> 2.11.0" in made.stdout
    snapshot = json.loads(
        (root / "images" / "v0.5.17-cu130" / "sglang-args.json").read_text(encoding="utf-8")
    )
    assert snapshot["sglang_version"] == "0.5.17" and snapshot["provenance"]["method"] == "wheel"
    versions = json.loads((root / "images" / "v0.5.17-cu130" / "versions.json").read_text(encoding="utf-8"))
    assert versions["build_args"]["SGLANG_VERSION"] == "0.5.17"

    done = subprocess.run([*CLI, "-f", str(stack_copy), "upgrade", "0.5.16", "v0.5.17-cu130", "dense-triton-auto",
                           "--json"], capture_output=True, text=True, timeout=900, cwd=root)  # fmt: skip
    assert done.returncode == 1, done.stderr
    result = json.loads(done.stdout)
    assert result["regressions"] == 1 and result["profiles"][0]["change"] == "regression"

    missing = subprocess.run([*CLI, "-f", str(stack_copy), "variant", "new", "x", "--sglang", "0.5.99"],
                             capture_output=True, text=True, timeout=300, cwd=root)  # fmt: skip
    assert missing.returncode == 2
    lines = missing.stderr.strip().splitlines()
    assert len(lines) == 1
    assert re.fullmatch(
        r"bwstack: --sglang: sglang 0\.5\.99 is not on the package index \(newest there: [\w.]+\)", lines[0]
    )


def _upgrade(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, "-f", str(ROOT / "profiles.yaml"), "upgrade", *args],
                          capture_output=True, text=True, timeout=900, cwd=ROOT)  # fmt: skip


def test_upgrade_to_0518_names_the_sparse_mla_livelock_risk() -> None:
    """The real command: 0.5.18 pins flashinfer_python[cu13]==0.6.17 (its METADATA), whose sparse_mla_sm120
    kernels have no ``bar_sync_alt`` (flashinfer PR #4732 ships in 0.6.18); 0.5.19 pins 0.6.18."""
    done = _upgrade("v0.5.9-cu130", "0.5.18", "dsa-fi-sparse-fp8")
    assert done.returncode == 0, done.stderr
    section = done.stdout.split("## dsa-fi-sparse-fp8", 1)[1]
    risk = [line for line in section.splitlines() if line.startswith("  - risk that starts: ")]
    assert len(risk) == 1 and "(flashinfer-sm120-sparse-mla-livelock)" in risk[0], section
    assert "PR #4732" in risk[0] and "livelock" in risk[0]
    later = _upgrade("0.5.18", "0.5.19", "dsa-fi-sparse-fp8")
    assert later.returncode == 0, later.stderr
    assert "  - risk that stops: warning (flashinfer-sm120-sparse-mla-livelock)" in later.stdout
    assert "risk that starts" not in later.stdout


def test_upgrade_to_0518_names_the_sm100_nvfp4_moe_nan(stack_copy: Path) -> None:
    """0.5.18's FlashInfer 0.6.17 has the TRTLLM-gen NVFP4 MoE tile-192 NaN on SM100 (sglang#34629)."""

    def trtllm_moe(data: Any) -> None:
        data["profiles"]["dsa-trtllm-fp8"]["moe_runner_backend"] = "flashinfer_trtllm"

    edit_yaml(stack_copy, trtllm_moe)
    done = subprocess.run([*CLI, "-f", str(stack_copy), "upgrade", "0.5.17", "0.5.18", "dsa-trtllm-fp8", "--arch",
                           "sm100", "--json"], capture_output=True, text=True, timeout=900, cwd=stack_copy.parent)  # fmt: skip
    assert done.returncode == 0, done.stderr
    arch = json.loads(done.stdout)["profiles"][0]["archs"][0]
    assert [r.split(")")[0] for r in arch["risks_started"]] == [
        "warning (flashinfer-trtllm-nvfp4-moe-nan-sm100"
    ]
    assert "NaN detected! sampler: next_token_logits" in arch["risks_started"][0]


@pytest.mark.parametrize("version", ["0.5.17", "0.5.19", "0.5.20", "0.5.21", "0.5.22"])
def test_each_release_between_resolves_on_the_cpu(version: str) -> None:
    """Each release between the variants runs its own resolution (0.5.19's ServerArgs is a dataclass, 0.5.20's a
    msgspec Struct): with the profile's DSA sides unset, GLM + FP8 KV on SM12x becomes flashinfer_sparse_mla,
    read in each wheel's sglang/srt/arg_groups/overrides.py (``backend = "flashinfer_sparse_mla"``: 0.5.17 L1608,
    0.5.19 L700, 0.5.20 L733, 0.5.21 L637, 0.5.22 L642)."""
    done = _upgrade("0.5.18", version, "dense-triton-auto", "--json")
    assert done.returncode == 0, done.stderr
    arch = json.loads(done.stdout)["profiles"][0]["archs"][0]
    assert arch["new"]["config_source"] == "explain", arch["new"]  # not the static fallback
    assert arch["new"]["effective"]["dsa_decode_backend"] == "flashinfer_sparse_mla", arch["new"]


def test_cpu_profile_resolves_on_0_5_23(tmp_path: Path) -> None:
    """The CPU stack's torch_native profile through 0.5.23's own resolution: its attention hook rewrites the
    parsed cuda_graph_config for torch_native (sglang 0.5.23 srt/arg_groups/attention_hook.py, the
    ``attention_backend == "torch_native"`` branch), which SGLang's pipeline parses first
    (srt/arg_groups/pipeline.py: handle_cuda_graph_config -> cuda_graph_hook.parse_cuda_graph_config). The
    harness once skipped that parse and the prediction stopped on ``'NoneType' object has no attribute
    'decode'``."""
    from bwstack.stack import loader
    from support.stack import copy_stack

    copy_stack(tmp_path)
    stack = loader.load_stack(tmp_path / "profiles.cpu.yaml")
    report = upgrade.compare(stack, "v0.5.9-cpu", "v0.5.23-cpu", profiles=["cpu-torch-native"])
    (arch,) = _profile(report, "cpu-torch-native").archs
    # the stack's extra args are spelled for 0.5.23 (--cuda-graph-backend-decode): 0.5.9's parser refuses them
    assert "unrecognized arguments: --cuda-graph-backend-decode" in arch.old.decision.reason, arch.old
    assert arch.new.effective.get("attention_backend") == "torch_native", arch.new.effective
    assert arch.new.verdict == "healthy", arch.new
