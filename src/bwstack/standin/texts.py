"""The failure texts the stand-in prints: SGLang's, PyTorch's and FlashInfer's real messages, per version.

The healthcheck's failure catalog (``healthchecks/signatures/__init__.py``) classifies a server log by these
texts, so each exception line below is the one the real software prints (sources on each constant). The
traceback frames around it are shortened (model-internal frames left out) and name files, functions and call
lines read in the 0.5.9 ("legacy", also used up to 0.5.12) and 0.5.23 ("current", used from 0.5.15) wheels,
under the path the lmsysorg/sglang images install SGLang at; FlashInfer/PyTorch frame line numbers are
indicative.
"""

from __future__ import annotations

from collections.abc import Sequence

from healthchecks import imagelayout

Version = tuple[int, ...]
Frame = tuple[str, int, str, str]  # (file, line, function, source line)

SGLANG_ROOT = f"{imagelayout.SGLANG_WORKSPACE}/python/sglang"
SITE = "/usr/local/lib/python3.12/dist-packages"

# --- messages -----------------------------------------------------------------------------------------------

#: PyTorch's multinomial device-side assert (aten/src/ATen/native/cuda/TensorCompare.cu
#: _assert_async_cuda_kernel; sglang-by-version.md §7, sgl-project/sglang#21460, kvcache-ai/ktransformers#465)
DEVICE_ASSERT_LINE = (
    "/pytorch/aten/src/ATen/native/cuda/TensorCompare.cu:112: _assert_async_cuda_kernel: block: [0,0,0], "
    "thread: [0,0,0] Assertion `probability tensor contains either `inf`, `nan` or element < 0` failed."
)

#: torch.multinomial's check on the CPU (aten/src/ATen/native/Distributions.cpp), seen on real SGLang 0.5.9
MULTINOMIAL_CPU_ERROR = "RuntimeError: probability tensor contains either `inf`, `nan` or element < 0"

#: torch >= 2.8 raises AcceleratorError for CUDA errors (sgl-project/sglang#21460 shows this exact block)
ACCELERATOR_ERROR = (
    "torch.AcceleratorError: CUDA error: device-side assert triggered\n"
    "Search for `cudaErrorAssert' in https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html "
    "for more information.\n"
    "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below "
    "might be incorrect.\n"
    "For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
    "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n"
)

#: FlashInfer's TRT-LLM-gen FMHA runner on a GPU other than SM100/103: flashinfer-python 0.6.x raises a
#: RuntimeError at fmhaRunner.cuh:30 (flashinfer-ai/flashinfer#3263, with sglang 0.5.10), the tvm-ffi builds
#: a tvm InternalError at fmhaRunner.cuh:37 (flashinfer-ai/flashinfer#5445, sgl-project/sglang#40558)
TLLM_RUNTIME_ERROR = (
    "RuntimeError: Error in function 'TllmGenFmhaRunner' at "
    f"{SITE}/flashinfer/data/include/flashinfer/trtllm/fmha/fmhaRunner.cuh:30: Unsupported architecture"
)
TLLM_TVM_ERROR = (
    "tvm.error.InternalError: Error in function 'TllmGenFmhaRunner' at "
    f"{SITE}/flashinfer/data/include/flashinfer/trtllm/fmha/fmhaRunner.cuh:37: Unsupported architecture"
)

#: PyTorch's CUDA caching-allocator OOM text (torch/csrc ... CUDACachingAllocator; sizes for a 96 GB card)
OOM_MESSAGE = (
    "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 94.97 GiB of which "
    "1.13 GiB is free. Including non-PyTorch memory, this process has 93.82 GiB memory in use. Of the "
    "allocated memory 89.26 GiB is allocated by PyTorch, with 1.75 GiB allocated in private pools (e.g., "
    "CUDA Graphs), and 2.71 GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory "
    "is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See "
    "documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
)

