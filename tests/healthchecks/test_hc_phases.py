"""The phase of a start, told from the server's own log (healthchecks/phases.py), on real logs: the CPU server's
real starts of SGLang 0.5.9 and 0.5.23 (startup_corpus/, SOURCES.md) and public GPU logs (corpus/, README.md);
and a quiet JIT compile (a real compiler process alive) that is ``starting``, not ``crash`` (first-contact-2 R4).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from test_hc_starting_vs_dead import refused_url
from test_hc_warmup import assert_unhealthy, run_hc

from healthchecks import phases

HERE = Path(__file__).resolve().parent
STARTUP = HERE / "startup_corpus"
CORPUS = HERE / "corpus"


def _lines(path: Path) -> list[str]:
    """The log's lines as a pipe delivers them: tqdm's \r updates stay inside their line."""
    return path.read_bytes().decode("utf-8", errors="replace").split("\n")


def _walk(path: Path) -> tuple[list[tuple[str | None, str]], phases.Progress]:
    """Every (phase, detail) the log goes through, in order, and the final progress."""
    reader = phases.PhaseReader()
    seen: list[tuple[str | None, str]] = []
    for line in _lines(path):
        reader.feed(line)
        found = reader.progress()
        if not seen or seen[-1] != (found.phase, found.detail):
            seen.append((found.phase, found.detail))
    return seen, reader.progress()


def test_the_cpu_servers_real_0_5_9_start() -> None:
    seen, found = _walk(STARTUP / "cpu-v0.5.9_tiny-llama.log")
    assert seen == [
        ("launch", ""),
        ("weights", ""),  # Load weight begin. avail mem=21.51 GB
        ("weights", "shard 0/1"),  # Loading safetensors checkpoint shards:   0% Completed | 0/1
        ("weights", "shard 1/1"),
        ("kv_cache", "weights took 0.00 GB"),  # Load weight end. … mem usage=0.00 GB.
        ("kv_cache", "4096 tokens, 0.00 GB"),  # KV Cache is allocated. #tokens: 4096, K size: …, V size: …
        ("first_decode", ""),  # Uvicorn running on http://127.0.0.1:31777
        ("ready", ""),  # The server is fired up and ready to roll!
    ]
    # 16:19:11 first stamp, 16:19:32 weights, KV cache and HTTP server, 16:19:59 ready (SGLang's warmup decode)
    assert found.seconds == {"launch": 21.0, "weights": 0.0, "kv_cache": 0.0, "first_decode": 27.0}
    assert found.record()["total_s"] == 48.0 and found.starts == 1
    assert found.line() == "ready after 48 s (launch 21 s, weights 0 s, kv_cache 0 s, first_decode 27 s)"


def test_the_cpu_servers_real_0_5_23_start() -> None:
    """0.5.23: the tqdm bar of ``Multi-thread loading shards`` comes as ``\\r`` pieces of one line, the KV
    line names its dtype."""
    seen, found = _walk(STARTUP / "cpu-v0.5.23_tiny-llama.log")
    assert seen == [
        ("launch", ""),
        ("weights", ""),
        ("weights", "shard 1/1"),  # both \r pieces of one line: the last one holds
        ("kv_cache", "weights took -0.01 GB"),  # SGLang's own figure on the CPU engine
        ("kv_cache", "4096 tokens, 0.00 GB"),  # KV Cache is allocated. dtype: torch.bfloat16, #tokens: 4096
        ("first_decode", ""),
        ("ready", ""),
    ]
    # 16:17:57 first stamp … 16:18:32 Load weight begin; SGLang's own "tokenizer_e2e=28.4" covers most of it
    assert found.seconds == {"launch": 35.0, "weights": 0.0, "kv_cache": 0.0, "first_decode": 2.0}


def test_the_current_phase_counts_up_to_now_on_the_callers_clock() -> None:
    """What ``bwstack up`` and the sweep show live: the clock is the caller's (``at``), not the log's."""
    reader = phases.PhaseReader()
    lines = _lines(STARTUP / "cpu-v0.5.9_tiny-llama.log")
    cut = next(i for i, line in enumerate(lines) if "Load weight begin" in line)
    for second, line in enumerate(lines[: cut + 1]):
        reader.feed(line, at=1000.0 + second)
    found = reader.progress(now=1000.0 + cut + 100)
    assert found.phase == "weights"
    assert found.seconds == {"launch": float(cut), "weights": 100.0}
    assert found.line() == f"loading weights for 100 s (launch {cut} s)"


def test_cuda_graph_capture_from_public_gpu_logs() -> None:
    # sgl-project/sglang#17392: one bar update per line, batch size and done/total
    seen, _ = _walk(CORPUS / "sglang17392_ep_moe_capturing_batches_progress.log")
    assert ("cuda_graph", "") in seen
    assert ("cuda_graph", "1/6 batch sizes (bs=16)") in seen
    assert seen[-1] == ("cuda_graph", "6/6 batch sizes (bs=1)")
    # the raw tqdm stream of a MiniMax start: every update a \r piece of one line
    seen, _ = _walk(CORPUS / "minimax50_capturing_batches_progress.log")
    assert seen[-1] == ("cuda_graph", "30/36 batch sizes (bs=24)")
    # sgl-project/sglang#19718: 0.5.9's batch-size list gives the total; the KV cache of two pools
    seen, found = _walk(CORPUS / "sglang19718_gpt_oss_pro6000_capture_piecewise.log")
    assert ("kv_cache", "318715 tokens, 10.94 GB") in seen
    assert ("cuda_graph", "0/36 batch sizes") in seen
    assert ("cuda_graph", "36/36 batch sizes (bs=1)") in seen
    assert found.seconds["cuda_graph"] == 70.0  # 08:43:46 begin .. 08:44:56 end, then the piecewise capture


def test_weight_shards_from_a_public_log() -> None:
    seen, _ = _walk(CORPUS / "olmocr105_4090_wsl_loading_shards.log")  # allenai/olmocr#105
    assert seen[-3:] == [("weights", "shard 0/4"), ("weights", "shard 1/4"), ("weights", "shard 2/4")]


def test_a_jit_compile_interrupts_a_phase_and_the_phase_resumes() -> None:
    reader = phases.PhaseReader()
    # the real FlashInfer line of sgl-project/sglang (corpus sglang_watchdog_dp1_tp0_2025.log)
    jit_line = _lines(CORPUS / "sglang_watchdog_dp1_tp0_2025.log")[0]
    assert "flashinfer.jit: Loading JIT ops: cascade" in jit_line
    capture = _lines(CORPUS / "sglang17392_ep_moe_capturing_batches_progress.log")
    reader.feed(capture[0], at=0.0)  # Capture cuda graph begin
    reader.feed(jit_line, at=10.0)
    assert (reader.phase, reader.detail) == ("jit", "FlashInfer cascade")
    reader.feed(capture[4], at=40.0)  # Capturing batches (bs=16 …): 17% | 1/6
    found = reader.progress()
    assert (found.phase, found.detail) == ("cuda_graph", "1/6 batch sizes (bs=16)")
    assert found.seconds == {"launch": 0.0, "cuda_graph": 10.0, "jit": 30.0}


@pytest.mark.parametrize(
    ("line", "detail"),
    [
        # FlashInfer 0.7.2 jit/core.py JitSpec.build (its logger's format: asctime - level - file:line - name)
        (
            "2026-12-04 10:00:00,000 - INFO - core.py:594 - flashinfer.jit: Building JIT module "
            "fused_moe_sm120; this can take several minutes on first use.",
            "FlashInfer fused_moe_sm120",
        ),
        # SGLang 0.5.9 / 0.5.23 layers/deep_gemm_wrapper/compile_utils.py
        (
            "[2026-12-04 10:00:00 TP0] Try DeepGEMM JIT Compiling for <GEMM_NT_F8F8BF16> N=7168, K=2048, "
            "num_groups=1 with all Ms.",
            "DeepGEMM GEMM_NT_F8F8BF16 N=7168 K=2048",
        ),
        (
            "[2026-12-04 10:00:00 TP0] Entering DeepGEMM JIT Pre-Compile session. It may take a long time",
            "DeepGEMM pre-compile",
        ),
        ("DeepGEMM warmup:  25%|██▌       | 1024/4096 [00:10<00:30, 99.0it/s]", "DeepGEMM warmup 1024/4096"),
        # SGLang srt/compilation/backend.py
        ("[2026-12-04 10:00:00 TP0] Compiling a graph for dynamic shape takes 41.20 s", "torch.compile"),
    ],
)
def test_the_jit_wordings_of_the_wheels(line: str, detail: str) -> None:
    reader = phases.PhaseReader()
    reader.feed(line)
    assert (reader.phase, reader.detail) == ("jit", detail)


def test_a_restart_in_the_same_log_counts_again() -> None:
    """``docker logs`` of a restarted container holds both starts: the last one counts."""
    log = _lines(STARTUP / "cpu-v0.5.9_tiny-llama.log")
    second = [line for line in log if not line.startswith("bwstack-serve: server stopped")]
    reader = phases.PhaseReader()
    for line in [*log, *second[: next(i for i, ln in enumerate(second) if "Load weight begin" in ln) + 1]]:
        reader.feed(line)
    found = reader.progress()
    assert found.starts == 2 and found.phase == "weights" and "first_decode" not in found.seconds


def test_docker_timestamps_date_every_line() -> None:
    """``docker logs --timestamps``: Docker's stamp wins over SGLang's, tqdm lines get one too."""
    from bwstack.host.startlog import StartLog

    watch = StartLog("unused")
    log = _lines(STARTUP / "cpu-v0.5.23_tiny-llama.log")
    cut = next(i for i, line in enumerate(log) if "Multi-thread" in line)
    text = "\n".join(
        f"2026-12-04T10:{i // 60:02d}:{i % 60:02d}.000000000Z {ln}" for i, ln in enumerate(log[: cut + 1])
    )
    watch.feed(text)
    watch.feed(text)  # --since repeats what was read: counted once
    found = watch.reader.progress()
    assert (found.phase, found.detail) == ("weights", "shard 1/1")
    load_begin = next(i for i, line in enumerate(log) if "Load weight begin" in line)
    assert found.seconds == {"launch": float(load_begin), "weights": float(cut - load_begin)}
    now = datetime(2026, 12, 4, 10, 0, 0, tzinfo=UTC).timestamp() + cut + 5  # on the host's clock, as up's
    assert (
        watch.line(now) == f"loading weights: shard 1/1 for {cut + 5 - load_begin} s (launch {load_begin} s)"
    )


def test_record_words_for_the_report_and_list() -> None:
    _, found = _walk(STARTUP / "cpu-v0.5.9_tiny-llama.log")
    assert phases.record_words(found.record()) == (
        "launch 21 s, weights 0 s, kv_cache 0 s, first_decode 27 s; ready after 48 s"
    )
    _, stopped = _walk(CORPUS / "olmocr105_4090_wsl_loading_shards.log")
    assert phases.record_words(stopped.record()).endswith("stopped in weights (shard 2/4)")
    assert phases.record_words(None) == ""


# --- a quiet JIT compile -------------------------------------------------------------------------------------


SERVER = """import subprocess, sys
child = subprocess.Popen(sys.argv[1:])
print(child.pid, flush=True)
child.wait()
"""


class Compile:
    """A real compiler process run by a process that names sglang (as the server runs its JIT compiles)."""

    def __init__(self, tmp_path: Path, argv: list[str], cwd: Path | None = None) -> None:
        server = tmp_path / "sglang_launch_server.py"
        server.write_text(SERVER, encoding="utf-8")
        self.server = subprocess.Popen(
            [sys.executable, str(server), *argv], stdout=subprocess.PIPE, text=True, cwd=cwd or tmp_path
        )
        assert self.server.stdout is not None
        self.pid = int(self.server.stdout.readline())

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        self.server.wait(timeout=10)  # it reaps the compiler and exits


def _named(tmp_path: Path, name: str) -> Path:
    """A copy of ``sleep`` called ``name``: /proc shows the executable's name, as for a real nvcc."""
    target = tmp_path / "bin" / name
    target.parent.mkdir(exist_ok=True)
    sleep = shutil.which("sleep")
    assert sleep is not None
    shutil.copy(sleep, target)
    return target


