"""What to try next after a failure: derived from the class, the expectations and the predictions."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from bwstack.know import next_try, rules
from bwstack.ops import updown
from bwstack.stack import schema
from bwstack.sweep.display import Display
from bwstack.sweep.run import add_next_try
from healthchecks import signatures, vocabulary

# every known-bad shipped profile failing with its own class on sm120 -> the profile worth trying next
SHIPPED = {
    "modelcard-fi-auto": ("dense-fi-bf16", "kv_cache_dtype auto -> bf16"),
    "dense-triton-auto": ("dense-triton-bf16", "kv_cache_dtype auto -> bf16"),
    "dsa-trtllm-fp8": ("dsa-fi-sparse-fp8", "dsa_prefill_backend trtllm -> flashinfer_sparse_mla"),
    "dsa-flashmla-fp8": ("dsa-fi-sparse-fp8", "dsa_decode_backend flashmla_kv -> flashinfer_sparse_mla"),
    "legacy-nsa-default-fp8": ("legacy-dense-fi-bf16", "attention_backend dsa -> flashinfer"),
}


@pytest.mark.parametrize("failed", list(SHIPPED))
def test_each_known_failure_names_the_nearest_healthy_profile(repo_stack: schema.Stack, failed: str) -> None:
    cls = repo_stack.profile(failed).expect
    hint = next_try.suggest(repo_stack, failed, cls)
    name, move = SHIPPED[failed]
    assert hint.profile == name, hint.line()
    assert move in hint.why and hint.why.startswith(f"{cls} on sm120")
    assert "expected and predicted healthy on sm120" in hint.why
    rule = rules.predict(repo_stack, failed, "sm120").decision
    assert rule.rule is not None and f"rule {rule.rule}: {rule.fix}" in hint.why  # the fix the rules know
    chosen = repo_stack.profile(name)
    assert chosen.expect == "healthy" and rules.predict(repo_stack, name, "sm120").verdict == "healthy"


def test_nan_on_the_dense_path_with_fp8_kv_points_at_the_bf16_kv_profile(repo_stack: schema.Stack) -> None:
    hint = next_try.suggest(repo_stack, "modelcard-fi-auto", "nan")
    assert hint.line().startswith("next to try: dense-fi-bf16: nan on sm120 points at kv_cache_dtype")


def test_never_a_profile_seen_failing_here(repo_stack: schema.Stack) -> None:
    seen = {"dense-fi-bf16": "nan"}
    hint = next_try.suggest(repo_stack, "modelcard-fi-auto", "nan", verdicts=seen)
    assert hint.profile not in (None, "dense-fi-bf16", "modelcard-fi-auto")
    assert repo_stack.profile(str(hint.profile)).expect == "healthy"
    every_healthy = {n: "crash" for n, p in repo_stack.profiles.items() if p.expect == "healthy"}
    none = next_try.suggest(repo_stack, "modelcard-fi-auto", "nan", verdicts=every_healthy)
    assert none.profile is None
    assert none.line() == (
        "next to try: nothing: no other profile is expected and predicted healthy on sm120 "
        "(8 known or predicted to fail)"
    )


def test_a_class_without_implicated_fields_takes_the_nearest(repo_stack: schema.Stack) -> None:
    # one field changed, same variant (legacy-dense-fi-bf16 has the same backends on another image: one more)
    hint = next_try.suggest(repo_stack, "dense-fi-bf16", "crash")
    assert hint.line() == (
        "next to try: dense-triton-bf16: crash on sm120; it changes attention_backend flashinfer -> triton; "
        "expected and predicted healthy on sm120"
    )


def test_classes_are_the_catalogs() -> None:
    assert set(next_try.FIELDS_FOR_CLASS) <= set(signatures.CLASSES)
    assert all(set(fields) <= set(vocabulary.BACKEND_FIELDS) for fields in next_try.FIELDS_FOR_CLASS.values())


@pytest.mark.parametrize(
    ("reason", "log_class", "cls"),
    [
        ("unhealthy: nan: output token 0 (id 0): logprob null", "healthy", "nan"),
        ("unhealthy: crash: connection refused", "assertion", "assertion"),  # the log's root cause first
        ("unhealthy: starting: GET /health answered 503", "healthy", None),
        ("", None, None),
    ],
)
def test_failure_class_of_a_failed_up(reason: str, log_class: str | None, cls: str | None) -> None:
    assert updown.failure_class(reason, log_class) == cls


def test_a_failed_sweep_row_prints_and_records_its_next_profile(repo_stack: schema.Stack) -> None:
    doc: dict[str, object] = {"results": {}}
    row = {"profile": "dsa-trtllm-fp8", "verdict": "unsupported_arch", "expect": "unsupported_arch"}
    add_next_try(repo_stack, doc, row)  # type: ignore[arg-type]
    assert row["next_try"]["profile"] == "dsa-fi-sparse-fp8"  # type: ignore[index]
    healthy = {"profile": "dense-fi-bf16", "verdict": "healthy"}
    add_next_try(repo_stack, doc, healthy)  # type: ignore[arg-type]
    assert "next_try" not in healthy
    out = io.StringIO()
    display = Display(Console(file=out, width=80), 1)
    display.label = "[1/1] dsa-trtllm-fp8"
    display.end({**row, "match": True, "decided_by": "log", "elapsed_s": 1.0})
    lines = out.getvalue().splitlines()
    assert lines[0] == "[1/1] dsa-trtllm-fp8: unsupported_arch (decided by log) - matches in 1.0 s"
    assert " ".join(lines[1:]).startswith("  next to try: dsa-fi-sparse-fp8: unsupported_arch on sm120")
