"""The healthcheck run as Docker runs it (a subprocess) against an in-process fake SGLang server."""

from __future__ import annotations

import json
import math
import os
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from healthchecks import judging, settings
from support.hc_fakes import FakeSGLang, free_port, generate_body, server_info
from support.stack import ROOT

WARMUP = ROOT / "healthchecks" / "warmup.py"
NAN_LINE = (
    "/pytorch/aten/src/ATen/native/cuda/TensorCompare.cu:112: _assert_async_cuda_kernel: block: [0,0,0], "
    "thread: [0,0,0] Assertion `probability tensor contains either `inf`, `nan` or element < 0` failed.\n"
)


@dataclass
class Result:
    code: int
    last: str
    stdout: str
    elapsed: float


def run_hc(
    tmp_path: Path, url: str, *extra: str, timeout: float = 5, env: dict[str, str] | None = None
) -> Result:
    args = [sys.executable, str(WARMUP), "--url", url, "--timeout", str(timeout)]
    if "--state" not in extra:
        args += ["--state", str(tmp_path / "state.json")]
    if "--log" not in extra:
        args += ["--log", str(tmp_path / "server.log")]
    if "--api-key-file" not in extra:
        args += ["--api-key-file", str(tmp_path / "api_key")]
    base_env = {k: v for k, v in os.environ.items() if not k.startswith("BWSTACK_")}
    start = time.monotonic()
    proc = subprocess.run(
        [*args, *extra],
        capture_output=True,
        text=True,
        timeout=timeout + 30,
        env={**base_env, **(env or {})},
        cwd=tmp_path,
    )
    elapsed = time.monotonic() - start
    assert proc.stderr == "", proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert lines, "no output"
    assert proc.returncode in (0, 1)
    assert elapsed < timeout + 1, f"ran {elapsed:.2f}s with --timeout {timeout}"
    return Result(proc.returncode, lines[-1], proc.stdout, elapsed)


def assert_unhealthy(result: Result, cls: str) -> str:
    assert result.code == 1, result.stdout
    prefix = f"unhealthy: {cls}: "
    assert result.last.startswith(prefix), result.last
    return result.last[len(prefix) :]


# --- healthy ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("era", ["0.5.9", "0.5.23"])
def test_healthy_server_exits_0_with_summary(tmp_path: Path, era: str) -> None:
    with FakeSGLang(era=era) as fake:
        result = run_hc(tmp_path, fake.url)
    assert result.code == 0, result.stdout
    assert result.last.startswith("healthy: sampled decode ok (8 tokens, finish length")
    assert f"sglang {era}" in result.last
    generate = [r for r in fake.requests if r[1] == "/generate"]
    assert len(generate) == 3  # the sampled decode, the quality probe's passage, the long-context probe
    payload = json.loads(generate[0][3])
    assert payload["return_logprob"] is True
    assert payload["sampling_params"]["temperature"] > 0
    assert payload["sampling_params"]["ignore_eos"] is True  # an early EOS is no empty completion
    assert "top_p" not in payload["sampling_params"] and "top_k" not in payload["sampling_params"]
    passage = json.loads(generate[1][3])
    assert passage["logprob_start_len"] == 0 and passage["return_logprob"] is True
    assert passage["sampling_params"]["max_new_tokens"] == 1
    long = json.loads(generate[2][3])
    assert len(long["input_ids"]) == 2304 and long["logprob_start_len"] == 1152  # past the 2048 window
    assert long["input_ids"][1152:] == long["input_ids"][:1152]  # the block, then the block again
    assert "long context (2304 tokens)" in result.last