#: CUDA_GRAPH_CAPTURE_FAILED_MSG: 0.5.9 wheel srt/model_executor/cuda_graph_runner.py L935-942;
#: 0.5.23 wheel srt/model_executor/runner_backend_utils/__init__.py L14-21
CAPTURE_FAILED_HINT_LEGACY = (
    "Possible solutions:\n"
    "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)\n"
    "2. set --cuda-graph-max-bs to a smaller value (e.g., 16)\n"
    "3. disable torch compile by not using --enable-torch-compile\n"
    "4. disable CUDA graph by --disable-cuda-graph. (Not recommended. Huge performance loss)\n"
    "Open an issue on GitHub https://github.com/sgl-project/sglang/issues/new/choose \n"
)
CAPTURE_FAILED_HINT_CURRENT = (
    "Possible solutions:\n"
    "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)\n"
    "2. set --cuda-graph-max-bs-decode to a smaller value (e.g., 16)\n"
    "3. disable decode CUDA graph by --cuda-graph-backend-decode=disabled. "
    "(Not recommended. Huge performance loss)\n"
    "Open an issue on GitHub https://github.com/sgl-project/sglang/issues/new/choose \n"
)

#: launch-phase SIGQUIT handler (0.5.9 wheel srt/entrypoints/engine.py L868-872; 0.5.23 L1976-1980)
LAUNCH_SIGQUIT = "Received sigquit from a child process. It usually means the child failed."

#: running-phase handler, installed by the first request (warmup) via loop.add_signal_handler, so it is called
#: without arguments (0.5.9 wheel srt/managers/tokenizer_manager.py L2506-2511; 0.5.23 L4072-4081)
RUNNING_SIGQUIT = "SIGQUIT received. signum=None, frame=None. It usually means one child failed."

FIRED_UP = "The server is fired up and ready to roll!"


def is_legacy(version: Version) -> bool:
    """Texts and frames of the 0.5.9-0.5.12 code base (``nsa`` names, server_args.py resolution)."""
    return version <= (0, 5, 12)


def kill_tree_line(version: Version, pid: int) -> str | None:
    """``kill_process_tree`` logs itself from 0.5.15 (0.5.15-0.5.23 wheels; absent in 0.5.9-0.5.12)."""
    if version < (0, 5, 15):
        return None
    return f"kill_process_tree called: parent_pid={pid}, include_parent=True, pid={pid}"


def format_traceback(frames: Sequence[Frame], exception: str) -> str:
    """A Python traceback (``Traceback (most recent call last):`` … exception line) as text."""
    lines = ["Traceback (most recent call last):"]
    for path, line, func, source in frames:
        lines.append(f'  File "{path}", line {line}, in {func}')
        lines.append(f"    {source}")
    lines.append(exception)
    return "\n".join(lines)


def _sg(rel: str) -> str:
    return f"{SGLANG_ROOT}/srt/{rel}"


def _torch(rel: str) -> str:
    return f"{SITE}/torch/{rel}"


def _event_loop_frames(version: Version) -> list[Frame]:
    """Scheduler process -> event loop -> run_batch -> forward_batch_generation (real call lines)."""
    if is_legacy(version):
        return [
            (_sg("managers/scheduler.py"), 3169, "run_scheduler_process", "scheduler.event_loop_overlap()"),
            (_torch("utils/_contextlib.py"), 120, "decorate_context", "return func(*args, **kwargs)"),
            (
                _sg("managers/scheduler.py"),
                1165,
                "event_loop_overlap",
                "batch_result = self.run_batch(batch)",
            ),
            (
                _sg("managers/scheduler.py"),
                2368,
                "run_batch",
                "batch_result = self.model_worker.forward_batch_generation(",
            ),
        ]
    return [
        (_sg("managers/scheduler.py"), 6368, "run_scheduler_process", "scheduler.run_event_loop()"),
        (_sg("managers/scheduler.py"), 1989, "run_event_loop", "dispatch_event_loop(self)"),
        (_sg("managers/scheduler.py"), 6231, "dispatch_event_loop", "scheduler.event_loop_overlap()"),
        (_torch("utils/_contextlib.py"), 124, "decorate_context", "return func(*args, **kwargs)"),
        (_sg("managers/scheduler.py"), 2109, "event_loop_overlap", "batch_result = self.run_batch(batch)"),
        (
            _sg("managers/scheduler.py"),
            4816,
            "run_batch",
            "batch_result = self.model_worker.forward_batch_generation(",
        ),
    ]


