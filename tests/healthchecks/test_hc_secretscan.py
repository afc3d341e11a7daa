"""The one secret detector (``healthchecks/secretscan.py``, issue 37): every form of a secret a stranger's bundle,
log or profiles file may carry is found and redacted, never printed; ordinary log words survive."""

from __future__ import annotations

import base64
import time
import tracemalloc
import urllib.parse

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from healthchecks import secretscan

HF = "hf_" + "Qx7" * 12  # the shape of a Hugging Face token, made here (no real token in the tree)
SK = "sk-" + "Ab3" * 8
GHP = "ghp_" + "Zz9" * 12
SLACK = "xoxb-" + "12345-" * 3 + "abc"


@pytest.mark.parametrize(
    ("text", "gone"),
    [
        (f"host {HF} up", HF),
        (f"token={urllib.parse.quote(HF.replace('_', '/'))}", "Qx7Qx7Qx7Qx7"),
        ("tok=" + urllib.parse.quote(f"a b {HF}", safe=""), "Qx7Qx7Qx7Qx7"),
        ("hf%5F" + "Qx7" * 12, "Qx7Qx7Qx7Qx7"),
        (
            f"log {base64.b64encode(f'HF_TOKEN={HF}'.encode()).decode()} end",
            base64.b64encode(HF.encode())[:8].decode(),
        ),
        (f"Authorization: Basic {base64.b64encode(b'ops:plainkey-123').decode()}", "b3BzOnBsYWlua2V5LTEy"),
        (f"loaded {HF[:11]}\n{HF[11:]} from the cache", HF[11:]),
        (f"loaded {HF[:11]}\n{HF[11:]} from the cache", HF[:11]),
        (f"curl http://ops:{SK}@gpu-host:30000/v1", SK),
        ("curl http://ops:opaque-password-1@gpu-host/x", "opaque-password-1"),
        (f"Authorization: Bearer {SK}", SK),
        (f"--api-key {SK}", SK),
        (f"push https://x:{GHP}@github.com/o/r", GHP),
        (f"github_pat_{'Aa1' * 10}", "Aa1Aa1Aa1Aa1"),
        (f"slack {SLACK}", SLACK),
    ],
)
def test_every_form_is_found_and_redacted(text: str, gone: str) -> None:
    counts: dict[str, int] = {}
    out = secretscan.redact(text, counts)
    assert gone not in out and secretscan.MARK in out, out
    assert counts and secretscan.first_kind(text) is not None
    assert secretscan.findings(out) == []  # nothing left to find


@pytest.mark.parametrize(
    "text",
    [
        "tiktoken=0.12.0",
        "max_total_tokens=409600",
        "api_key=None, admin_api_key=None",
        "Uvicorn running on http://0.0.0.0:30000",
        "basic configuration loaded",
        "sha256:" + "ab12" * 16,
        "tokenizer_path='/root/.cache/huggingface/tiny'",
        "hf_transfer\nDownloading shards",
    ],
)
def test_ordinary_words_survive(text: str) -> None:
    assert secretscan.redact(text) == text
    assert secretscan.findings(text) == []


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("GITHUB_TOKEN", True),
        ("API_KEY", True),
        ("HUGGINGFACEHUB_API_TOKEN", True),
        ("HF_HUB_TOKEN", True),
        ("HF_TOKEN", True),
        ("OPENAI_API_KEY", True),
        ("AWS_SECRET_ACCESS_KEY", True),
        ("DB_PASSWORD", True),
        ("SGLANG_DSA_PREFILL_DENSE_ATTN_KV_LEN_THRESHOLD", False),
        ("MAX_TOKENS", False),
        ("TOKENIZERS_PARALLELISM", False),
        ("LD_LIBRARY_PATH", False),
    ],
)
def test_secret_env_names(name: str, secret: bool) -> None:
    assert secretscan.secret_env_name(name) is secret


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.text(max_size=2000))
def test_the_detector_is_bounded_on_any_text(text: str) -> None:
    started = time.perf_counter()
    secretscan.redact(text)
    assert time.perf_counter() - started < 0.5


def test_the_detector_is_linear_and_small_on_a_large_hostile_log() -> None:
    """4 MiB of near-tokens (prefixes cut at line ends, long base64-like and %-words): time and memory bounded."""
    line = f"hf_{'a' * 15}\n{'B' * 300} %41%42{'c' * 50} {'QUJD' * 40}\n"
    text = line * (4 * 1024 * 1024 // len(line))
    tracemalloc.start()
    started = time.perf_counter()
    secretscan.findings(text)
    elapsed = time.perf_counter() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert elapsed < 20, elapsed
    assert peak < 64 * 1024 * 1024, peak