def test_expectations_match_through_key_and_value_aliases_of_the_0_5_9_era(tmp_path: Path) -> None:
    with FakeSGLang(era="0.5.9") as fake:
        fake.set_json(
            "GET", "/server_info", server_info("0.5.9", kv_cache_dtype="bf16", nsa_decode_backend="fa3")
        )
        result = run_hc(
            tmp_path,
            fake.url,
            "--expect",
            "attention_backend=dsa",
            "--expect",
            "dsa_decode_backend=fa3",
            "--expect",
            "kv_cache_dtype=bfloat16,tp_size=8",
            "--expect",
            "fp4_gemm_backend=flashinfer_cutlass",
        )
    assert result.code == 0, result.stdout


def test_falls_back_to_get_server_info_on_older_servers(tmp_path: Path) -> None:
    with FakeSGLang(era="0.5.9") as fake:
        fake.remove("GET", "/server_info")
        fake.set_json("GET", "/get_server_info", server_info("0.5.9"))
        result = run_hc(tmp_path, fake.url, "--expect", "nsa_decode_backend=flashmla_kv")
    assert result.code == 0, result.stdout
    assert [r[1] for r in fake.requests].count("/get_server_info") == 1


def test_expect_text_is_checked(tmp_path: Path) -> None:
    with FakeSGLang() as fake:
        assert run_hc(tmp_path, fake.url, "--expect-text", "Paris").code == 0
        reason = assert_unhealthy(run_hc(tmp_path, fake.url, "--expect-text", "Lyon"), "warmup_failed")
    assert "'Lyon'" in reason and "Paris" in reason


def test_env_vars_are_used_when_flags_are_absent(tmp_path: Path) -> None:
    with FakeSGLang() as fake:
        env = {
            "BWSTACK_HC_URL": fake.url,
            "BWSTACK_HC_EXPECT": "dsa_decode_backend=trtllm",
            "BWSTACK_HC_STATE": str(tmp_path / "s.json"),
            "BWSTACK_LOG": str(tmp_path / "none.log"),
            "BWSTACK_HC_TIMEOUT": "4",
        }
        proc = subprocess.run(
            [sys.executable, str(WARMUP)],
            capture_output=True,
            text=True,
            timeout=30,
            env={**os.environ, **env},
        )
    assert proc.returncode == 1
    assert proc.stdout.strip().splitlines()[-1].startswith("unhealthy: backend_override: dsa_decode_backend")
    assert (tmp_path / "s.json").exists()


def test_bad_arguments_are_an_unhealthy_line_not_exit_2(tmp_path: Path) -> None:
    reason = assert_unhealthy(run_hc(tmp_path, "http://127.0.0.1:9", "--expect", "novalue"), "warmup_failed")
    assert "misconfigured" in reason
    assert_unhealthy(run_hc(tmp_path, "ftp://127.0.0.1:9"), "warmup_failed")


# --- liveness faults ----------------------------------------------------------------------------------------


def test_refused_while_loading_is_starting(tmp_path: Path) -> None:
    reason = assert_unhealthy(run_hc(tmp_path, f"http://127.0.0.1:{free_port()}"), "starting")
    assert "refused" in reason


def test_refused_after_a_healthy_pass_is_crash(tmp_path: Path) -> None:
    with FakeSGLang() as fake:
        url = fake.url
        assert run_hc(tmp_path, url).code == 0
    reason = assert_unhealthy(run_hc(tmp_path, url), "crash")
    assert "after a healthy pass" in reason


def test_503_while_starting_is_starting_and_503_later_is_health_timeout(tmp_path: Path) -> None:
    with FakeSGLang() as fake:
        fake.set_health(503)
        assert "still starting" in assert_unhealthy(run_hc(tmp_path, fake.url), "starting")
        fake.set_health(200)
        assert run_hc(tmp_path, fake.url).code == 0
        fake.set_health(503)
        assert_unhealthy(run_hc(tmp_path, fake.url), "health_timeout")


def test_health_hang_past_the_timeout_is_timeout_within_budget(tmp_path: Path) -> None:
    with FakeSGLang() as fake:
        fake.set_hang("GET", "/health")
        result = run_hc(tmp_path, fake.url, timeout=1.5)
    assert_unhealthy(result, "timeout")
    assert result.elapsed >= 1.4


