"""Issue 37: hostile answers from ``/server_info`` and ``/generate`` end in a verdict, never in "healthcheck
internal error"; the one reader of untrusted JSON (``healthchecks/untrusted.py``) and the log scanner are
bounded in time and memory on any input (hypothesis, with tracemalloc)."""

from __future__ import annotations

import contextlib
import json
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_hc_warmup import assert_unhealthy, run_hc

from healthchecks import signatures, untrusted
from support.hc_fakes import FakeSGLang, generate_body, server_info

MIB = 1024 * 1024


def _huge_int_logprob() -> bytes:
    return json.dumps(generate_body([-0.4, -0.1])).replace("-0.4", "-" + "9" * 4000, 1).encode()


BODIES: dict[str, tuple[str, Callable[[], bytes]]] = {
    "4000-digit logprob": ("/generate", _huge_int_logprob),
    "100k-deep generate": ("/generate", lambda: b"[" * 100_000 + b"]" * 100_000),
    "100k-deep server_info": ("/server_info", lambda: b'{"a":' * 100_000 + b"1" + b"}" * 100_000),
    "8 MiB of empty objects": ("/server_info", lambda: b"[" + b"{}," * (8 * MIB // 3 - 2) + b"{}]"),
    "5000-digit integer": ("/server_info", lambda: b'{"max_total_num_tokens": ' + b"7" * 5000 + b"}"),
    "duplicate keys": ("/generate", lambda: b'{"text": "a", "text": "b"}'),
    "lone surrogate and bad UTF-8": ("/generate", lambda: b'{"text": "\\ud800\xff"}'),
}


@pytest.mark.parametrize("case", sorted(BODIES))
def test_a_hostile_body_is_a_verdict_not_an_internal_error(tmp_path: Path, case: str) -> None:
    path, make = BODIES[case]
    with FakeSGLang() as fake:
        fake.set_json("GET", "/server_info", server_info("0.5.23"))
        fake.set_raw("GET" if path == "/server_info" else "POST", path, make())
        result = run_hc(tmp_path, fake.url, timeout=10)
    reason = assert_unhealthy(result, "warmup_failed")
    assert "internal error" not in result.stdout, result.stdout
    assert path in reason, reason


JSONISH = st.text(alphabet='[]{}",:0123456789.-eE+ \\untrfalsNIiy', max_size=400)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.one_of(JSONISH, st.binary(max_size=300), st.text(max_size=200)))
def test_the_reader_answers_or_refuses_any_input_quickly(data: str | bytes) -> None:
    started = time.perf_counter()
    try:
        untrusted.loads(data)
    except untrusted.Refused as exc:
        assert "\n" not in str(exc)
    assert time.perf_counter() - started < 0.5


@settings(max_examples=40, deadline=None, derandomize=True)
@given(st.sampled_from(["[", '{"a":', "[{}, ", '"x", ', "1, ", "[[]]"]), st.integers(1, 4 * MIB))
def test_the_reader_is_bounded_in_time_and_memory_on_large_floods(unit: str, size: int) -> None:
    """Any flood of one shape within 16 MiB: refused or parsed in bounded time, at most ~16x its bytes."""
    data = (unit * (size // len(unit) + 1)).encode()[:size]
    tracemalloc.start()
    started = time.perf_counter()
    with contextlib.suppress(untrusted.Refused):
        untrusted.loads(data)
    elapsed = time.perf_counter() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert elapsed < 5, elapsed
    assert peak < 16 * len(data) + MIB, (peak, len(data))


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (b'{"verdict": "healthy", "verdict": "nan"}', "appears twice"),
        (b"[NaN]", "finite"),
        (b"[-Infinity]", "finite"),
        (b"[1e309]", "infinity"),
        (b"1" * 100, "digits"),
        (b"[" * 65 + b"]" * 65, "levels deep"),
        (b"[1,]", "not JSON"),
        (b"\xff", "UTF-8"),
    ],
)
def test_each_limit_is_named(data: bytes, words: str) -> None:
    with pytest.raises(untrusted.Refused, match=words):
        untrusted.loads(data)


def test_nan_is_kept_where_asked_and_never_written() -> None:
    assert untrusted.loads(b"[NaN]", untrusted.Limits(allow_nan=True))[0] != 0  # NaN != anything
    doc = {"x": float("nan"), "y": [float("inf"), 1.5, {"z": float("-inf")}], "n": 3}
    assert untrusted.dumps(doc) == '{"x": null, "y": [null, 1.5, {"z": null}], "n": 3}'
    assert untrusted.loads(untrusted.dumps(doc)) == {"x": None, "y": [None, 1.5, {"z": None}], "n": 3}


@settings(max_examples=100, deadline=None, derandomize=True)
@given(st.lists(st.text(max_size=300), max_size=50))
def test_the_log_scanner_is_bounded_in_time_and_memory(lines: list[str]) -> None:
    text = "\n".join(lines) * 20
    tracemalloc.start()
    started = time.perf_counter()
    scanner: Any = signatures.scan_text(text)
    scanner.result()
    elapsed = time.perf_counter() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert elapsed < 2, elapsed
    assert peak < 4 * len(text.encode()) + 4 * MIB, peak
