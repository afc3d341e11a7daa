"""Predicted verdicts for the shipped profiles (sm120, and a few on sm100/sm90), the explain-sourced path,
``check_stack`` for ``bwstack validate``, and ``bwstack list --arch sm120`` end to end.

Every test runs with an empty ``$BWSTACK_CACHE`` so that no cached ``bwstack explain`` result of this machine
changes the answer: the predictions below come from the static fallback plus the committed kernel facts.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from bwstack.cli import main
from bwstack.know import explain, rules
from bwstack.stack import loader, schema
from support.stack import ROOT

pytestmark = pytest.mark.usefixtures("scratch_cache")  # an empty $BWSTACK_CACHE per test

PROFILES = ROOT / "profiles.yaml"

SM120 = {
    "dsa-fi-sparse-fp8": ("healthy", None),
    "dense-fi-bf16": ("healthy", None),
    "dense-triton-bf16": ("healthy", None),
    "modelcard-fi-auto": ("nan", "flashinfer-attention-packed-fp8-dsa-kv"),
    "dense-triton-auto": ("assertion", "triton-attention-packed-fp8-dsa-kv"),
    "dsa-trtllm-fp8": ("unsupported_arch", "glm-sm12x-fp8-dsa-needs-flashinfer-sparse-mla-or-triton-prefill"),
    "dsa-flashmla-fp8": (
        "unsupported_arch",
        "glm-sm12x-fp8-dsa-needs-flashinfer-sparse-mla-or-triton-prefill",
    ),
    "legacy-dense-fi-bf16": ("healthy", None),
    "legacy-nsa-default-fp8": ("unsupported_arch", "dsa-indexer-deepgemm-no-kernel"),
}


def test_the_table_covers_every_shipped_profile(repo_stack: schema.Stack) -> None:
    assert set(SM120) == set(repo_stack.profiles)


@pytest.mark.parametrize("name", sorted(SM120))
def test_shipped_profiles_on_sm120_match_their_expect(repo_stack: schema.Stack, name: str) -> None:
    pred = rules.predict(repo_stack, name, "sm120")
    verdict, rule = SM120[name]
    assert (pred.verdict, pred.decision.rule) == (verdict, rule)
    assert pred.verdict == repo_stack.profile(name).expect and pred.agrees is True
    doc = pred.to_json()
    assert doc["reason"] and doc["evidence"] and doc["source"] in ("rule", "audit")
    assert doc["config_source"] == "static"
    assert any("no cached 'bwstack explain" in note for note in doc["notes"])
    assert json.loads(json.dumps(doc)) == doc


def test_auto_kv_resolves_to_fp8_on_blackwell_and_bf16_on_hopper(repo_stack: schema.Stack) -> None:
    assert rules.predict(repo_stack, "modelcard-fi-auto", "sm120").effective["kv_cache_dtype"] == "fp8_e4m3"
    hopper = rules.predict(repo_stack, "modelcard-fi-auto", "sm90")
    assert hopper.effective["kv_cache_dtype"] == "bfloat16" and hopper.verdict == "healthy"


@pytest.mark.parametrize(
    ("name", "arch", "verdict", "rule"),
    [
        ("dsa-trtllm-fp8", "sm100", "healthy", None),
        ("dsa-trtllm-fp8", "sm90", "unsupported_arch", "trtllm-dsa-needs-sm100"),
        ("dsa-fi-sparse-fp8", "sm100", "unsupported_arch", "flashinfer-sparse-mla-glm-sm12x-fp8-only"),
        ("dsa-fi-sparse-fp8", "sm90", "unsupported_arch", "flashinfer-sparse-mla-glm-sm12x-fp8-only"),
        ("dsa-flashmla-fp8", "sm100", "healthy", None),
        ("dsa-flashmla-fp8", "sm90", "healthy", None),
        (
            "dense-triton-auto",
            "sm100",
            "healthy",
            None,
        ),  # SM100 FP8 defaults to trtllm: raw layout, no assert
        ("legacy-nsa-default-fp8", "sm100", "healthy", None),
        ("dense-fi-bf16", "sm100", "healthy", None),
    ],
)
def test_other_arches(repo_stack: schema.Stack, name: str, arch: str, verdict: str, rule: str | None) -> None:
    pred = rules.predict(repo_stack, name, arch)
    assert (pred.verdict, pred.decision.rule) == (verdict, rule), pred.decision.reason
    assert pred.agrees is None  # the profiles' expectations are for sm120


def test_nvfp4_gemm_on_hopper_is_a_kernel_gap_found_by_the_audit(repo_stack: schema.Stack) -> None:
    pred = rules.predict(repo_stack, "dense-fi-bf16", "sm90")
    assert (pred.verdict, pred.decision.source) == ("unsupported_arch", "audit")
    assert "fp4_gemm_backend=flashinfer_cutlass" in pred.decision.reason
    assert any("kernel-archs.json" in e for e in pred.decision.evidence)


def test_flashmla_without_a_kernel_is_reported_by_the_kernel_facts(repo_stack: schema.Stack) -> None:
    pred = rules.predict(repo_stack, "legacy-nsa-default-fp8", "sm120")
    uses = {(k.field, k.value): k for k in pred.kernels}
    assert uses[("dsa_decode_backend", "flashmla_kv")].status == "missing"
    assert uses[("attention_backend", "dsa")].missing == ("deep_gemm.mqa_logits",)
    assert uses[("common", "sgl_kernel")].status == "ok"


def test_variant_env_switches_off_the_deepgemm_nan_rule(repo_stack: schema.Stack) -> None:
    pred = rules.predict(repo_stack, "legacy-dense-fi-bf16", "sm120")
    assert pred.verdict == "healthy"
    inputs = rules.profile_inputs(repo_stack, "legacy-dense-fi-bf16")
    assert inputs.env["SGLANG_ENABLE_JIT_DEEPGEMM"] == "0"
    assert inputs.packages["transformers"] == "5.2.0"  # the override, not sglang 0.5.9's own 4.57.1


def test_without_kernel_facts_the_prediction_says_so(stack_copy: Path) -> None:
    (stack_copy.parent / "images" / "v0.5.9-cu130" / rules.KERNEL_FACTS_FILE).unlink()
    stack = loader.load_stack(stack_copy)
    pred = rules.predict(stack, "legacy-nsa-default-fp8", "sm120")
    assert pred.verdict == "healthy" and pred.agrees is False
    assert any("no kernel-archs.json for variant v0.5.9-cu130" in n for n in pred.notes)
    assert pred.why_differs is not None and "expects unsupported_arch" in pred.why_differs


# --- the explain-sourced path ----------------------------------------------------------------------------------


def _resolution(resolved: dict[str, Any], startup_error: explain.Problem | None = None) -> explain.Resolution:
    return explain.Resolution(
        sglang_version="0.5.23",
        arch="sm120",
        model_arch="GlmMoeDsaForCausalLM",
        requested={},
        resolved=resolved,
        log=(),
        error=None,
        startup_error=startup_error,
        argv=(),
        api="hooks",
    )


def test_a_cached_explain_error_decides_and_borrows_the_matching_rules_evidence(
    repo_stack: schema.Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    problem = explain.Problem(
        "DeepseekSparseAttnBackend.__init__",
        "ValueError",
        "GLM DSA with FP8 KV cache on NVIDIA SM120/SM121 supports only flashinfer_sparse_mla (default) or "
        "triton_sparse_mla (prefill), but got ['trtllm'].",
    )
    resolved = {
        "attention_backend": "dsa",
        "kv_cache_dtype": "fp8_e4m3",
        "dsa_prefill_backend": "trtllm",
        "dsa_decode_backend": "trtllm",
        "moe_runner_backend": "flashinfer_cutlass",
    }
    seen: dict[str, Any] = {}

    def cached(version: str, arch: str, config: Any, requested: Any, **kw: Any) -> explain.Resolution:
        seen.update(version=version, arch=arch, requested=dict(requested), **kw)
        return _resolution(resolved, problem)

    monkeypatch.setattr(explain, "resolve_cached", cached)
    pred = rules.predict(repo_stack, "dsa-trtllm-fp8", "sm120")
    assert (pred.verdict, pred.decision.source, pred.config_source) == (
        "unsupported_arch",
        "explain",
        "explain",
    )
    assert pred.decision.rule == "glm-sm12x-fp8-dsa-needs-flashinfer-sparse-mla-or-triton-prefill"
    assert pred.decision.evidence[0].startswith("sglang 0.5.23's own code")
    assert "supports only flashinfer_sparse_mla" in pred.decision.reason
    assert seen["version"] == "0.5.23" and seen["compute"] is False
    assert seen["extra_argv"][:4] == ("--tp-size", "8", "--quantization", "modelopt_fp4")
    assert seen["requested"]["dsa_decode_backend"] == "trtllm"


def test_a_cached_resolution_replaces_the_static_fallback(
    repo_stack: schema.Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    # SGLang's own answer wins: here it (hypothetically) kept the KV cache in bf16, so no rule fires
    resolved = {
        "attention_backend": "triton",
        "kv_cache_dtype": "bfloat16",
        "dsa_prefill_backend": "flashmla_sparse",
        "dsa_decode_backend": "trtllm",
        "moe_runner_backend": "flashinfer_cutlass",
    }
    monkeypatch.setattr(explain, "resolve_cached", lambda *a, **k: _resolution(resolved))
    pred = rules.predict(repo_stack, "dense-triton-auto", "sm120")
    assert pred.config_source == "explain" and pred.verdict == "healthy"
    assert pred.effective["dsa_kv_layout"] == "bf16"
    assert pred.agrees is False and pred.why_differs is not None


def test_explain_mode_off_never_reads_the_cache(
    repo_stack: schema.Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fail(*a: Any, **k: Any) -> None:
        raise AssertionError("resolve_cached called")

    monkeypatch.setattr(explain, "resolve_cached", fail)
    assert rules.predict(repo_stack, "dense-fi-bf16", "sm120", explain_mode="off").verdict == "healthy"


# --- validate / list -------------------------------------------------------------------------------------------


def test_check_stack_is_quiet_for_the_shipped_profiles(repo_stack: schema.Stack) -> None:
    assert rules.check_stack(repo_stack) == []


def _set_expect(path: Path, profile: str, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    head, sep, tail = text.partition(f"  {profile}:\n")
    assert sep and f"expect: {old}" in tail
    path.write_text(head + sep + tail.replace(f"expect: {old}", f"expect: {new}", 1), encoding="utf-8")


def test_check_stack_warns_with_file_and_line_when_expect_and_prediction_disagree(stack_copy: Path) -> None:
    _set_expect(stack_copy, "dense-triton-auto", "assertion", "healthy")
    stack = loader.load_stack(stack_copy)
    warnings = rules.check_stack(stack)
    assert len(warnings) == 1
    line = stack.line_of("profiles", "dense-triton-auto", "expect")
    assert warnings[0].startswith(f"{stack_copy}:{line}: profile dense-triton-auto: expect: healthy")
    assert "predicts assertion on sm120 (rule triton-attention-packed-fp8-dsa-kv)" in warnings[0]


def _list(args: list[str]) -> Any:
    return CliRunner().invoke(main, ["list", *args], env={"COLUMNS": "250"}, catch_exceptions=False)


def test_list_arch_sm120_shows_a_verdict_and_reason_for_every_profile() -> None:
    result = _list(["-f", str(PROFILES), "--arch", "sm120"])
    assert result.exit_code == 0, result.output
    assert "on sm120" in result.output
    assert "differs from expect" not in result.output
    for name, (verdict, _) in SM120.items():
        row = next(line for line in result.output.splitlines() if line.startswith(f"{name} "))
        assert row.split()[1] == verdict, row
    wide = _list(["-f", str(PROFILES), "--arch", "sm120", "--wide"])
    assert wide.exit_code == 0, wide.output
    assert wide.output.count("prediction:") == len(SM120)
    for name, (verdict, _) in SM120.items():
        assert f"{name}  [expect {verdict}, predicted on sm120: {verdict}]" in wide.output


@pytest.mark.parametrize("columns", [80, 60])
def test_list_piped_at_narrow_width_keeps_every_name_whole(columns: int) -> None:
    """``bwstack list --arch sm120 | cat`` in an 80-column terminal: one line per profile, none too long."""
    result = subprocess.run(
        f"{shlex.quote(sys.executable)} -m bwstack.cli list -f {shlex.quote(str(PROFILES))} --arch sm120 | cat",
        shell=True,
        capture_output=True,
        text=True,
        env=dict(os.environ, COLUMNS=str(columns)),
        timeout=120,
        check=True,
    )
    lines = result.stdout.splitlines()
    assert lines and max(len(line) for line in lines) <= columns, result.stdout
    for name, (verdict, _) in SM120.items():
        rows = [line for line in lines if line.split()[:1] == [name]]
        assert len(rows) == 1, (name, result.stdout)
        assert rows[0].split()[1] == verdict


def test_list_arch_json_carries_the_prediction_contract() -> None:
    result = _list(["-f", str(PROFILES), "--arch", "sm120", "--json"])
    assert result.exit_code == 0, result.output
    rows = {row["profile"]: row["prediction"] for row in json.loads(result.stdout)["profiles"]}
    assert set(rows) == set(SM120)
    for name, pred in rows.items():
        assert pred["verdict"] == SM120[name][0] and pred["reason"] and pred["evidence"]
        assert pred["source"] in ("rule", "explain", "audit") and pred["agrees"] is True


def test_list_marks_a_disagreement_and_says_why(stack_copy: Path) -> None:
    _set_expect(stack_copy, "modelcard-fi-auto", "nan", "healthy")
    result = _list(["-f", str(stack_copy), "--arch", "sm120"])
    assert result.exit_code == 0, result.output
    assert "differs from expect healthy" in result.output
    row = next(line for line in result.output.splitlines() if line.startswith("modelcard-fi-auto "))
    assert row.split()[1] == "nan!", row
    doc = json.loads(_list(["-f", str(stack_copy), "--arch", "sm120", "--json"]).stdout)
    pred = next(r["prediction"] for r in doc["profiles"] if r["profile"] == "modelcard-fi-auto")
    assert pred["agrees"] is False
    assert "rule flashinfer-attention-packed-fp8-dsa-kv predicts nan" in pred["why_differs"]


def test_the_nightlys_flashinfer_warns_of_the_sm120_sparse_mla_livelock(tmp_path: Path) -> None:
    """A warning rule: the verdict stays the rules' one, the warning rides beside it (validate prints it)."""
    from ruamel.yaml import YAML

    from support.stack import copy_stack

    copy_stack(tmp_path)
    path = tmp_path / "profiles.yaml"
    yaml = YAML()
    data = yaml.load(path.read_text(encoding="utf-8"))
    data["profiles"]["dense-fi-bf16"]["variant"] = "nightly-cu13-20260705-754524d8"
    with path.open("w", encoding="utf-8") as fh:
        yaml.dump(data, fh)
    stack = loader.load_stack(path)
    warned = [n for n in rules.predict(stack, "dense-fi-bf16", "sm120").notes if n.startswith("warning (")]
    assert len(warned) == 1 and "flashinfer-sm120-sparse-mla-livelock" in warned[0]
    assert any("flashinfer-sm120-sparse-mla-livelock" in w for w in rules.check_stack(stack))
    shipped = rules.predict(loader.load_stack(PROFILES), "dense-fi-bf16", "sm120")  # FlashInfer 0.7.2
    assert not [n for n in shipped.notes if n.startswith("warning (")]


def test_validate_predicts_no_gpu_verdict_for_the_shipped_cpu_profiles() -> None:
    """The CPU stack runs no GPU kernel: validate says nothing of sm120 for its profiles (it warned that
    cpu-flashinfer's import_error and cpu-long-window's garbage contradict a 'healthy on sm120'), while the
    GPU stack's profiles still get their predictions."""
    from support.stack import run_cli

    cpu = run_cli(ROOT, "-f", "profiles.cpu.yaml", "validate")
    assert cpu.returncode == 0, cpu.stderr
    assert "predicts" not in cpu.stderr, cpu.stderr
    cpu_stack = loader.load_stack(ROOT / "profiles.cpu.yaml")
    assert all(cpu_stack.device_for(name) == "cpu" for name in cpu_stack.profiles)
    assert rules.check_stack(cpu_stack) == []