# --- HTTP faults on the deep checks -------------------------------------------------------------------------


def test_500_on_generate_is_warmup_failed(tmp_path: Path) -> None:
    with FakeSGLang() as fake:
        fake.set_raw("POST", "/generate", b"Internal Server Error", status=500, ctype="text/plain")
        reason = assert_unhealthy(run_hc(tmp_path, fake.url), "warmup_failed")
    assert "POST /generate answered 500" in reason


def test_500_whose_root_cause_lands_in_the_log_is_that_class(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("[2026-03-02 13:00:00] The server is fired up and ready to roll!\n")
    with FakeSGLang(era="0.5.9") as fake:

        def nan_500(h: object) -> None:
            with log.open("a") as fh:  # what the 0.5.9 server logs when a NaN logprob meets json.dumps
                fh.write("ValueError: Out of range float values are not JSON compliant\n")
            h.send_bytes(500, b"Internal Server Error", "text/plain")  # type: ignore[attr-defined]

        fake.routes[("POST", "/generate")] = nan_500
        reason = assert_unhealthy(run_hc(tmp_path, fake.url), "nan")
    assert "answered 500" in reason and "Out of range float values" in reason


def test_non_json_body_is_warmup_failed(tmp_path: Path) -> None:
    with FakeSGLang() as fake:
        fake.set_raw("POST", "/generate", b"<html>bad gateway</html>", ctype="text/html")
        reason = assert_unhealthy(run_hc(tmp_path, fake.url), "warmup_failed")
    assert "non-JSON" in reason


def test_malformed_answer_shape_is_warmup_failed(tmp_path: Path) -> None:
    with FakeSGLang() as fake:
        fake.set_json("POST", "/generate", {"text": "hi"})
        assert_unhealthy(run_hc(tmp_path, fake.url), "warmup_failed")
        fake.set_json("POST", "/generate", generate_body())
        fake.set_json("GET", "/server_info", ["not", "an", "object"])
        assert_unhealthy(run_hc(tmp_path, fake.url), "warmup_failed")


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        (json.dumps(generate_body([-0.4, None, -0.1])).encode(), "logprob null"),
        (json.dumps(generate_body([-0.4, math.nan])).encode(), "logprob nan"),
        (json.dumps(generate_body([-0.4, -math.inf])).encode(), "logprob -inf"),
        (json.dumps(generate_body([math.inf])).encode(), "logprob inf"),
        (json.dumps(generate_body([-0.4, -1e30])).encode(), "sentinel"),
    ],
    ids=["orjson-null", "NaN-literal", "-Infinity", "Infinity", "sanitized-sentinel"],
)
def test_non_finite_logprobs_are_nan(tmp_path: Path, body: bytes, needle: str) -> None:
    with FakeSGLang() as fake:
        fake.set_raw("POST", "/generate", body)
        reason = assert_unhealthy(run_hc(tmp_path, fake.url), "nan")
    assert needle in reason


def test_empty_text_is_warmup_failed(tmp_path: Path) -> None:
    with FakeSGLang() as fake:
        fake.set_json("POST", "/generate", generate_body(text="  \n"))
        reason = assert_unhealthy(run_hc(tmp_path, fake.url), "warmup_failed")
    assert "empty completion" in reason


def test_abort_finish_reason_is_warmup_failed(tmp_path: Path) -> None:
    finish = {"type": "abort", "message": "Abort in waiting queue", "status_code": 503, "err_type": None}
    with FakeSGLang() as fake:
        fake.set_json("POST", "/generate", generate_body(logprobs=[], text="", finish=finish))
        reason = assert_unhealthy(run_hc(tmp_path, fake.url), "warmup_failed")
    assert "aborted" in reason and "Abort in waiting queue" in reason