@pytest.fixture()
def compiler(tmp_path: Path) -> Iterator[Compile]:
    running = Compile(tmp_path, [str(_named(tmp_path, "nvcc")), "120"])
    try:
        yield running
    finally:
        running.stop()


def _until(check: Callable[[], bool]) -> bool:
    deadline = time.monotonic() + 5
    while not check() and time.monotonic() < deadline:
        time.sleep(0.05)
    return check()


def test_compiling_finds_the_servers_live_compiler_only(compiler: Compile, tmp_path: Path) -> None:
    assert f"nvcc pid {compiler.pid}" in phases.compiling()
    stray = subprocess.Popen([str(_named(tmp_path, "ptxas")), "60"])  # not run by SGLang: a neighbour's build
    try:
        assert not any(f"pid {stray.pid}" in found for found in phases.compiling())
    finally:
        stray.kill()
        stray.wait()
    compiler.stop()  # killed and reaped
    assert _until(lambda: f"nvcc pid {compiler.pid}" not in phases.compiling())


def test_a_python_module_compiling_kernels_counts(tmp_path: Path) -> None:
    (tmp_path / "flashinfer_jit_build.py").write_text("import time\ntime.sleep(60)\n", encoding="utf-8")
    running = Compile(tmp_path, [sys.executable, "-m", "flashinfer_jit_build"])
    try:
        assert _until(lambda: f"python -m flashinfer_jit_build pid {running.pid}" in phases.compiling())
    finally:
        running.stop()


def test_a_quiet_log_while_a_compiler_runs_is_starting_not_crash(tmp_path: Path, compiler: Compile) -> None:
    """R4: a first-boot nvcc compile keeps the log unchanged past --stall-after; the healthcheck (in the
    container's PID namespace) sees the compiler and says starting. Once it is gone, the same log is a crash."""
    log = tmp_path / "server.log"
    log.write_text("\n".join(_lines(STARTUP / "cpu-v0.5.9_tiny-llama.log")[:40]) + "\n", encoding="utf-8")
    two_hours_ago = time.time() - 7200
    os.utime(log, (two_hours_ago, two_hours_ago))
    reason = assert_unhealthy(run_hc(tmp_path, refused_url()), "starting")
    assert "has not changed for" in reason and f"a JIT compile is running (nvcc pid {compiler.pid}" in reason
    compiler.stop()
    reason = assert_unhealthy(run_hc(tmp_path, refused_url()), "crash")
    assert "--stall-after 900s" in reason
