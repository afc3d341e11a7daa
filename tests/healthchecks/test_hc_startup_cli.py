"""``bwstack classify-log`` reporting requested vs effective backends: --expect, --profile, --json, bad input."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from bwstack.cli import main
from support.stack import ROOT

CORPUS = Path(__file__).resolve().parent / "startup_corpus"
SEED = CORPUS / "rocm-v0.5.9_glm5-fp8_triton.log"


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["classify-log", *args])
    return result.exit_code, result.output


def test_text_output_names_version_backends_origins_and_the_seed_override() -> None:
    code, out = _run(str(SEED))
    assert code == 0, out
    lines = out.splitlines()
    assert "sglang 0.5.9 (line 3)" in lines
    assert "attention_backend: triton (flag, line 100)" in lines
    assert "dsa_decode_backend: flashmla_kv (set by SGLang, line 98, server_args line 100)" in lines
    assert (
        "backend_override: attention_backend=triton was requested, yet SGLang set dsa_decode_backend=flashmla_kv "
        "itself for the DSA sparse-attention layers (line 98)"
    ) in lines


def test_profile_mismatches_come_with_line_numbers() -> None:
    code, out = _run("-f", str(ROOT / "profiles.yaml"), "--profile", "dense-triton-auto", "--json", str(SEED))
    assert code == 0, out
    overrides = json.loads(out)["startup"]["overrides"]
    got = [(o["kind"], o["field"], o["requested"], o["effective"], o["line"]) for o in overrides]
    assert got == [
        ("mismatch", "moe_runner_backend", "flashinfer_cutlass", "auto", 100),
        ("dsa_auto", "dsa_prefill_backend", None, "flashmla_auto", 98),
        ("dsa_auto", "dsa_decode_backend", None, "flashmla_kv", 98),
    ]
    assert all(o["class"] == "backend_override" for o in overrides)
    assert overrides[0]["requested_by"] == "profile dense-triton-auto"


def test_expect_adds_to_and_overrides_the_profile() -> None:
    code, out = _run(
        "-f",
        str(ROOT / "profiles.yaml"),
        "--profile",
        "dense-triton-auto",
        "--expect",
        "moe_runner_backend=auto",
        "--expect",
        "nsa_decode_backend=trtllm",
        "--json",
        str(SEED),
    )
    assert code == 0, out
    overrides = json.loads(out)["startup"]["overrides"]
    assert [(o["field"], o["requested"], o["effective"], o["line"]) for o in overrides] == [
        ("dsa_decode_backend", "trtllm", "flashmla_kv", 98),
        ("dsa_prefill_backend", None, "flashmla_auto", 98),
    ]


def test_a_real_cpu_log_matches_its_own_request() -> None:
    code, out = _run(
        "--expect",
        "attention_backend=torch_native",
        "--expect",
        "kv_cache_dtype=bf16",
        str(CORPUS / "cpu-v0.5.23_tiny-llama.log"),
    )
    assert code == 0, out
    assert "backend_override" not in out
    assert "kv_cache_dtype: bfloat16 (flag, logged as bf16, line 14)" in out.splitlines()


def test_bad_expect_and_unknown_profile_are_exit_2_one_line() -> None:
    for args, message in (
        (["--expect", "attention_backend"], "expected KEY=VALUE"),
        (["--expect", "tp=8"], "unknown key 'tp'"),
        (["-f", str(ROOT / "profiles.yaml"), "--profile", "nope"], "unknown profile 'nope'"),
    ):
        code, out = _run(*args, str(SEED))
        assert code == 2, out
        assert message in out and len(out.strip().splitlines()) == 1 and "Traceback" not in out


def test_the_documented_example_is_what_the_command_prints() -> None:
    readme = (ROOT / "docs" / "knowledge.md").read_text()
    command = "$ bwstack classify-log --profile dense-triton-auto glm5-fp8-triton.log\n"
    shown = readme[readme.index(command) + len(command) :].split("```", 1)[0]
    code, out = _run("-f", str(ROOT / "profiles.yaml"), "--profile", "dense-triton-auto", str(SEED))
    assert code == 0
    assert out == shown