def test_abort_message_with_a_known_signature_gets_its_class(tmp_path: Path) -> None:
    finish = {
        "type": "abort",
        "message": "CUDA out of memory. Tried to allocate 2.00 GiB",
        "status_code": 500,
    }
    with FakeSGLang() as fake:
        fake.set_json("POST", "/generate", generate_body(logprobs=[], text="", finish=finish))
        assert_unhealthy(run_hc(tmp_path, fake.url), "oom")


def test_generate_hang_past_the_timeout_is_timeout_within_budget(tmp_path: Path) -> None:
    with FakeSGLang() as fake:
        fake.set_hang("POST", "/generate")
        result = run_hc(tmp_path, fake.url, timeout=2)
    reason = assert_unhealthy(result, "timeout")
    assert "/generate" in reason


def test_slow_drip_body_cannot_stretch_the_budget(tmp_path: Path) -> None:
    with FakeSGLang() as fake:
        fake.set_drip("GET", "/server_info", every=0.2)
        result = run_hc(tmp_path, fake.url, timeout=2)
    assert_unhealthy(result, "timeout")


def test_huge_body_is_capped(tmp_path: Path) -> None:
    with FakeSGLang() as fake:
        fake.set_huge("GET", "/server_info")
        reason = assert_unhealthy(run_hc(tmp_path, fake.url), "warmup_failed")
    assert "larger than" in reason


def test_connection_reset_is_crash(tmp_path: Path) -> None:
    with FakeSGLang() as fake:
        fake.set_reset("POST", "/generate")
        reason = assert_unhealthy(run_hc(tmp_path, fake.url), "crash")
    assert "/generate" in reason


def test_not_http_is_warmup_failed(tmp_path: Path) -> None:
    with FakeSGLang() as fake:
        fake.set_garbage("GET", "/server_info")
        reason = assert_unhealthy(run_hc(tmp_path, fake.url), "warmup_failed")
    assert "malformed HTTP" in reason


def test_overridden_dsa_decode_backend_is_backend_override(tmp_path: Path) -> None:
    with FakeSGLang() as fake:
        fake.set_json("GET", "/server_info", server_info("0.5.23", dsa_decode_backend="trtllm"))
        reason = assert_unhealthy(
            run_hc(tmp_path, fake.url, "--expect", "dsa_decode_backend=flashinfer_sparse_mla"),
            "backend_override",
        )
    assert reason == "dsa_decode_backend: requested flashinfer_sparse_mla, effective trtllm"
    assert not [r for r in fake.requests if r[1] == "/generate"]


def test_override_reported_through_the_nsa_alias(tmp_path: Path) -> None:
    with FakeSGLang(era="0.5.9") as fake:
        reason = assert_unhealthy(
            run_hc(tmp_path, fake.url, "--expect", "dsa_decode_backend=flashinfer_sparse_mla"),
            "backend_override",
        )
    assert "effective flashmla_kv (as nsa_decode_backend)" in reason


# --- log scan -----------------------------------------------------------------------------------------------


def test_fatal_log_signature_wins_while_http_still_answers(tmp_path: Path) -> None:
    (tmp_path / "server.log").write_text(
        "[2026-03-02 11:09:40] The server is fired up and ready to roll!\n" + NAN_LINE
    )
    with FakeSGLang() as fake:
        reason = assert_unhealthy(run_hc(tmp_path, fake.url), "nan")
        assert "probability tensor" in reason and "also: device_assert" in reason
        assert not [r for r in fake.requests if r[1] == "/generate"]
        assert_unhealthy(run_hc(tmp_path, fake.url), "nan")  # sticky: the next probe still reports it


def test_fatal_log_signature_beats_starting(tmp_path: Path) -> None:
    (tmp_path / "server.log").write_text(
        "ValueError: TRTLLM MHA backend is only supported on Blackwell GPUs (SM100). Please use a different backend.\n"
    )
    assert_unhealthy(run_hc(tmp_path, f"http://127.0.0.1:{free_port()}"), "unsupported_arch")


