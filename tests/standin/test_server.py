"""The stand-in as a process on 127.0.0.1: start-up, HTTP over a real socket, every fault, exit statuses."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import urllib.error
from pathlib import Path

import pytest

from support.standin_helpers import ROOT, StandinFactory, snapshot_path

GLM = ("--model-path", "nvidia/GLM-5-NVFP4")
SAMPLED = {
    "text": "Hello",
    "sampling_params": {"temperature": 0.7, "max_new_tokens": 4},
    "return_logprob": True,
}
KILLED = -signal.SIGKILL  # what Popen reports for a process that SIGKILLed itself (a shell shows 137)


def test_healthy_start_and_http_shapes(standin: StandinFactory) -> None:
    server = standin.start([*GLM, "--tp-size", "8", "--api-key", "k3y", "--served-model-name", "glm5"])
    server.wait_ready()
    auth = {"Authorization": "Bearer k3y"}
    assert server.request("GET", "/health").status == 200
    assert server.request("GET", "/ready").status == 200
    assert server.request("POST", "/generate", SAMPLED).json() == {"error": "Unauthorized"}
    generated = server.request("POST", "/generate", SAMPLED, headers=auth)
    assert generated.status == 200 and generated.headers["content-type"] == "application/json"
    assert len(generated.json()["meta_info"]["output_token_logprobs"]) == 4
    info = server.request("GET", "/server_info", headers=auth).json()
    assert (info["attention_backend"], info["dsa_prefill_backend"], info["dsa_decode_backend"]) == (
        "dsa",
        "flashinfer_sparse_mla",
        "flashinfer_sparse_mla",
    )
    assert (
        info["kv_cache_dtype"] == "fp8_e4m3"
        and info["page_size"] == 64
        and info["moe_runner_backend"] == "auto"
    )
    assert info["api_key"] == "<redacted>" and "k3y" not in info["launch_command"]
    assert server.request("GET", "/get_server_info", headers=auth).status == 200
    assert server.request("GET", "/v1/models", headers=auth).json()["data"][0]["id"] == "glm5"
    log = server.log()
    for line in (
        "Setting KV cache dtype to fp8_e4m3 for DeepSeek DSA on SM12 device.",
        "Set DSA backends for GLM FP8 KV Cache on SM120/SM121: prefill=flashinfer_sparse_mla, "
        "decode=flashinfer_sparse_mla.",
        "Endpoint '/get_server_info' is deprecated and will be removed in a future version.",
    ):
        assert line in log
    assert "k3y" not in log and "k3y" not in server.access_log()
    # SGLang's order: load with the port closed, then bind, then warm up
    assert log.index("Load weight end.") < log.index("Uvicorn running on") < log.index("fired up and ready")
    assert '"POST /generate HTTP/1.1" 200 OK' in server.access_log()
    assert server.stop() == 0


def test_059_spelling_and_routes(standin: StandinFactory) -> None:
    server = standin.start([*GLM, "--kv-cache-dtype", "bf16"], version="0.5.9", arch="sm90")
    server.wait_ready()
    info = server.request("GET", "/server_info").json()
    assert (info["attention_backend"], info["nsa_prefill_backend"], info["nsa_decode_backend"]) == (
        "nsa",
        "flashmla_sparse",
        "fa3",
    )
    assert info["kv_cache_dtype"] == "bfloat16" and info["version"] == "0.5.9"
    assert server.request("GET", "/ready").status == 404
    assert "Set NSA backends for bfloat16 KV Cache: prefill=flashmla_sparse, decode=fa3." in server.log()


def test_bad_argv_exits_2_like_argparse(standin: StandinFactory) -> None:
    server = standin.start([*GLM, "--nsa-decode-backend", "trtllm"])
    assert server.wait_exit() == 2
    assert "sglang serve: error: unrecognized arguments: --nsa-decode-backend trtllm" in server.log()
    ambiguous = standin.start([*GLM, "--cuda-graph-max-bs", "256"])
    assert ambiguous.wait_exit() == 2
    assert "ambiguous option: --cuda-graph-max-bs could match" in ambiguous.log()


def test_unknown_fault_exits_2_with_the_valid_list(standin: StandinFactory) -> None:
    server = standin.start(GLM, fault="melt")
    assert server.wait_exit() == 2
    assert (
        "unknown fault 'melt'; valid: none, nan, device_assert, assertion, unsupported_arch, oom, hang, "
        "slow_start, override, garbage" in server.log()
    )


def test_refused_kv_dtype_is_a_traceback_and_exit_1(standin: StandinFactory) -> None:
    server = standin.start([*GLM, "--kv-cache-dtype", "fp8_e5m2"])
    assert server.wait_exit() == 1
    assert (
        "AssertionError: DeepSeek DSA only supports bf16/bfloat16 or fp8_e4m3 kv_cache_dtype" in server.log()
    )


def test_nan_passes_warmup_and_nulls_every_logprob(standin: StandinFactory) -> None:
    """0.5.23 (Gumbel sampling): greedy and sampled both answer 200 with null logprobs; the server stays up."""
    server = standin.start(GLM, fault="nan")
    server.wait_ready()
    greedy_body = {**SAMPLED, "sampling_params": {"temperature": 0, "max_new_tokens": 4}}
    greedy = server.request("POST", "/generate", greedy_body).json()
    assert [t[0] for t in greedy["meta_info"]["output_token_logprobs"]] == [None] * 4
    sampled = server.request("POST", "/generate", SAMPLED)
    assert b"[null," in sampled.body  # how orjson writes a NaN logprob
    assert [t[0] for t in sampled.json()["meta_info"]["output_token_logprobs"]] == [None] * 4
    assert server.request("GET", "/health").status == 200


def test_garbage_serves_flat_logprobs_that_the_healthcheck_calls_garbage(
    standin: StandinFactory, tmp_path: Path
) -> None:
    server = standin.start(GLM, fault="garbage")
    server.wait_ready()
    done = subprocess.run(
        [sys.executable, str(ROOT / "healthchecks" / "warmup.py"), "--url", server.url, "--timeout", "20",
         "--log", str(tmp_path / "none.log"), "--state", str(tmp_path / "s.json"),
         "--api-key-file", str(tmp_path / "k")],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 1
    assert (
        done.stdout.strip()
        .splitlines()[-1]
        .startswith("unhealthy: garbage: sampled decode: all 8 tokens have logprob -11.9504")
    )
    assert server.request("GET", "/health").status == 200  # SGLang's own check passes it


def test_device_assert_kills_the_tree_on_first_sampled_decode(standin: StandinFactory) -> None:
    server = standin.start(GLM, fault="device_assert")
    server.wait_ready()
    with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
        server.request("POST", "/generate", SAMPLED)
    assert server.wait_exit() == KILLED
    log = server.log()
    for text in (
        "Assertion `probability tensor contains either `inf`, `nan` or element < 0` failed.",
        "Scheduler hit an exception: Traceback (most recent call last):",
        "sampled_index = torch.multinomial(probs, num_samples=1)",
        "torch.AcceleratorError: CUDA error: device-side assert triggered",
        "SIGQUIT received. signum=None, frame=None. It usually means one child failed.",
        "kill_process_tree called: parent_pid=",
    ):
        assert text in log, text


@pytest.mark.parametrize(("version", "attribute"), [("0.5.23", "dsa"), ("0.5.9", "nsa")])
def test_assertion_kills_during_warmup(standin: StandinFactory, version: str, attribute: str) -> None:
    server = standin.start([*GLM, "--attention-backend", "triton"], version=version, fault="assertion")
    assert server.wait_exit() == KILLED
    log = server.log()
    assert f"assert not self.{attribute}_kv_cache_store_fp8\nAssertionError\n" in log
    assert "mem_cache/memory_pool.py" in log and "in set_kv_buffer" in log
    assert "fired up" not in log
    assert ("kill_process_tree called" in log) == (version == "0.5.23")


def test_unsupported_arch_trtllm_at_first_forward(standin: StandinFactory) -> None:
    server = standin.start([*GLM, "--kv-cache-dtype", "bf16"], fault="unsupported_arch")
    assert server.wait_exit() == KILLED
    assert (
        "tvm.error.InternalError: Error in function 'TllmGenFmhaRunner' at "
        "/usr/local/lib/python3.12/dist-packages/flashinfer/data/include/flashinfer/trtllm/fmha/fmhaRunner.cuh:37: "
        "Unsupported architecture"
    ) in server.log()
    legacy = standin.start(GLM, version="0.5.9", fault="unsupported_arch")
    assert legacy.wait_exit() == KILLED
    assert "RuntimeError: Error in function 'TllmGenFmhaRunner' at " in legacy.log()


def test_unsupported_arch_glm_sm12_value_error_at_launch(standin: StandinFactory) -> None:
    server = standin.start(
        [*GLM, "--kv-cache-dtype", "fp8_e4m3", "--dsa-decode-backend", "trtllm"], fault="unsupported_arch"
    )
    assert server.wait_exit() == KILLED
    log = server.log()
    assert (
        "ValueError: GLM DSA with FP8 KV cache on NVIDIA SM120/SM121 supports only flashinfer_sparse_mla "
        "(default) or triton_sparse_mla (prefill), but got ['trtllm']."
    ) in log
    assert "Received sigquit from a child process. It usually means the child failed." in log
    assert "Uvicorn running" not in log  # died in scheduler init, before the port was bound


def test_oom_during_graph_capture(standin: StandinFactory) -> None:
    server = standin.start(GLM, fault="oom")
    assert server.wait_exit() == KILLED
    log = server.log()
    assert "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB." in log
    assert "Exception: Capture cuda graph failed: CUDA out of memory." in log
    assert "Received sigquit from a child process. It usually means the child failed." in log
    assert "Uvicorn running" not in log


def test_hang_comes_up_then_never_answers(standin: StandinFactory) -> None:
    server = standin.start(GLM, fault="hang")
    server.wait_ready()
    for path in ("/health", "/generate"):
        with pytest.raises((TimeoutError, socket.timeout, urllib.error.URLError)):
            server.request(
                "GET" if path == "/health" else "POST",
                path,
                None if path == "/health" else SAMPLED,
                timeout=2,
            )
    assert server.request("GET", "/model_info").status == 200  # the HTTP server itself is alive
    assert server.stop() == 0


def test_slow_start_loads_then_serves(standin: StandinFactory) -> None:
    server = standin.start(GLM, fault="slow_start", load_seconds=1)
    server.wait_ready()
    log = server.log()
    elapsed = float(log.split("Load weight end. elapsed=")[1].split(" s")[0])
    assert elapsed >= 1.0
    assert log.index("Load weight begin") < log.index("Load weight end") < log.index("Uvicorn running on")


def test_override_reports_another_decode_backend(standin: StandinFactory) -> None:
    args = [*GLM, "--kv-cache-dtype", "fp8_e4m3", "--dsa-decode-backend", "flashinfer_sparse_mla"]
    server = standin.start(args, fault="override")
    server.wait_ready()
    assert server.request("GET", "/server_info").json()["dsa_decode_backend"] == "trtllm"
    assert (
        "Set DSA backends for fp8_e4m3 KV Cache: prefill=flashinfer_sparse_mla, decode=trtllm."
        in server.log()
    )


def test_sigterm_during_load_exits_0(standin: StandinFactory) -> None:
    server = standin.start(GLM, load_seconds=600)
    server.wait_for("Load weight begin")
    server.proc.send_signal(signal.SIGTERM)
    assert server.wait_exit(timeout=15) == 0


def test_sglang_shim_runs_the_standin(tmp_path: object) -> None:
    """``python -m sglang.launch_server`` through a shim package like the stand-in image's."""
    from pathlib import Path

    from bwstack.build import standin_image

    shim = Path(str(tmp_path)) / "shim" / "sglang"
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text(standin_image.shim_init("0.5.23"))
    (shim / "launch_server.py").write_text(standin_image.SHIM_LAUNCH_SERVER)
    env = {
        "PYTHONPATH": f"{shim.parent}:{ROOT / 'src'}",
        "BWSTACK_STANDIN_ARGS": str(snapshot_path("0.5.23")),
        "PATH": "/usr/bin:/bin",
    }
    result = subprocess.run(
        [sys.executable, "-m", "sglang.launch_server", *GLM, "--bogus"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert "sglang serve: error: unrecognized arguments: --bogus" in result.stderr
    version = subprocess.run(
        [sys.executable, "-c", "import sglang; print(sglang.__version__, sglang.BWSTACK_STANDIN)"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert version.stdout.split() == ["0.5.23", "True"]