def device_assert_report(version: Version) -> tuple[str, str]:
    """(device line printed by the CUDA runtime, scheduler traceback) for NaN reaching torch.multinomial."""
    trace = format_traceback(
        _event_loop_frames(version) + _multinomial_frames(version), ACCELERATOR_ERROR.rstrip("\n")
    )
    return DEVICE_ASSERT_LINE, trace + "\n"


def multinomial_cpu_error(version: Version) -> str:
    """The scheduler traceback when NaN probabilities reach torch.multinomial on the CPU (no device line).

    Seen on real SGLang 0.5.9 (and 0.5.23 with ``SGLANG_OPT_USE_GUMBEL_SAMPLE=0``) on the CPU: the sampled
    decode of a NaN model ends the scheduler with this RuntimeError (shared reference real-sglang-on-cpu.md).
    """
    return (
        format_traceback(_event_loop_frames(version) + _multinomial_frames(version), MULTINOMIAL_CPU_ERROR)
        + "\n"
    )


def nan_json_500() -> str:
    """What uvicorn logs when a response holding a NaN logprob goes through ``json.dumps`` (0.5.9)."""
    frames = [
        (f"{SITE}/uvicorn/protocols/http/httptools_impl.py", 416, "run_asgi",
         "result = await app(  # type: ignore[func-returns-value]"),
        (f"{SITE}/starlette/responses.py", 198, "render",
         "return json.dumps("),
        ("/usr/lib/python3.12/json/encoder.py", 261, "iterencode",
         "return _iterencode(o, 0)"),
    ]  # fmt: skip
    return format_traceback(frames, "ValueError: Out of range float values are not JSON compliant") + "\n"


def _multinomial_frames(version: Version) -> list[Frame]:
    if is_legacy(version):
        frames = [
            (
                _sg("managers/tp_worker.py"),
                479,
                "forward_batch_generation",
                "batch_result.next_token_ids = self.model_runner.sample(",
            ),
            (_sg("model_executor/model_runner.py"), 2551, "sample", "next_token_ids = self.sampler("),
            (_sg("layers/sampler.py"), 160, "forward", "batch_next_token_ids = self._sample_from_probs("),
            (
                _sg("layers/sampler.py"),
                201,
                "_sample_from_probs",
                "batch_next_token_ids = sampling_from_probs_torch(",
            ),
            (
                _sg("layers/sampler.py"),
                599,
                "sampling_from_probs_torch",
                "sampled_index = torch.multinomial(probs, num_samples=1)",
            ),
        ]
    else:
        frames = [
            (
                _sg("managers/tp_worker.py"),
                733,
                "forward_batch_generation",
                "batch_result.next_token_ids = self.model_runner.sample(",
            ),
            (_sg("model_executor/model_runner.py"), 2161, "sample", "next_token_ids = self.sampler("),
            (
                _sg("layers/sampler.py"),
                301,
                "forward",
                "batch_next_token_ids, sampling_mask_capture = self._sample_from_probs(",
            ),
            (
                _sg("layers/sampler.py"),
                384,
                "_sample_from_probs",
                "batch_next_token_ids = sampling_from_probs_torch(",
            ),
            (
                _sg("layers/sampler.py"),
                997,
                "sampling_from_probs_torch",
                "sampled_index = torch.multinomial(probs, num_samples=1)",
            ),
        ]
    return frames


