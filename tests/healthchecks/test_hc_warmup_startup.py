"""The healthcheck's first look at the server log's startup record (warmup.startup_look), run as Docker runs it."""

from __future__ import annotations

import shutil
from pathlib import Path

from test_hc_warmup import assert_unhealthy, run_hc

from support.hc_fakes import FakeSGLang, free_port

CORPUS = Path(__file__).resolve().parent / "startup_corpus"


def test_override_is_read_from_the_log_before_the_server_listens(tmp_path: Path) -> None:
    shutil.copy(CORPUS / "sglang-29562_glm52-nvfp4_sm120.log", tmp_path / "server.log")
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens: /server_info can never answer
    result = run_hc(tmp_path, url, "--expect", "kv_cache_dtype=bf16", "--expect", "attention_backend=dsa")
    reason = assert_unhealthy(result, "backend_override")
    assert (
        reason
        == "kv_cache_dtype: requested bfloat16 (--expect), effective fp8_e4m3 (line 5) in the server log"
    )


def test_a_matching_log_leaves_the_verdict_to_the_server(tmp_path: Path) -> None:
    shutil.copy(CORPUS / "cpu-v0.5.23_tiny-llama.log", tmp_path / "server.log")
    with FakeSGLang(era="0.5.23") as fake:
        result = run_hc(
            tmp_path, fake.url, "--expect", "attention_backend=torch_native,kv_cache_dtype=bfloat16"
        )
    # the log agrees; the (fake) server's /server_info then reports attention_backend=dsa, which decides
    assert_unhealthy(result, "backend_override")
    assert "in the server log" not in result.last


def test_without_expect_or_without_a_log_nothing_changes(tmp_path: Path) -> None:
    with FakeSGLang(era="0.5.23") as fake:
        assert run_hc(tmp_path, fake.url).code == 0
        assert run_hc(tmp_path, fake.url, "--expect", "attention_backend=dsa").code == 0
