"""The structural rules (healthchecks/signatures/structure.py) and the clean stop (evidence.STOPPED).

The logs are real-shaped: SGLang's own lines as the 0.5.22 wheel writes them (tokenizer_manager.py's SIGTERM
handler, cuda_graph_setup.py's capture lines), FlashInfer's JIT frames (flashinfer/jit/cpp_ext.py run_ninja),
torch.distributed's store; each through the real scanner.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from healthchecks.signatures import catalog, paste, structure

from healthchecks import signatures

HERE = Path(__file__).resolve().parent
START = "[2026-12-01 10:00:00] server_args=ServerArgs(model_path='Qwen/Qwen3-8B', tp_size=1)\n"
DECODE = (
    "[2026-12-01 10:05:{s:02d} TP0] Decode batch, #running-req: 5, #token: 20800, token usage: 0.29, cuda graph: "
    "True, gen throughput (token/s): 144.95, #queue-req: 0\n"
)
SERVED = START + "".join(DECODE.format(s=s) for s in range(6))
NINJA = """Traceback (most recent call last):
  File "/usr/local/lib/python3.12/dist-packages/flashinfer/jit/core.py", line 109, in build
    run_ninja(jit_env.FLASHINFER_JIT_DIR, self.ninja_path, verbose)
  File "/usr/local/lib/python3.12/dist-packages/flashinfer/jit/cpp_ext.py", line 168, in run_ninja
    subprocess.run(
  File "/usr/lib/python3.12/subprocess.py", line 1955, in _execute_child
    raise child_exception_type(errno_num, err_msg, err_filename)
FileNotFoundError: [Errno 2] No such file or directory: '/opt/venv/bin/ninja-1.11'
"""
STORE = """Traceback (most recent call last):
  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/model_executor/model_runner.py", line 553, in init
    init_distributed_environment(
  File "/usr/local/lib/python3.12/dist-packages/torch/distributed/distributed_c10d.py", line 1702, in init
    store, rank, world_size = next(rendezvous_iterator)
torch.distributed.DistNetworkError: failed to recv, got 0 bytes from the store at node-0:5000
"""


def test_a_jit_builds_missing_tool_is_a_failed_build_by_its_frames() -> None:
    scanner = signatures.scan_text(START + NINJA)
    match = scanner.result()
    assert match is not None and (match.cls, match.line) == ("kernel_compile", 9)
    found = scanner.structure()
    assert (found.exception, found.function) == ("FileNotFoundError", "_execute_child")
    assert found.frames[1].endswith("flashinfer/jit/cpp_ext.py")


def test_the_same_exception_elsewhere_stays_a_crash() -> None:
    other = NINJA.replace("flashinfer/jit/core.py", "sglang/srt/utils.py").replace(
        "flashinfer/jit/cpp_ext.py", "sglang/srt/hf_utils.py"
    )
    match = signatures.scan_text(START + other).result()
    assert match is not None and match.cls == "crash"


def test_a_store_failure_raised_in_torch_distributed_is_nccl() -> None:
    match = signatures.scan_text(START + STORE).result()
    assert match is not None and match.cls == "nccl"


DLOPEN = """Traceback (most recent call last):
  File "/usr/local/lib/python3.10/dist-packages/torch/utils/cpp_extension.py", line 2250, in _import_module_from_library
    torch.ops.load_library(filepath)
  File "/usr/local/lib/python3.10/dist-packages/torch/_ops.py", line 1357, in load_library
    ctypes.CDLL(path)
  File "/usr/lib/python3.10/ctypes/__init__.py", line 374, in __init__
    self._handle = _dlopen(self._name, mode)
OSError: /root/.cache/flashinfer/90/cached_ops/batch_prefill/batch_prefill.so: undefined symbol: _ZN3c10
"""
MODULE_ATTRIBUTE = """Traceback (most recent call last):
  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/layers/quantization/fp8_kernel.py", line 40, in <module>
    fp8_type_ = tl.float8e4b8
AttributeError: module 'triton.language' has no attribute 'float8e4b8'
"""


def test_a_library_that_cannot_be_loaded_is_an_import_error_by_its_frames() -> None:
    """An OSError raised by ctypes' dlopen (a built or cached extension that does not load) is import_error;
    the same OSError raised elsewhere (a disk full) stays a crash."""
    match = signatures.scan_text(START + DLOPEN).result()
    assert match is not None and (match.cls, match.line) == ("import_error", 9)
    cut = DLOPEN.replace(": undefined symbol: _ZN3c10", "")[: DLOPEN.index("batch_prefill.so") - 10]
    match = signatures.scan_text(START + cut + "\n").result()  # the message cut before its reason
    assert match is not None and match.cls == "import_error"
    other = cut.replace("/usr/lib/python3.10/ctypes/__init__.py", "/sgl/srt/utils.py") + "\n"
    match = signatures.scan_text(START + other).result()
    assert match is not None and match.cls == "crash"


def test_a_module_without_the_attribute_asked_for_is_an_import_error_and_an_object_without_one_a_crash() -> (
    None
):
    match = signatures.scan_text(START + MODULE_ATTRIBUTE).result()
    assert match is not None and (match.cls, match.line) == ("import_error", 5)
    other = MODULE_ATTRIBUTE.replace("module 'triton.language'", "'NoneType' object")
    match = signatures.scan_text(START + other).result()
    assert match is not None and match.cls == "crash"


LOAD = """Traceback (most recent call last):
  File "/sgl-workspace/sglang/python/sglang/srt/model_loader/loader.py", line 381, in load_model
    self.load_weights_and_postprocess(
  File "/sgl-workspace/sglang/python/sglang/srt/models/deepseek_vl2.py", line 252, in load_weights
    param = params_dict[name]
            ~~~~~~~~~~~^^^^^^
KeyError: 'lm_head.weight'
"""
SIGQUIT = "[2026-12-01 10:00:09] Received sigquit from a child process. It usually means the child failed.\n"


def test_a_weight_the_model_does_not_know_is_model_load_by_the_loader_function() -> None:
    """Round 7: the exception type with the function that raised it (any model's load_weights)."""
    for text in (LOAD, LOAD.split("\n", 3)[3]):  # whole, and an excerpt that starts at the last frame
        match = signatures.scan_text(START + text + SIGQUIT).result()
        assert match is not None and (match.cls, match.text) == ("model_load", "KeyError: 'lm_head.weight'")
    elsewhere = (
        LOAD.replace("in load_weights", "in forward")
        .replace("in load_model", "in run_batch")
        .replace("model_loader/loader.py", "managers/scheduler.py")
    )
    match = signatures.scan_text(START + elsewhere + SIGQUIT).result()
    assert match is not None and match.cls == "crash"


def test_a_shape_that_does_not_fit_inside_a_weight_loader_is_model_load() -> None:
    copy = LOAD.replace(
        "KeyError: 'lm_head.weight'",
        (
            "RuntimeError: The size of tensor a (4096) must match the size of tensor b (2048) at non-singleton "
            "dimension 0"
        ),
    ).replace("in load_weights", "in weight_loader")
    match = signatures.scan_text(START + copy + SIGQUIT).result()
    assert match is not None and match.cls == "model_load"
    device = "RuntimeError: Expected all tensors to be on the same device, but found at least two devices"
    other = copy.replace(copy.split("\n")[-2], device)
    match = signatures.scan_text(START + other.replace("model_loader/loader.py", "x.py") + SIGQUIT).result()
    assert match is not None and match.cls == "crash"


def test_strong_crash_evidence_is_named_by_the_structure_also_live() -> None:
    """A child that died is strong evidence; the traceback above it only names the cause."""
    match = signatures.scan_text(START + LOAD + SIGQUIT).result(strong_only=True)
    assert match is not None and match.cls == "model_load"
    assert signatures.scan_text(START + LOAD).result(strong_only=True) is None


def test_a_restored_scan_reads_the_structure_from_the_log_it_is_given_back() -> None:
    """A saved scan keeps no text: the healthcheck gives the log's end back (logwatch.read_tail)."""
    cut = LOAD.index("\n", 200) + 1  # the healthcheck feeds whole lines
    saved = signatures.scan_text(START + LOAD[:cut]).to_state()
    scanner = signatures.Scanner.from_state(json.loads(json.dumps(saved)))
    scanner.feed(LOAD[cut:] + SIGQUIT)
    assert scanner.tail_missing()
    match = scanner.result()
    assert match is not None and match.cls == "crash"
    scanner.restore_tail(START + LOAD + SIGQUIT)
    assert not scanner.tail_missing()
    match = scanner.result()
    assert match is not None and match.cls == "model_load"


def test_a_live_healthcheck_does_not_count_a_traceback_by_its_structure() -> None:
    """Structural evidence of an uncaught exception is weak, as the traceback it reads."""
    assert signatures.scan_text(START + NINJA).result(strong_only=True) is None


def test_the_died_process_and_the_last_errors_are_read() -> None:
    log = START + (
        "[2026-12-01 10:00:09] ERROR: Subprocess scheduler_0 (pid=4242) crashed with exit code -9\n"
        "[2026-12-01 10:00:09] Received sigquit from a child process. It usually means the child failed.\n"
    )
    found = signatures.scan_text(log).structure()
    assert (found.exit, found.died_line) == ("-9", 2)
    assert [line for line, _ in found.errors] == [2]
    assert json.loads(json.dumps(found.to_dict()))["exit"] == "-9"


def test_a_capture_that_never_returned_by_the_logs_clock_is_a_timeout() -> None:
    log = START + (
        "[2026-12-01 10:01:00 TP0] Capture target decode CUDA graph begin. backend=full, avail mem=12.01 GB\n"
        "[2026-12-01 10:37:00 TP0] Registering 0 cuda graph addresses\n"
    )
    assert signatures.scan_text(log).verdict() == "timeout"
    ended = log + "[2026-12-01 10:37:01 TP0] Capture target decode CUDA graph end. Time elapsed: 2161 s\n"
    assert signatures.scan_text(ended).verdict() == "starting"
    short = log.replace("10:37:00", "10:02:00")
    assert signatures.scan_text(short).verdict() == "starting"


def test_a_collapsed_output_is_garbage_also_while_alive() -> None:
    log = (
        SERVED
        + "[2026-12-01 10:06:00] Finish: obj=GenerateReqInput(rid='a'), out={'text': '"
        + "!" * 200
        + "'}\n"
    )
    scanner = signatures.scan_text(log)
    match = scanner.result(strong_only=True)
    assert match is not None and (match.cls, match.line) == ("garbage", 8)
    assert signatures.scan_text(SERVED + "[x] out={'text': '!!!'}\n").verdict() == "healthy"


@pytest.mark.parametrize(
    "stop",
    [
        "[2026-12-01 10:06:00] SIGTERM received. signum=15 frame=None. Draining requests and shutting down...",
        "[2026-12-01 10:06:00] Gracefully exiting... Remaining number of requests 0. Remaining requests []",
        "[2026-12-01 10:06:01] INFO:     Finished server process [4242]",
        "[2026-12-01 10:06:02] Subprocess detokenizer (pid=4243) crashed with exit code -15",
        "Server process exited with code -15",
        # round 11: the launcher's join on a scheduler it stopped (sglang 0.5.23 srt/entrypoints/engine.py)
        "[2026-12-01 10:06:02] Scheduler or DataParallelController 4243 terminated with -15",
        # round 4 (in-sample): the scheduler's own handler in sgl-project/sglang#16484 (an open PR)
        "SIGTERM received in scheduler process (TP0 PP0); exiting normally to allow cleanup...",
    ],
)
def test_a_clean_stop_after_serving_is_healthy_not_crash(stop: str) -> None:
    scanner = signatures.scan_text(SERVED + stop + "\n")
    assert scanner.verdict() == "healthy"
    assert scanner.stopped


def test_every_clean_stop_word_is_found_by_the_folded_prefilter() -> None:
    """A chunk is searched for STOPPED only when its folded text holds one of _STOP_FOLDED: each word must."""
    for word in signatures.STOPPED:
        folded = bytes(c for c in word if chr(c).isalpha())
        assert any(stop in folded for stop in catalog.STOP_FOLDED), word


def test_a_clean_stop_survives_a_saved_scan_and_a_new_run_forgets_it() -> None:
    scanner = signatures.scan_text(START + "[2026-12-01 10:00:05] Gracefully exiting... Remaining 0\n")
    restored = signatures.Scanner.from_state(json.loads(json.dumps(scanner.to_state())))
    assert restored.verdict() == "healthy"
    restored.feed(START)
    assert restored.verdict() == "starting"


def test_a_forced_exit_on_sigterm_is_no_clean_stop_and_a_kill_stays_a_crash() -> None:
    forced = (
        SERVED + "[2026-12-01 10:06:00] Signal SIGTERM received while health check failed. Force exiting.\n"
    )
    assert not signatures.scan_text(forced).stopped
    killed = SERVED + "[2026-12-01 10:06:02] Subprocess scheduler_0 (pid=4242) crashed with exit code -9\n"
    assert signatures.scan_text(killed).verdict() == "crash"


def test_structure_reads_only_the_end() -> None:
    assert structure.TAIL >= 32 * 1024
    scanner = signatures.Scanner()
    scanner.feed(START + NINJA)
    for _ in range(200):  # ~1 MB of serving after the traceback: the traceback left the kept tail
        scanner.feed("".join(DECODE.format(s=s) for s in range(50)))
    assert scanner.structure().exception == ""


def test_a_cut_traceback_gives_way_to_the_log_and_levels_count_as_pasted() -> None:
    """Frames without their header (a paste starting inside a traceback), cut before the exception line; the
    log goes on with a logger's ERROR line (the level is paste noise to the signatures, not to the structure)."""
    log = (
        '  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/managers/scheduler.py", line 2677, in run\n'
        "    scheduler.event_loop_overlap()\n"
        "2026-12-01 10:00:09,531 - sglang.srt.entrypoints.engine - ERROR - Received sigquit from a child "
        "process. It usually means the child failed.\n"
        "2026-12-01 10:00:09,600 - __main__ - INFO - Server process exited with code -9\n"
    )
    found = signatures.scan_text(log).structure()
    assert found.exception == "" and (found.exit, found.died_line) == ("-9", 4)
    assert [line for line, _ in found.errors] == [3] and "- ERROR -" in found.errors[0][1]


PREFILL = (
    "[2025-02-19 11:45:37 TP0] Prefill batch. #new-seq: 1, #new-token: 1, #cached-token: 0, cache hit rate: "
    "0.00%, token usage: 0.00, #running-req: 0, #queue-req: 0\n"
)


@pytest.mark.parametrize(
    "cut",
    [
        "Trace",
        "Traceb",
        "Traceback (most recent call last",
        "[2025-04-29 07:35:49 DP6 TP6] TpModelWorkerClient hit an ex",
        "[2025-04-29 07:35:49 TP0] Scheduler hit an exception:",
        # round 19: CPython's header of a chained exception's traceback, whole or cut (Lib/traceback.py)
        "The above exception was the direct cause of the following exception:",
        "During handling of the above exception, another",
    ],
)
def test_a_paste_cut_inside_a_fatal_header_is_a_crash(cut: str) -> None:
    """Round 12 (in-sample: round 10's sgl-project/sglang#3695 and #5858): an excerpt that ends where a
    traceback or SGLang's 'hit an exception' began is a process dying, as a person reads it."""
    found = structure.read(PREFILL + cut + "\n")
    assert found.cut_line == 2
    explained = structure.explain(found)
    assert explained is not None and explained[0].cls == "crash"
    assert signatures.scan_text(START + PREFILL + cut + "\n").result() is not None


@pytest.mark.parametrize(
    "line",
    [
        "Tra",  # too short to read as anything
        "Trace the request through the router",
        "Tracer: initialised",
        "[2025-04-29 07:35:49 TP0] the router hit an ex-colleague",  # not a component's header
        "hit an ex",  # no component
        "The above exc",  # too short to say which header
        "During handling of the request, the router retried",
    ],
)
def test_a_last_line_that_only_looks_like_a_cut_header_is_not(line: str) -> None:
    found = structure.read(PREFILL + line + "\n")
    assert found.cut_line == 0
    assert signatures.scan_text(START + PREFILL + line + "\n").result() is None


def test_a_cut_header_above_the_last_line_is_no_evidence() -> None:
    """Only the excerpt's end: 'Trace' followed by more log is not a cut (the log went on)."""
    assert structure.read("Trace\n" + PREFILL).cut_line == 0


def test_a_piece_of_cpythons_fatal_module_list_is_a_crash_and_a_short_list_is_not() -> None:
    """Round 12 (in-sample: round 10's gpustack/gpustack#5641): a piece of CPython's 'Extension modules:'
    line pasted alone, neither its head nor its tail in view."""
    piece = (
        "orized, pandas._libs.ops_dispatch, pandas._libs.missing, pandas._libs.hashtable, pandas._libs.algos, "
        "pandas._libs.interval, pandas._libs.lib, pyarrow._compute, pandas._libs.ops, pandas._libs.hashing\n"
    )
    found = structure.read(piece)
    assert found.modules_line == 1
    explained = structure.explain(found)
    assert explained is not None and explained[0].cls == "crash"
    short = "imports: numpy.linalg, torch.cuda, os.path, json.decoder\n"
    assert structure.read(short).modules_line == 0
    words = "ready, set, go, a, b, c, d, e, f, g, h, i\n"  # commas without dotted names
    assert structure.read(words).modules_line == 0


LOADER_ASSERT = (
    'sg_env/lib/python3.10/site-packages/sglang/srt/layers/linear.py", line 1226, in weight_loader\n'
    "    assert param_data.shape == loaded_weight.shape\n"
    "AssertionError\n"
)


def test_a_paste_that_starts_inside_a_frame_reads_that_frame() -> None:
    """Round 13 (in-sample, sgl-project/sglang#4431): the excerpt starts inside a weight loader's frame line;
    its bare AssertionError is the loader refusing a weight of another shape (model_load), not an assert."""
    found = structure.read(LOADER_ASSERT)
    assert (found.exception, found.function, found.exception_line) == ("AssertionError", "weight_loader", 3)
    match = signatures.scan_text(LOADER_ASSERT).result()
    assert match is not None and match.cls == "model_load"
    # the same lines later in a log are no cut frame: only a paste's first line can be one
    assert structure.read(PREFILL + LOADER_ASSERT).exception == ""
    elsewhere = LOADER_ASSERT.replace("in weight_loader", "in forward")
    match = signatures.scan_text(elsewhere).result()
    assert match is not None and match.cls == "assertion"


@pytest.mark.parametrize(("cut", "cls"), [("AssertionErro", "assertion"), ("Assert", "assertion")])
def test_a_paste_cut_inside_the_exception_type_names_it(cut: str, cls: str) -> None:
    """Round 13 (in-sample, sgl-project/sglang#19503): the frames, the assert's source line, and the excerpt
    cut inside 'AssertionError'."""
    text = (
        '  File "/sgl-workspace/sglang/python/sglang/srt/model_executor/model_runner.py", line 426, in '
        "__init__\n    self.support_pp\n" + cut + "\n"
    )
    found = structure.read(text)
    assert found.exception == "AssertionError"
    match = signatures.scan_text(text).result()
    assert match is not None and match.cls == cls
    assert structure.read(text + PREFILL).exception == ""  # not the excerpt's end: the log went on
    assert structure.read(text.replace(cut, "Asse")).exception == ""  # too short to name a type


ASGI = (
    "[2025-04-03 20:54:05] ERROR:    Exception in ASGI application\n"
    "Traceback (most recent call last):\n"
    '  File "/sgl-workspace/sglang/python/sglang/srt/openai_api/adapter.py", line 958, in v1_chat_generate\n'
    "    prompt_ids = tokenizer_manager.tokenizer.apply_chat_template(\n"
)


def test_one_failed_request_while_the_server_answers_is_no_crash() -> None:
    """Round 13 (in-sample, sgl-project/sglang#3552): uvicorn's 'Exception in ASGI application' opens one
    request's traceback; with the server answering requests (its 500 for that one), the run is healthy."""
    answered = '[2025-04-03 20:54:05] INFO:     127.0.0.1:40000 - "POST /v1/chat/completions HTTP/1.1" 500\n'
    scanner = signatures.scan_text(answered + ASGI)
    assert scanner.result() is None and scanner.verdict() == "healthy"
    cut = '1.1" 500 Internal Server Error\n'  # a paste that starts inside the answer's line
    assert signatures.scan_text(cut + ASGI).verdict() == "healthy"
    # no answer in view: the excerpt does not show the server living on (sgl-project/sglang#499's reading)
    assert signatures.scan_text(ASGI).verdict() == "crash"
    # a death notice after the request's traceback is the server's end
    died = "[2025-04-03 20:54:06] Received sigquit from a child process. It usually means the child failed.\n"
    assert signatures.scan_text(answered + ASGI + died).verdict() == "crash"


def test_an_exception_answered_at_once_by_its_requests_500_is_one_request() -> None:
    """Round 13 (in-sample, sgl-project/sglang-omni#214): the handler's exception line, then that request's
    500; an answer of the HTTP front alone proves nothing (sgl-project/sglang#17874: /health answers 200 while
    the scheduler is dead)."""
    raised = "RuntimeError: cannot access local variable 'audio_target_sr' where it is not associated with a value\n"
    failed = 'INFO:     127.0.0.1:51720 - "POST /v1/chat/completions HTTP/1.1" 500 Internal Server Error\n'
    assert signatures.scan_text(raised + failed).verdict() == "healthy"
    health = '[2026-01-28 08:52:46] INFO:     172.31.0.80:50570 - "GET /health HTTP/1.1" 200 OK\n'
    assert signatures.scan_text(raised + health * 3).verdict() == "crash"
    assert signatures.scan_text(raised + PREFILL * 3 + failed).verdict() == "crash"  # not that request's
    assert signatures.scan_text(failed + raised).verdict() == "crash"  # the error came after the answer


def test_rays_deduplicated_lines_count_as_the_lines_they_stand_for() -> None:
    """Round 13 (in-sample, THUDM/slime#1487): Ray folds repeated lines into one '[repeated 4x across
    cluster]'; three such metrics scrapes are fifteen."""
    line = (
        '(SGLangEngine pid=17467) [2026-03-24 06:36:52] INFO:     172.17.0.11:41646 - "GET /metrics HTTP/1.1" '
        "200 OK{}\n"
    )
    assert signatures.scan_text(line.format(" [repeated 4x across cluster]") * 3).verdict() == "healthy"
    assert signatures.scan_text(line.format("") * 3).verdict() == "starting"
    loading = (
        "(SGLangEngine pid=17467) [2026-03-24 06:36:52] Load weight begin. [repeated 9x across cluster]\n"
    )
    assert signatures.scan_text(line.format("") * 2 + loading).verdict() == "starting"  # not a serving line


def test_a_failure_the_server_falls_back_from_is_no_evidence() -> None:
    """Round 14 (in-sample, gpustack/gpustack#4026): an OOM loading a customized module, then 'falling back
    to native version' and the loading goes on: still starting. A later failure of another class counts."""
    oom = (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 30.00 MiB. GPU 0 has a total capacity "
        "of 31.35 GiB of which 25.50 MiB is free.\n"
    )
    fell = "[12-25 10:14:03] Error while loading customized transformer, falling back to native version\n"
    loading = "[12-25 10:14:03] Loaded transformer: ZImageTransformer2DModel from: native\n"
    assert signatures.scan_text(oom + fell + loading).verdict() == "starting"
    assert signatures.scan_text(oom + loading).verdict() == "oom"
    assert signatures.scan_text(oom + loading * 3 + fell).verdict() == "oom"  # not the failure's own sequel
    died = "[12-25 10:14:09] Received sigquit from a child process. It usually means the child failed.\n"
    assert signatures.scan_text(oom + fell + loading + died).verdict() == "oom"


def test_a_thread_dump_is_a_hang_only_when_a_timer_or_py_spy_made_it() -> None:
    """Round 14 (in-sample, sgl-project/sglang#17941; round 10's #6083, round 12's verl-project/verl#2965) and
    round 27 (in-sample: round 24's kvcache-ai/ktransformers#1694, round 26's sgl-project/sglang#23784):
    py-spy's dump and faulthandler's dump on a timer ('Timeout (..)!') read hang; faulthandler's dump without
    that header is a fatal signal's (SGLang only enables faulthandler for those): 'Current thread', 'Thread'
    and 'Fatal Python error' read crash; a traceback's threading.py frames are no dump."""
    dump = (
        "Thread 0x00007fce47ae1480 (most recent call first):\n"
        '  File "/usr/lib/python3.10/threading.py", line 320 in wait\n'
        '  File "/sgl-workspace/sglang/python/sglang/srt/managers/tp_worker_overlap_thread.py", line 167 in '
        "resolve_batch_result\n"
    )
    assert signatures.scan_text(dump).verdict() == "crash"
    assert signatures.scan_text("Timeout (0:05:00)!\n" + dump).verdict() == "hang"
    assert signatures.scan_text(
        "Fatal Python error: Aborted\n\n" + "Timeout (0:05:00)!\n" + dump
    ).verdict() == ("crash")
    current = dump.replace("Thread 0x00007fce47ae1480", "Current thread 0x00007f80908e0640")
    assert signatures.scan_text(dump + current).verdict() == "crash"
    fatal = "Fatal Python error: Segmentation fault\n\n"
    assert signatures.scan_text(fatal + dump).verdict() == "crash"
    frames = (
        'Traceback (most recent call last):\n  File "/usr/lib/python3.10/threading.py", line 320, in wait\n'
    )
    assert signatures.scan_text(frames).verdict() == "crash"
    pyspy = 'Thread 90256 (idle): "Thread-1"\n    wait (threading.py:359)\n'
    assert signatures.scan_text(pyspy).verdict() == "hang"
    # live, a dump is weak evidence: it counts only once the port is gone
    assert signatures.scan_text(pyspy).result(strong_only=True) is None


def test_sglangs_own_warmup_wait_is_warmup_failed_a_launchers_is_health_timeout() -> None:
    """Round 14 (in-sample, allenai/olmocr#82; round 7's sgl-project/sglang#28493 stays warmup_failed)."""
    launcher = "Exception: sglang server did not become ready after waiting.\n"
    assert signatures.scan_text(launcher).verdict() == "health_timeout"
    own = (
        "[06-17 13:46:56] Server warmup failed; aborting startup: HTTP server did not become ready at "
        "http://[::1]:10454/health\n"
    )
    assert signatures.scan_text(own).verdict() == "warmup_failed"


def test_a_launchers_wait_for_the_server_raising_is_a_health_timeout() -> None:
    """Round 16 (in-sample, areal-project/AReaL#240): the trainer's wait function raises whatever it raises;
    the function that raised names a readiness wait that ran out. Another function's RuntimeError stays crash."""
    text = (
        "Traceback (most recent call last):\n"
        '  File "/workspace/AReaL/areal/engine/sglang_remote.py", line 80, in initialize\n'
        "    self._wait_for_server(addr_)\n"
        '  File "/workspace/AReaL/areal/engine/sglang_remote.py", line 67, in _wait_for_server\n'
        '    raise RuntimeError("server launch failed")\n'
        "RuntimeError: server launch failed\n"
    )
    assert signatures.scan_text(text).verdict() == "health_timeout"
    assert signatures.scan_text(text.replace("_wait_for_server", "_launch")).verdict() == "crash"


LOADING = "[2026-12-01 10:00:01 TP0] Load weight begin. avail mem=78.52 GB\n"


@pytest.mark.parametrize(
    ("last", "cls"),
    [
        # glog's error prefix (Mooncake's transfer engine, in-sample sgl-project/sglang#7118)
        (
            "E0612 14:05:26.176716 1192408 tcp_transport.cpp:136] Session::writeBody failed. Error: Bad address",
            "crash",
        ),
        (
            "[2026-12-01 10:00:05 TP0] ERROR: worker ran out of device memory while loading the draft model",
            "oom",
        ),
        ("[2026-12-01 10:00:05 TP1] rendezvous with the other ranks failed after 3 attempts", "nccl"),
        ("[2026-12-01 10:00:05 TP0] Engine core initialisation aborted", "crash"),
    ],
)
def test_a_paste_that_ends_in_a_failure_report_is_dead_not_starting(last: str, cls: str) -> None:
    """Round 17: a paste whose last line reports a failure, with no serving and no clean stop, ended where the
    server died; the report's own words name the class where they can. Read only whole: live, never."""
    scanner = signatures.scan_text(START + LOADING + last + "\n")
    assert scanner.verdict() == cls
    ended = scanner.ended_in_error()
    assert ended is not None and (ended.cls, ended.line) == (cls, 3)
    assert (
        scanner.result() is None and scanner.result(strong_only=True) is None
    )  # the live healthcheck's read
    from bwstack.classify import classify_text

    assert classify_text(START + LOADING + last + "\n")["line"] == 3


@pytest.mark.parametrize(
    "end",
    [
        # an error the run went on from: more progress after it (in-sample gpustack/gpustack#3839's shape)
        "[2026-12-01 10:00:05] ERROR - Failed to derive model architecture\n" + LOADING,
        "[2026-12-01 10:00:05 TP0] WARNING: failed to import flashinfer, falling back to the triton backend\n",
        "E0000 00:00:1734786702.465802    2\n",  # absl's pre-init line (in-sample sgl-project/sglang#2539)
        "  watchdog_timeout=300, dist_timeout=None, download_dir=None, enable_failure_report=False,\n",
        "[2026-12-01 10:00:05 TP0] Capture cuda graph end. Time elapsed: 3.21 s. 0 errors\n",
    ],
)
def test_a_paste_that_ends_in_progress_a_warning_or_a_dump_is_still_starting(end: str) -> None:
    scanner = signatures.scan_text(START + LOADING + end)
    assert scanner.verdict() == "starting"
    assert scanner.ended_in_error() is None


def test_a_failure_report_after_serving_or_an_answered_request_is_not_a_dead_server() -> None:
    last = "[2026-12-01 10:06:00] ERROR: request 7f3a failed: client disconnected\n"
    assert signatures.scan_text(SERVED + last).verdict() == "healthy"
    answered = START + '[2026-12-01 10:00:09] INFO:     127.0.0.1:51720 - "POST /generate HTTP/1.1" 200 OK\n'
    assert signatures.scan_text(answered + last).ended_in_error() is None


def test_a_message_wrapped_over_indented_lines_is_read_by_its_head() -> None:
    """Round 18 (in-sample sgl-project/sglang#25563): TensorRT-LLM's GEMM runner error, its kernel name
    wrapped over indented lines, ends the paste; its head line is the failure report."""
    log = START + (
        "Error occurred when running GEMM! (numBatches: 256, GemmMNK: 128 1024 6144,\n"
        "          Kernel: bmm_Bfloat16_Bfloat16Bfloat16_Fp32_t128x8x128u2_s6_et128x8_m128x8x16\n"
        "                  _rgTma_clmp_swiGlu_dynB_sm100f)\n"
    )
    ended = signatures.scan_text(log).ended_in_error()
    assert ended is not None and (ended.cls, ended.line) == ("crash", 2)
    indented_only = START + "  loading shard 3 of 8\n    done in 2.1 s\n"
    assert signatures.scan_text(indented_only).verdict() == "starting"


@pytest.mark.parametrize(("level", "cls"), [("E", "crash"), ("W", "starting")])
def test_glogs_level_is_read_as_pasted(level: str, cls: str) -> None:
    """glog's prefix is paste noise to the signatures; its level still says whether the last line is an error
    report (Mooncake's transfer engine, in-sample sgl-project/sglang#7118)."""
    last = (
        f"[rank0]:{level}0612 14:05:26.176716 1192408 transfer_engine.cpp:136] Session::writeBody gave up\n"
    )
    assert signatures.scan_text(START + LOADING + last).verdict() == cls


def test_an_exception_raised_in_a_triton_compile_stage_is_kernel_compile() -> None:
    """Round 18 (in-sample sgl-project/sglang#1058): whatever the exception's type, raised in Triton's
    make_llir (its LLVM lowering) it is a kernel that did not build."""
    log = START + (
        '  File "/usr/local/lib/python3.10/dist-packages/triton/compiler/compiler.py", line 282, in compile\n'
        "    next_module = compile_ir(module, metadata)\n"
        '  File "/usr/local/lib/python3.10/dist-packages/triton/backends/nvidia/compiler.py", line 216, in '
        "make_llir\n"
        "    pm.run(mod)\n"
        "IndexError: map::at\n"
    )
    match = signatures.classify_text(log)
    assert match is not None and (match.cls, match.line) == ("kernel_compile", 6)
    elsewhere = log.replace("triton/backends/nvidia/compiler.py", "sglang/srt/layers/attention/triton_ops.py")
    match = signatures.classify_text(elsewhere)
    assert match is not None and match.cls == "crash"


def test_sglangs_handler_failing_one_request_is_one_request_only_where_the_server_is_seen_answering() -> None:
    """Round 20 (in-sample sgl-project/sglang#8833): SGLang's OpenAI handler logs 'Error in request: ..' and
    the traceback, and answers that request with a 500 of its own; like uvicorn's 'Exception in ASGI
    application' it marks one request's traceback, and only an access-log line shows the server answering (a
    handler also fails when the scheduler behind it died). The traceback pasted flush left (the issue lost its
    indentation) is still one traceback."""
    failed = (
        "[2025-08-08 16:52:59] Error in request: Expected 2 output messages (reasoning and final), but got 3.\n"
        "Traceback (most recent call last):\n"
        'File "/sgl/python/sglang/srt/entrypoints/openai/serving_base.py", line 45, in handle_request\n'
        "return await self._handle_non_streaming_request(\n"
        'File "/sgl/python/sglang/srt/entrypoints/openai/serving_chat.py", line 785, in _build_chat_response\n'
        "raise ValueError(\n"
        "ValueError: Expected 2 output messages (reasoning and final), but got 3.\n"
    )
    found = signatures.scan_text(failed).structure()
    assert (found.trace_line, found.exception, found.exception_line) == (2, "ValueError", 7)
    assert len(found.frames) == 2
    assert signatures.scan_text(failed).verdict() == "crash"  # nothing shows the server answering
    answered = (
        '[2025-08-08 16:52:58] INFO:     127.0.0.1:51720 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'
    )
    scanner = signatures.scan_text(answered + failed)
    assert scanner.result() is None and scanner.verdict() == "healthy"


def test_a_request_that_arrived_or_a_worker_that_answers_health_is_no_serving_evidence() -> None:
    """Serving evidence proves a request was served (SERVED's standard). A grammar backend skipping a client's
    constraint logs when the request arrives, before any token (in-sample sgl-project/sglang#1776); the
    router's 'All workers are healthy' says its workers answered /health (sgl-project/sglang#8557): neither
    proves a generation, and a failed server must never read healthy. Both stay corpus misses."""
    line = 'skip invalid json schema: json_schema={"type":"object"}, e=NotImplementedError("format email")\n'
    assert signatures.scan_text(START + line).verdict() == "starting"
    router = (
        "2025-07-30 00:09:38  INFO sglang_router_rs::routers::router: src/routers/router.rs:156: All workers are "
        "healthy\n"
    )
    assert signatures.scan_text(router).verdict() == "starting"


def test_a_missing_generation_config_ending_a_paste_is_still_starting() -> None:
    """Round 20 (in-sample sgl-project/sglang#26122): SGLang goes on without a generation config."""
    last = "[2026-05-22 15:58:15] Failed to load generation config for Qwen/Qwen3.5-4B: Q\n"
    assert signatures.scan_text(START + LOADING + last).verdict() == "starting"


def test_a_warning_that_skips_a_missing_module_is_no_import_error() -> None:
    """Round 22: SGLang's registry goes on past a model module it cannot import (its own warning holds the
    exception mid-line)."""
    skipped = (
        "[2026-01-05 10:00:02] Ignore import error when loading sglang.srt.models.mllama4: "
        "ModuleNotFoundError: No module named 'timm'\n"
    )
    assert signatures.scan_text(START + LOADING + skipped + LOADING).verdict() == "starting"


def test_round_27_structures_name_nan_a_broken_transformers_and_a_loaders_cut_assert() -> None:
    """Round 27 (in-sample, from round 26's misses: sgl-project/SpecForge#104, sgl-project/sglang#23233,
    #19587): a failed check whose message names NaN is nan; an exception raised in transformers' import
    machinery while a module is imported is import_error; a traceback cut at a loader's ``assert`` reads as
    the loader rule reads its AssertionError (model_load), and an ``assert`` elsewhere stays an assertion."""
    nan = (
        "Traceback (most recent call last):\n"
        '  File "/w/prepare_hidden_states.py", line 186, in _save_tensor\n'
        "    assert not torch.any(torch.isnan(hidden_state))\n"
        "AssertionError: hidden_state is expected to be non-nan\n"
    )
    assert signatures.scan_text(nan).verdict() == "nan"
    named = nan.replace("non-nan", "positive")
    assert signatures.scan_text(named).verdict() == "assertion"
    broken = (
        "Traceback (most recent call last):\n"
        '  File "/p/sglang/__init__.py", line 29, in <module>\n'
        "    import transformers\n"
        '  File "/usr/lib/python3/dist-packages/transformers/__init__.py", line 795, in <module>\n'
        "    sys.modules[__name__] = _LazyModule(\n"
        '  File "/usr/lib/python3/dist-packages/transformers/utils/import_utils.py", line 2100, in __init__\n'
        "    raise ValueError(\n"
        "ValueError: Backend should be defined in the BACKENDS_MAPPING. Offending backend: tf\n"
    )
    assert signatures.scan_text(broken).verdict() == "import_error"
    # the same machinery on the stack, but the module's import is over: what failed is the caller's
    called = broken.replace(", in <module>", ", in main")
    assert signatures.scan_text(called).verdict() == "crash"
    cut = (
        "[2026-02-28 11:04:19] Scheduler hit an exception: Traceback (most recent call last):\n"
        '  File "/s/sglang/srt/models/qwen3_5.py", line 1117, in load_weights\n'
        "    weight_loader(param, loaded_weight)\n"
        '  File "/s/sglang/srt/layers/linear.py", line 416, in weight_loader\n'
        "    assert param_data.shape == loaded_weight.shape\n"
        "           ^^^^^^^^^^^^^^^^^^^^^^^^^\n"
    )
    scanner = signatures.scan_text(cut)
    assert scanner.verdict() == "model_load"
    assert scanner.structure().cut_assert == 5
    elsewhere = cut.replace("in weight_loader", "in forward")
    assert signatures.scan_text(elsewhere).verdict() == "assertion"
    # an assert whose exception line follows is the AssertionError's to read (the loader rule), not a cut one
    done = cut + "AssertionError\n"
    assert signatures.scan_text(done).structure().cut_assert == 0


def test_the_structures_shortcuts_read_every_real_log_as_the_plain_patterns_do() -> None:
    """The whole-text prefilters of :func:`structure.read` (a logger's error level found by its words and
    glog's shape, a collapse by its run of marks) skip no line the per-line patterns would match, and a text
    given already normalised reads as the same text normalised by read itself, on every real log here."""
    error_line, collapse = re.compile(structure._ERROR_LINE), re.compile(structure._COLLAPSE)
    logs = sorted(HERE.glob("*/*.log"))
    assert len(logs) > 900
    for path in logs:
        text = path.read_text(encoding="utf-8")
        errors = {at for at, line in enumerate(text.split("\n")) if error_line.search(line)}
        assert errors <= structure._lines_holding(structure._ERROR_HINT, text), path.name
        runs = any(mark * structure._COLLAPSE_RUN in text for mark in structure._COLLAPSE_MARKS)
        assert runs == (collapse.search(text) is not None), path.name
        assert structure.read(text, normal=paste.normalise(text)) == structure.read(text), path.name
    assert structure._lines_holding(structure._ERROR_HINT, "a\nb ERROR c\nE0101 10:00:00.1 x\n") == {1, 2}