def kv_store_assertion(version: Version) -> str:
    """The bare AssertionError of ``MLATokenToKVPool.set_kv_buffer`` (sglang-by-version.md §8).

    0.5.9 wheel srt/mem_cache/memory_pool.py L1498 ``assert not self.nsa_kv_cache_store_fp8`` (reached from
    triton_backend.py L816); 0.5.23 wheel L4956 ``assert not self.dsa_kv_cache_store_fp8`` (triton_backend.py
    L1663). The rename happened in 0.5.15.
    """
    if is_legacy(version):
        frames = [
            (
                _sg("managers/tp_worker.py"),
                456,
                "forward_batch_generation",
                "out = self.model_runner.forward(",
            ),
            (_sg("model_executor/model_runner.py"), 2401, "forward", "output = self._forward_raw("),
            (
                _sg("model_executor/model_runner.py"),
                2500,
                "_forward_raw",
                "ret, can_run_graph = self.forward_extend(",
            ),
            (_sg("model_executor/model_runner.py"), 2359, "forward_extend", "return self.model.forward("),
            (_sg("layers/radix_attention.py"), 127, "forward", "return forward_batch.attn_backend.forward("),
            (_sg("layers/attention/base_attn_backend.py"), 113, "forward", "return self.forward_extend("),
            (
                _sg("layers/attention/triton_backend.py"),
                816,
                "forward_extend",
                "forward_batch.token_to_kv_pool.set_kv_buffer(",
            ),
            (
                _sg("mem_cache/memory_pool.py"),
                1498,
                "set_kv_buffer",
                "assert not self.nsa_kv_cache_store_fp8",
            ),
        ]
    else:
        frames = [
            (
                _sg("managers/tp_worker.py"),
                675,
                "forward_batch_generation",
                "out = self.model_runner.forward(",
            ),
            (_sg("model_executor/model_runner.py"), 1860, "forward", "output = self._forward_raw("),
            (_sg("layers/radix_attention.py"), 183, "forward", "return get_attn_backend().forward("),
            (_sg("layers/attention/base_attn_backend.py"), 355, "forward", "return self.forward_extend("),
            (
                _sg("layers/attention/triton_backend.py"),
                1722,
                "forward_extend",
                "self._set_kv_buffer(forward_batch, layer, loc_info, k, v)",
            ),
            (
                _sg("layers/attention/triton_backend.py"),
                1663,
                "_set_kv_buffer",
                "self.token_to_kv_pool.set_kv_buffer(layer, loc, k, v, **kwargs)",
            ),
            (
                _sg("mem_cache/memory_pool.py"),
                4956,
                "set_kv_buffer",
                "assert not self.dsa_kv_cache_store_fp8",
            ),
        ]
    return format_traceback(_event_loop_frames(version) + frames, "AssertionError") + "\n"


def tllm_unsupported(version: Version) -> str:
    """A trtllm DSA kernel on a GPU the TRT-LLM-gen FMHA runner does not support (SM120 included)."""
    legacy = is_legacy(version)
    # (tp_worker call, base_attn_backend call, <dsa>_backend forward_decode call, its trtllm kernel call)
    lines = (456, 93, 1504, 1979) if legacy else (675, 335, 2568, 4005)
    backend = _sg("layers/attention/nsa_backend.py" if legacy else "layers/attention/dsa_backend.py")
    frames = [
        (
            _sg("managers/tp_worker.py"),
            lines[0],
            "forward_batch_generation",
            "out = self.model_runner.forward(",
        ),
        (_sg("layers/attention/base_attn_backend.py"), lines[1], "forward", "return self.forward_decode("),
        (backend, lines[2], "forward_decode", "return self._forward_trtllm("),
        (
            backend,
            lines[3],
            "_forward_trtllm",
            "out = flashinfer.decode.trtllm_batch_decode_with_kv_cache_mla(",
        ),
        (f"{SITE}/flashinfer/decode.py", 2587, "trtllm_batch_decode_with_kv_cache_mla", "run_func("),
    ]
    exception = TLLM_RUNTIME_ERROR if is_legacy(version) else TLLM_TVM_ERROR
    return format_traceback(_event_loop_frames(version) + frames, exception) + "\n"