def test_log_signature_is_reported_even_when_health_hangs(tmp_path: Path) -> None:
    (tmp_path / "server.log").write_text(
        "[TP0] Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=False)\n"
    )
    with FakeSGLang() as fake:
        fake.set_hang("GET", "/health")
        result = run_hc(tmp_path, fake.url, timeout=3)
    assert_unhealthy(result, "timeout")
    assert "watchdog timeout" in result.last
    assert not fake.requests  # decided from the log alone


def test_refused_after_healthy_stays_crash_despite_an_old_health_timeout_line(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    with FakeSGLang() as fake:
        url = fake.url
        assert run_hc(tmp_path, url).code == 0
    log.write_text(
        "Health check failed. Server couldn't get a response from detokenizer for last 20 seconds.\n"
    )
    assert_unhealthy(run_hc(tmp_path, url), "crash")


def test_transient_health_timeout_line_is_ignored_while_health_answers(tmp_path: Path) -> None:
    (tmp_path / "server.log").write_text(
        "[2026-03-02 21:31:22] Health check failed. Server couldn't get a response from detokenizer for last 20 "
        "seconds. tic start time: 21:31:02. last_heartbeat time: 21:30:41\n"
    )
    with FakeSGLang() as fake:
        assert run_hc(tmp_path, fake.url).code == 0
        fake.set_health(503)
        assert_unhealthy(run_hc(tmp_path, fake.url), "health_timeout")


def test_log_scan_is_incremental_and_follows_rotation(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("[2026-03-02 10:00:00] The server is fired up and ready to roll!\n")
    with FakeSGLang() as fake:
        assert run_hc(tmp_path, fake.url).code == 0
        state = json.loads((tmp_path / "state.json").read_text())
        assert state["log"]["offset"] == log.stat().st_size
        with log.open("a") as fh:  # written just before the wrapper rotated the file
            fh.write(NAN_LINE)
        log.rename(tmp_path / "server.log.1")
        log.write_text("[2026-03-02 10:05:00] Decode batch. #running-req: 1\n")
        assert_unhealthy(run_hc(tmp_path, fake.url), "nan")


def test_partial_last_line_is_read_once_complete(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("ok\nValueError: Input probs contains")
    with FakeSGLang() as fake:
        assert run_hc(tmp_path, fake.url).code == 0
        with log.open("a") as fh:
            fh.write(" NaN.\n")
        assert_unhealthy(run_hc(tmp_path, fake.url), "nan")


# --- auth ---------------------------------------------------------------------------------------------------


def test_401_without_key_and_200_with_it(tmp_path: Path) -> None:
    secret = "sk-test-4c1d9e0b7a"
    with FakeSGLang(api_key=secret) as fake:
        reason = assert_unhealthy(run_hc(tmp_path, fake.url), "warmup_failed")
        assert "401" in reason and "api_key missing" in reason
        (tmp_path / "api_key").write_text(secret + "\n")
        result = run_hc(tmp_path, fake.url)
    assert result.code == 0, result.stdout
    assert secret not in result.stdout
    authed = [r for r in fake.requests if r[2].get("Authorization") == f"Bearer {secret}"]
    assert {r[1] for r in authed} >= {"/server_info", "/generate"}


def test_403_is_warmup_failed(tmp_path: Path) -> None:
    with FakeSGLang() as fake:
        fake.set_json("GET", "/server_info", {"error": "Forbidden"}, status=403)
        reason = assert_unhealthy(run_hc(tmp_path, fake.url), "warmup_failed")
    assert "403" in reason


def test_key_echoed_by_the_server_is_redacted(tmp_path: Path) -> None:
    secret = "sk-echo-99aa"
    (tmp_path / "api_key").write_text(secret)
    with FakeSGLang() as fake:
        fake.set_json("POST", "/generate", {"error": f"bad key {secret}"}, status=400)
        result = run_hc(tmp_path, fake.url)
    assert_unhealthy(result, "warmup_failed")
    assert secret not in result.stdout and "***" in result.last


@pytest.mark.parametrize("offset", [120, 150, 155, 158])
def test_key_echoed_across_the_snippet_cut_leaves_no_prefix(tmp_path: Path, offset: int) -> None:
    """The reply is cut to 160 characters for the verdict: the key must be redacted before the cut, or a
    server that echoes it leaks its first characters into docker inspect and the state file."""
    secret = "sk-\\Pf7cutMARK'q\"z-0123456789abcdef"
    (tmp_path / "api_key").write_text(secret)
    with FakeSGLang() as fake:
        fake.set_raw("POST", "/generate", ("x" * offset + secret + " " + repr(secret)).encode(), status=400)
        result = run_hc(tmp_path, fake.url)
    assert_unhealthy(result, "warmup_failed")
    state = (tmp_path / "state.json").read_text()
    for text in (result.stdout, state):
        assert "Pf7" not in text and "sk-" not in text, text
    assert "***" in result.last or offset > 150  # past 157 characters the mark itself is cut


# --- light mode ---------------------------------------------------------------------------------------------


def test_light_mode_skips_the_decode_until_it_is_due(tmp_path: Path) -> None:
    with FakeSGLang() as fake:
        assert run_hc(tmp_path, fake.url, "--mode", "light").code == 0  # first pass is always full
        assert len([r for r in fake.requests if r[1] == "/generate"]) == 3  # decode + passage + long
        result = run_hc(tmp_path, fake.url, "--mode", "light", "--decode-every", "300")
        assert result.code == 0 and "last sampled decode" in result.last
        assert len([r for r in fake.requests if r[1] == "/generate"]) == 3  # the long one not every time
        state_file = tmp_path / "state.json"
        state = json.loads(state_file.read_text())
        state["last_decode"] -= 301  # age the last decode instead of sleeping
        state_file.write_text(json.dumps(state))
        assert run_hc(tmp_path, fake.url, "--mode", "light", "--decode-every", "300").code == 0
        assert len([r for r in fake.requests if r[1] == "/generate"]) == 5  # the passage goes with the decode


# --- units --------------------------------------------------------------------------------------------------


def test_parse_expect_accepts_flag_spelling_and_commas() -> None:
    assert settings.parse_expect(["--dsa-decode-backend=trtllm", "tp_size=8, kv_cache_dtype=bf16"]) == {
        "dsa_decode_backend": "trtllm",
        "tp_size": "8",
        "kv_cache_dtype": "bf16",
    }
    with pytest.raises(settings.UsageError):
        settings.parse_expect(["tp_size="])


def test_compare_expect_normalises_and_names_both_values() -> None:
    info = server_info("0.5.23", kv_cache_dtype="bfloat16", mem_fraction_static=0.85)
    assert (
        judging.compare_expect(
            {"kv_cache_dtype": "bf16", "mem_fraction_static": "0.850", "tp_size": "8"}, info
        )
        == []
    )
    assert judging.compare_expect({"moe_runner_backend": "triton", "nope": "x"}, info) == [
        "moe_runner_backend: requested triton, effective flashinfer_cutlass",
        "nope: requested x, effective not reported by /server_info",
    ]


def test_a_body_cut_short_is_crash(tmp_path: Path) -> None:
    """Content-Length promises 500 bytes, the server closes after 17: the docs' "connection reset or closed
    before a complete answer" row, ``crash`` (not a non-JSON ``warmup_failed``)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                first = conn.recv(65536).split(b"\r\n", 1)[0]
                if b"/health" in first:
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
                else:
                    conn.sendall(
                        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n"
                        b'{"model_path": "x'
                    )

    threading.Thread(target=serve, daemon=True).start()
    try:
        result = run_hc(tmp_path, f"http://127.0.0.1:{listener.getsockname()[1]}")
    finally:
        listener.close()
    reason = assert_unhealthy(result, "crash")
    assert "IncompleteRead" in reason