def glm_sm12_value_error(version: Version, message: str) -> str:
    """0.5.17+ refuses a non-flashinfer DSA backend for GLM + FP8 KV on SM12x while building the backend."""
    frames = [
        (
            _sg("managers/scheduler.py"),
            6362,
            "run_scheduler_process",
            "scheduler = Scheduler(server_args, port_args)",
        ),
        (_sg("managers/scheduler.py"), 1115, "__init__", "self.tp_worker.init_attention_backends()"),
        (
            _sg("managers/tp_worker.py"),
            429,
            "init_attention_backends",
            "self.model_runner.init_attention_backends()",
        ),
        (
            _sg("layers/attention/dsa_backend.py"),
            746,
            "__init__",
            "uses_flashinfer_sparse_mla = _validate_flashinfer_sparse_mla_backend(",
        ),
        (
            f"{SGLANG_ROOT}/kernels/ops/attention/flash_mla_sm120.py",
            708 if version >= (0, 5, 23) else 595,
            "_validate_flashinfer_sparse_mla_backend",
            "raise ValueError(",
        ),
    ]
    return format_traceback(frames, f"ValueError: {message}") + "\n"


def capture_oom(version: Version) -> str:
    """OOM during decode CUDA-graph capture, re-raised by SGLang with its hint (chained traceback)."""
    if is_legacy(version):
        runner, init_line, raise_line, hint = (
            "model_executor/cuda_graph_runner.py",
            370,
            372,
            CAPTURE_FAILED_HINT_LEGACY,
        )
        capture_frames: list[Frame] = [
            (_sg(runner), 513, "capture", ") = self.capture_one_batch_size(bs, forward, stream_idx)"),
            (_sg(runner), 732, "capture_one_batch_size", "run_once()"),
        ]
        outer = (_sg("managers/scheduler.py"), 3130, "run_scheduler_process", "scheduler = Scheduler(")
    else:
        runner, init_line, raise_line = "model_executor/runner/decode_cuda_graph_runner.py", 600, 602
        hint = CAPTURE_FAILED_HINT_CURRENT
        capture_frames = [(_sg(runner), 1402, "capture", "def run_once():")]
        outer = (
            _sg("managers/scheduler.py"),
            6362,
            "run_scheduler_process",
            "scheduler = Scheduler(server_args, port_args)",
        )
    inner = format_traceback(
        [(_sg(runner), init_line, "__init__", "self.capture()"), *capture_frames],
        f"torch.OutOfMemoryError: {OOM_MESSAGE}",
    )
    wrapped = format_traceback(
        [outer, (_sg(runner), raise_line, "__init__", "raise Exception(")],
        f"Exception: Capture cuda graph failed: {OOM_MESSAGE}\n{hint}",
    )
    return f"{inner}\n\nDuring handling of the above exception, another exception occurred:\n\n{wrapped}\n"


def server_args_traceback(version: Version, exc_type: str, message: str) -> str:
    """What ``python -m sglang.launch_server`` prints when ``ServerArgs`` resolution refuses the arguments."""
    frames = [
        ("<frozen runpy>", 198, "_run_module_as_main", ""),
        ("<frozen runpy>", 88, "_run_code", ""),
        (
            f"{SGLANG_ROOT}/launch_server.py",
            32,
            "<module>",
            "server_args = prepare_server_args(sys.argv[1:])",
        ),
        (_sg("server_args.py"), 5592, "prepare_server_args", "return ServerArgs.from_cli_args(raw_args)"),
    ]
    if not is_legacy(version):
        frames[2:] = [
            (
                f"{SGLANG_ROOT}/launch_server.py",
                81,
                "<module>",
                "server_args = prepare_server_args(sys.argv[1:])",
            ),
            (
                _sg("server_args.py"),
                710,
                "prepare_server_args",
                "server_args = ServerArgs.from_cli_args(raw_args)",
            ),
        ]
    lines = ["Traceback (most recent call last):"]
    for path, line, func, source in frames:
        lines.append(f'  File "{path}", line {line}, in {func}')
        if source:
            lines.append(f"    {source}")
    lines.append(f"{exc_type}: {message}")
    return "\n".join(lines) + "\n"
