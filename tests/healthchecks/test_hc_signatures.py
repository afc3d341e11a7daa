"""The failure catalog: every class on realistic log excerpts, root cause first, no false alarms."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from healthchecks.signatures import SIGNATURES, Scanner, classify_file, classify_lines, classify_text

from healthchecks import signatures

LOGS = Path(__file__).resolve().parent / "logs"

# file -> (class, other classes that must be reported as "also")
EXPECTED: dict[str, tuple[str, set[str]]] = {
    "nan_multinomial_dense_fp8kv.log": ("nan", {"device_assert", "crash"}),
    "nan_flashinfer_probs.log": ("nan", {"crash"}),
    "nan_sanitized_0.5.23.log": ("nan", set()),
    "nan_json_500_0.5.9.log": ("nan", set()),
    "device_assert_index.log": ("device_assert", {"crash"}),
    "assertion_triton_fp8kv_0.5.9.log": ("assertion", {"crash"}),
    "unsupported_arch_trtllm_0.5.12.log": ("unsupported_arch", {"crash"}),
    "unsupported_arch_deepgemm_0.5.12.log": ("unsupported_arch", {"crash"}),
    "unsupported_arch_glm_sm120_0.5.17.log": ("unsupported_arch", {"crash"}),
    "unsupported_arch_sparse_mla_bf16_0.5.23.log": ("unsupported_arch", {"crash"}),
    "unsupported_arch_trtllm_mha_0.5.9.log": ("unsupported_arch", {"crash"}),
    "unsupported_arch_triton_dsa_0.5.23.log": ("unsupported_arch", {"crash"}),
    "no_kernel_image.log": ("no_kernel_image", {"crash"}),
    "shared_memory_tilelang.log": ("shared_memory", {"crash"}),
    "shared_memory_triton.log": ("shared_memory", {"crash"}),
    "oom_cuda_graph_capture.log": ("oom", {"crash"}),
    "illegal_memory.log": ("illegal_memory", {"crash"}),
    "warmup_failed.log": ("warmup_failed", {"assertion"}),
    "model_load_glm_moe_dsa_0.5.9.log": ("model_load", {"crash"}),
    "model_load_shared_experts.log": ("model_load", {"crash"}),
    "nccl_error.log": ("nccl", {"crash"}),
    "nccl_watchdog_torch25_multinode.log": ("nccl", set()),  # round 7: torch 2.5's watchdog words
    "crash_capture_failed_hint_cut.log": ("crash", set()),  # round 7: only SGLang's capture hint is left
    "health_timeout.log": ("health_timeout", set()),
    "timeout_watchdog.log": ("timeout", {"crash"}),
    "hang_pyspy_dump.log": ("hang", set()),
    "crash_generic.log": ("crash", set()),
    "crash_killed.log": ("crash", set()),
    # issue 11 classes, excerpts of the real-world corpus (tests/healthchecks/corpus:
    # sgl-project/sglang#391, #552, akash-network/support#244, triton-lang/triton#8539)
    "kernel_compile_ptxas.log": ("kernel_compile", set()),
    "import_error_vllm.log": ("import_error", {"crash"}),
    "peer_access_custom_all_reduce.log": ("peer_access", set()),
    "gpu_fault_xid.log": ("gpu_fault", set()),
}
HEALTHY = ["healthy_0.5.9_dense.log", "healthy_0.5.23_dsa.log"]
#: classes a log line can carry (the others come from HTTP answers or the hang watchdog: no rank)
LOG_CLASSES = set(signatures.CLASS_PRIORITY)

# One line per alternative of every pattern (texts from the pinned wheels and the cited issues).
EXAMPLES: list[tuple[str, str]] = [
    # seen in real runs of SGLang 0.5.23 on the CPU (profiles.cpu.yaml; docs/cpu.md)
    ("ValueError: CPU FP8 KV cache requires Intel AMX support.", "unsupported_arch"),
    ("RuntimeError: 0 active drivers ([]). There should only be one.", "unsupported_arch"),
    (
        "importlib.metadata.PackageNotFoundError: No package metadata was found for flashinfer_python",
        "import_error",
    ),
    (
        "Exception: flashinfer_python with minimum required version 0.7.2 is not installed. Please uninstall",
        "import_error",
    ),
    ("Assertion `probability tensor contains either `inf`, `nan` or element < 0` failed.", "nan"),
    ("RuntimeError: probability tensor contains either inf, nan or element < 0", "nan"),
    ("ValueError: Input probs contains NaN.", "nan"),
    ("ValueError: Input logits contains NaN.", "nan"),
    ("[2026-03-01 10:00:00 TP0] Detected errors during sampling! NaN in the logits.", "nan"),
    ("[TP0] NaN detected in sampler: next_token_logits; values were sanitized before sampling.", "nan"),
    ("RuntimeError: NaN detected! logits after final norm", "nan"),
    ("ValueError: Out of range float values are not JSON compliant: nan", "nan"),
    ("    assert not self.dsa_kv_cache_store_fp8", "assertion"),
    ("AssertionError: DeepSeek DSA only supports bf16/bfloat16 or fp8_e4m3 kv_cache_dtype", "assertion"),
    (
        "tvm.error.InternalError: Error in function 'TllmGenFmhaRunner' at fmhaRunner.cuh:37",
        "unsupported_arch",
    ),
    (
        "RuntimeError: Assertion error (/deepgemm/csrc/apis/attention.hpp:159): Unsupported architecture",
        "unsupported_arch",
    ),
    ("RuntimeError: Unsupported architecture", "unsupported_arch"),
    (
        "ValueError: GLM DSA with FP8 KV cache on NVIDIA SM120/SM121 supports only flashinfer_sparse_mla "
        "(default) or triton_sparse_mla (prefill), but got ['trtllm'].",
        "unsupported_arch",
    ),
    (
        "ValueError: flashinfer_sparse_mla supports only GLM DSA with FP8 KV cache on NVIDIA SM120/SM121; got",
        "unsupported_arch",
    ),
    (
        "ValueError: The triton DSA backend is only supported on ROCm/HIP. Pick an alternative",
        "unsupported_arch",
    ),
    (
        "ValueError: The tilelang DSA prefill/decode kernels only support an fp8_e4m3 KV cache on ROCm/HIP; "
        "on CUDA they require a bfloat16 KV cache.",
        "unsupported_arch",
    ),
    ("ValueError: TRTLLM MLA backend is only supported on Blackwell GPUs (SM100/SM12x).", "unsupported_arch"),
    (
        "ValueError: TRTLLM MHA backend for decode is only supported on Hopper (SM90), Blackwell",
        "unsupported_arch",
    ),
    ("ValueError: Native NVFP4 prefill currently requires SM100; use", "unsupported_arch"),
    (
        "ValueError: TRTLLM FMHAv2 prefill on SM120 does not support fp8_e4m3 KV cache or skip-softmax.",
        "unsupported_arch",
    ),
    ("RuntimeError: CUDA error: no kernel image is available for execution on the device", "no_kernel_image"),
    ("error: cudaErrorNoKernelImageForDevice", "no_kernel_image"),
    (
        "NVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible with the current PyTorch installation.",
        "no_kernel_image",
    ),
    (
        "RuntimeError: Failed to set the allowed dynamic shared memory size to 169984 with error",
        "shared_memory",
    ),
    (
        "triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 106496",
        "shared_memory",
    ),
    ("RuntimeError: CUDA error: too many resources requested for launch", "shared_memory"),
    ("[CUDA ERROR]: Too many resources requested for launch", "shared_memory"),
    ("cudaErrorLaunchOutOfResources", "shared_memory"),
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.", "oom"),
    ("RuntimeError: CUDA error: out of memory", "oom"),
    ("cudaErrorMemoryAllocation", "oom"),
    ("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. Current value:", "oom"),
    ("[TP0] Prefill out of memory. Try to lower your batch size.", "oom"),
    ("[TP0] Decode out of memory. Try to lower your batch size.", "oom"),
    ("RuntimeError: alloc_req_slots runs out of memory. Please set a smaller number", "oom"),
    ("torch.AcceleratorError: CUDA error: an illegal memory access was encountered", "illegal_memory"),
    # an error text cut short (a streamed error message, a capped reason) still names the fault
    ("error in the stream: CUDA error: an illegal memory access", "illegal_memory"),
    ("cudaErrorIllegalAddress", "illegal_memory"),
    ("RuntimeError: CUDA error: misaligned address", "illegal_memory"),
    ("RuntimeError: CUDA error: an illegal instruction was encountered", "illegal_memory"),
    ("KeyError: 'glm_moe_dsa'", "model_load"),
    (
        "ValueError: ... model type `glm_moe_dsa` but Transformers does not recognize this architecture.",
        "model_load",
    ),
    (
        "RuntimeError: The size of tensor a (3072) must match the size of tensor b (6144) at non-singleton dim 0",
        "model_load",
    ),
    (
        "size mismatch for model.layers.3.mlp.weight: copying a param with shape [3072] from checkpoint",
        "model_load",
    ),
    ("huggingface_hub.errors.GatedRepoError: 403 Client Error.", "model_load"),
    ("huggingface_hub.errors.RepositoryNotFoundError: 404 Client Error.", "model_load"),
    (
        "Cannot access gated repo for url https://huggingface.co/zai-org/GLM-5/resolve/main/config.json.",
        "model_load",
    ),
    ("Repository Not Found for url: https://huggingface.co/api/models/nobody/nothing.", "model_load"),
    ("OSError: /models/x does not appear to have a file named config.json.", "model_load"),
    ("RuntimeError: CUDA error: device-side assert triggered", "device_assert"),
    (
        "Indexing.cu:1553: indexSelectLargeIndex: block: [12,0,0] Assertion `srcIndex < srcSelectDimSize` failed.",
        "device_assert",
    ),
    ("cudaErrorAssert", "device_assert"),
    ("RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:3356, unhandled cuda error", "nccl"),
    ("RuntimeError: NCCL Error 1: unhandled cuda error", "nccl"),
    ("ncclUnhandledCudaError: Call to CUDA function failed.", "nccl"),
    ("ncclInternalError: Internal check failed.", "nccl"),
    ("[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=12, OpType=ALLREDUCE)", "nccl"),
    (
        "Health check failed. Server couldn't get a response from detokenizer for last 20 seconds.",
        "health_timeout",
    ),
    ("[TP0] Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=False)", "timeout"),
    ("[2026-03-02] Initialization failed. warmup error: Traceback (most recent call last):", "warmup_failed"),
    (
        "[06-17 13:46:56] Server warmup failed; aborting startup: HTTP server did not become ready",
        "warmup_failed",
    ),
    ("AssertionError", "assertion"),
    ("[TP0] Scheduler hit an exception: Traceback (most recent call last):", "crash"),
    ("[2026-03-02] DetokenizerManager hit an exception: Traceback", "crash"),
    ("[2026-03-02] Received sigquit from a child process. It usually means the child failed.", "crash"),
    ("SIGQUIT received. signum=None, frame=None. It usually means one child failed.", "crash"),
    ("Exception: Capture cuda graph failed: boom", "crash"),
    ("bwstack-serve: server crashed: exit status 1", "crash"),
    # issue 11: arch gates in their other wordings
    ("ValueError: Unsupported CUDA architecture: sm120", "unsupported_arch"),
    ("RuntimeError: Unsupported architecture: sm_121", "unsupported_arch"),
    (
        "ValueError: Unsupported architectures: ChatGLMForConditionalGeneration. Supported list: [",
        "model_load",
    ),
    ("ValueError: Unsupported architecture: 'LlamaForCausalLM'", "model_load"),
    ("ValueError: Unsupported compute capability: 12.0", "unsupported_arch"),
    ("RuntimeError: No supported CUDA architectures found for major versions [12].", "unsupported_arch"),
    ("RuntimeError: No compiled cutlass_scaled_mm for CUDA device capability: 120", "unsupported_arch"),
    ("RuntimeError: FlashInfer requires sm75+", "unsupported_arch"),
    # round 5: SGLang's own floor (model_runner.py), and as a user retyped it (opendatalab/MinerU#3416)
    ("RuntimeError: SGLang only supports sm75 and above.", "unsupported_arch"),
    ("报错信息：SGlang only supports sm 75 and  above ", "unsupported_arch"),  # noqa: RUF001
    (
        "RuntimeError: Sparse Attention Forward Kernel is only supported on SM90a and SM100f architectures.",
        "unsupported_arch",
    ),
    ("RuntimeError: Assertion error (.../utils/layout.hpp:56): Unknown recipe", "unsupported_arch"),
    # watchdog spellings by version
    ("[2025-08-02 19:24:30 TP3] Watchdog timeout (self.watchdog_timeout=300)", "timeout"),
    (
        "[2026-03-27 20:52:54] TokenizerManager watchdog timeout (self.watchdog_timeout=300, self.soft=True)",
        "timeout",
    ),
    # launch failures
    ("RuntimeError: CUDA error: unspecified launch failure", "illegal_memory"),
    ("cudaErrorLaunchFailure", "illegal_memory"),
    # NCCL shown only as warnings, its watchdog, the c10d store, gloo
    ("host:4167:5269 [0] transport/p2p.cc:275 NCCL WARN Cuda failure 'invalid argument'", "nccl"),
    (
        "[rank6]:[F1019 01:14:03.358 ProcessGroupNCCL.cpp:1224] ProcessGroupNCCL's watchdog got stuck for 600 seconds",
        "nccl",
    ),
    ("torch.distributed.DistBackendError: [1] is setting up NCCL communicator", "nccl"),
    (
        "Exception: Capture cuda graph failed: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection cl",
        "nccl",
    ),
    # round 5: a native stack's frame (c10 backtrace), also with the frame number made a markdown link
    (
        "frame #3: c10d::ProcessGroupNCCL::ncclCommWatchdog() + 0x10c (0x7f3b6e7236fc in "
        "/usr/local/lib/python3.10/dist-packages/torch/lib/libtorch_cuda.so)",
        "crash",
    ),
    (
        '{"log":"(WorkerDict pid=616, ip=192.168.149.159) frame [#45](https://github.com/o/r/pull/45): '
        'PyEval_EvalCode + 0x9f (0x55ba1909539f in sglang::scheduler_TP0)"}',
        "crash",
    ),
    # round 5: a traceback through SGLang's warm-up thread (xorbitsai/inference#2126)
    (
        '  File "/x/site-packages/sglang/srt/server.py", line 410, in _wait_and_warmup',
        "warmup_failed",
    ),
    (
        '  File "/x/site-packages/sglang/srt/entrypoints/http_server.py", line 1407, in _execute_server_warmup',
        "warmup_failed",
    ),
    # round 5: gloo's other TCP transport file (sgl-project/sglang#5883)
    (
        "Exception: Capture cuda graph failed: [/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:133] "
        "Timed out waiting 1800000ms for send operation to complete",
        "nccl",
    ),
    # kernel_compile
    ("ptxas fatal   : Value 'sm_120' is not defined for option 'gpu-name'", "kernel_compile"),
    ("triton.runtime.errors.PTXASError: PTXAS error: Internal Triton PTX codegen error", "kernel_compile"),
    (
        "subprocess.CalledProcessError: Command '/x/triton/backends/nvidia/bin/ptxas -lineinfo -v --gpu-name=sm_120 "
        "/tmp/a.ptx -o /tmp/a.ptx.o' returned non-zero exit status 255.",
        "kernel_compile",
    ),
    ("nvcc fatal   : Value 'sm_130' is not defined for option 'gpu-architecture'", "kernel_compile"),
    (
        "ValueError(\"type fp8e4nv not supported in this architecture. The supported fp8 dtypes are ('fp8e4b15', 'fp8e5')\")",
        "kernel_compile",
    ),
    (
        "Command '['/usr/bin/gcc', '/tmp/x/main.c', '-O3', '-shared']' returned non-zero exit status 1.",
        "kernel_compile",
    ),
    ("ninja: build stopped: subcommand failed.", "kernel_compile"),
    ("RuntimeError: Error building extension 'flashinfer_jit'", "kernel_compile"),
    ("triton.compiler.errors.CompilationError: at 12:4:", "kernel_compile"),
    ("error: command '/usr/local/cuda/bin/nvcc' failed with exit code 1", "kernel_compile"),
    # round 5: nvcc's own fatal diagnostic, and a JIT quoting it (sgl-project/sglang#9340, DeepGEMM on B200)
    ("nvcc fatal   : Unsupported gpu architecture 'compute_120'", "kernel_compile"),
    (
        "Warning: please use at least NVCC 12.9 for the best DeepGEMM performanceNVCC compilation failed: "
        "nvcc fatal   : Unsupported gpu architecture 'sm_100f'",
        "kernel_compile",
    ),
    # round 5: several ranks' frames mixed within lines (sgl-project/sglang#6017), weak crash evidence
    ('/sgl/srt/managers/scheduler.py, line "2209  File  in   File ', "crash"),
    # import_error, also behind launcher prefixes
    ("ModuleNotFoundError: No module named 'pybase64'", "import_error"),
    (
        "ImportError: cannot import name '_set_default_torch_dtype' from 'vllm.model_executor.model_loader'",
        "import_error",
    ),
    ("[/bin/sh@<0,0>]: ModuleNotFoundError: No module named 'sgl_kernel'", "import_error"),
    (
        "\x1b[36m(SGLangWorker pid=38138)\x1b[0m ImportError: libcudart.so.12: cannot open shared object file",
        "import_error",
    ),
    ("OSError: /opt/vllm/_core_C.abi3.so: undefined symbol: _ZN5torch6detail10class_base", "import_error"),
    # peer_access
    ("RuntimeError: CUDART error: peer access is not supported between these two devices", "peer_access"),
    ("cudaErrorPeerAccessUnsupported", "peer_access"),
    ("Failed: Cuda error /x/csrc/custom_all_reduce.cuh:307 'invalid argument'", "peer_access"),
    ("RuntimeError: custom allreduce failed: invalid device pointer", "peer_access"),
    # gpu_fault
    (
        "[Fri Aug 30 11:43:09 2024] NVRM: Xid (PCI:0000:cb:00): 13, pid='<unknown>', name=<unknown>, Graphics SM Warp Exception",
        "gpu_fault",
    ),
    ("               NVRM: fallen off the bus and is not responding to commands.", "gpu_fault"),
    (
        "Unable to determine the device handle for GPU0000:01:00.0: GPU is lost.  Reboot the system",
        "gpu_fault",
    ),
    ("cudaErrorDevicesUnavailable", "gpu_fault"),
    # model_load: config errors
    (
        "ValueError: Unrecognized model in /m. Should have a `model_type` key in its config.json, or contain",
        "model_load",
    ),
    ("ValueError: Model architectures ['DeepseekV3ForCausalLM'] are not supported for now.", "model_load"),
    (
        "AssertionError: No space left for only one request, self.token_to_kv_pool_allocator.available_size()=0",
        "oom",
    ),
    # crash: native crashes, signals, CUDA error codes, old crash banners
    ("Fatal Python error: Segmentation fault", "crash"),
    ("Fatal Python error: Aborted", "crash"),
    ("terminate called after throwing an instance of 'c10::Error'", "crash"),
    ("Aborted (core dumped)", "crash"),
    ("Killed", "crash"),
    ("Segmentation fault", "crash"),
    ("Bus error", "crash"),
    ("Subprocess scheduler_0 (pid=54464) crashed with exit code -6.", "crash"),
    ("server exited early with code -9", "crash"),
    # round 9: a launcher's failed start, the watchdog's own py-spy dump
    (
        "2025-03-28 08:30:52,932 xinference.api.restful_api 393044 ERROR    Initialization failed. Please check",
        "crash",
    ),
    ("ERROR:    Application startup failed. Exiting.", "crash"),
    ("RuntimeError: Failed to initialize the engine", "crash"),
    ("[2026-01-01 00:00:00] Scheduler PP0 TP3 crashed: CUDA out of memory", "oom"),  # the cause, named
    ("[2026-01-01 00:00:00] Scheduler PP0 TP3 crashed: worker exited", "crash"),
    ("[2026-01-01 00:00:00] Ray scheduler actor terminated with error: The actor died", "crash"),
    ("    pyspy_dump_schedulers (utils/common.py:2432)", "timeout"),
    ("    pyspy_dump_schedulers (sglang/srt/utils/cudacore_pyspy_dump_utils.py:84)", "timeout"),
    # round 10: the c10d store's NCCL-id error, AMD's fault reports, Ascend CANN's compiler
    (
        "RuntimeError: [3] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via c10d "
        "key-value store by key '0', but store->get('0') got error: wait timeout after 600000ms",
        "nccl",
    ),
    (". This may indicate a possible application crash on rank 0 or a network set up issue.", "nccl"),
    (
        "Memory access fault by GPU node-2 (Agent handle: 0x5606c2f5e1a0) on address 0x7f2a1c000000. "
        "Reason: Page not present or supervisor privilege.",
        "illegal_memory",
    ),
    (
        "[Tue Sep  9 02:30:28 2025] amdgpu 0000:c6:00.0: amdgpu: VM_L2_PROTECTION_FAULT_STATUS:0x00341051",
        "illegal_memory",
    ),
    (
        "amdgpu 0000:06:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:153 vmid:1 pasid:32771, for "
        "process python3 pid 1 thread python3 pid 1)",
        "illegal_memory",
    ),
    ("amdgpu 0000:06:00.0: amdgpu: VM_L2_PROTECTION_FAULT_STATUS:0x00000000 cleared", "illegal_memory"),
    (
        "        [Init][Compiler]Init compiler failed[FUNC:ReportInnerError][FILE:log_inner.cpp]",
        "kernel_compile",
    ),
    ("        [Set][Options]OpCompileProcessor init failed![FUNC:ReportInnerError]", "kernel_compile"),
    # round 11, from the sources: SGLang 0.5.23's own join and worker-death notices, libstdc++'s terminate
    # without an exception, absl's and glog's signal handlers, CPython's fatal-error module list (also its
    # tail alone), BrokenProcessPool, the kernel's OOM killer
    ("[2026-01-01 10:00:09] Scheduler or DataParallelController 4242 terminated with -9", "crash"),
    ("[2026-01-01 10:00:09] Scheduler or DataParallelController 4242 terminated with 1", "crash"),
    (
        "[2026-01-01 10:00:09] DP worker rank=1 (pid=4242) exited with code=-11; failing pending requests",
        "crash",
    ),
    ("terminate called without an active exception", "crash"),
    ("terminate called recursively", "crash"),
    ("*** SIGSEGV received at time=1740000000 on cpu 12 ***", "crash"),
    ("*** SIGSEGV (@0x0) received by PID 4242 (TID 0x7f0000000000) from PID 0; stack trace: ***", "crash"),
    (
        '*** Aborted at 1740000000 (unix time) try "date -d @1740000000" if you are using GNU date ***',
        "crash",
    ),
    ("Extension modules: numpy._core._multiarray_umath, torch._C, torch._C._fft (total: 3)", "crash"),
    (", psutil._psutil_linux, zmq.backend.cython._zmq, uvloop.loop, msgspec._core (total: 214)", "crash"),
    (
        "concurrent.futures.process.BrokenProcessPool: A process in the process pool was terminated abruptly "
        "while the future was running or pending.",
        "crash",
    ),
    ("[Mon Mar  3 10:00:00 2025] Out of memory: Killed process 4242 (python3) total-vm:1000kB", "crash"),
    ("Out of memory: Kill process 4242 (python3) score 900 or sacrifice child", "crash"),
    # round 20: UCX's signal handler (in-sample sgl-project/sglang#3906)
    (
        "[sglang-0:11280:0:15435] Caught signal 11 (Segmentation fault: address not mapped to object at "
        "address (nil))",
        "crash",
    ),
    ("[node-1:4242:0:4250] Caught signal 7 (Bus error: nonexistent physical address)", "crash"),
    # round 22: a device assert read by its shape, quotes and brackets garbled (in-sample Tencent/AngelSlim#16)
    (
        "/pytorch/aten/src/Alen/native/cuda/Indexkernel.cu:93: operator(): block: 10,0,01, thread: [126,0,0] "
        "Assertion '-sizes(i] < index && index < sizes (1] &",
        "device_assert",
    ),
    (
        "/pytorch/aten/src/ATen/native/cuda/IndexKernel.cu:93: operator(): block: [0,0,0], thread: [127,0,0] "
        'Assertion "index out of bounds" failed.',
        "device_assert",
    ),
    # round 22: a traceback flattened onto one line (in-sample sgl-project/sglang#15206)
    ("sglang.cli.main import main ModuleNotFoundError: No module named 'sglang'", "import_error"),
    # round 22: compilers' diagnostics (in-sample sgl-project/sglang#7768), nvcc's EDG front end and gcc's
    (
        "/usr/lib/python3.12/site-packages/flashinfer/data/csrc/nv_internal/cutlass_kernel_file_3.generated.cu(15)"
        ': error: incomplete type "cutlass::gemm::kernel::GemmUniversal<tensorrt_llm::Arch>"',
        "kernel_compile",
    ),
    (
        "/root/.cache/tvm-ffi/moe/moe_kernel.cpp:12:10: fatal error: cuda_fp8.h: No such file or directory",
        "kernel_compile",
    ),
    # round 22: SGLang's LoRA manager (in-sample sgl-project/sglang#28199)
    (
        "RuntimeError: Failed to load LoRA adapter ticket-triage: 'base_model.model.model.language_model.layers.15."
        "self_attn.v_proj.lora_A.weight'",
        "model_load",
    ),
    # round 25: CPython's report of an uncaught exception whose excepthook failed (in-sample
    # sgl-project/sglang#531)
    ("Error in sys.excepthook:", "crash"),
    ("Original exception was:", "crash"),
    # round 12, from round 10's misses (in-sample): gloo's monitored barrier, FP8 block shapes
    (
        "[rank6]:[E421 04:13:43.457389636 ProcessGroupGloo.cpp:143] Rank 6 successfully reached "
        "monitoredBarrier, but received errors while waiting for send/recv from rank 0. Please check rank 0 "
        "logs for faulty rank.",
        "nccl",
    ),
    ("RuntimeError: Ranks 1, 3 failed to pass monitoredBarrier in 600000 ms", "nccl"),
    (
        "ValueError: Weight output_partition_size = 8 is not divisible by weight quantization block_n = 128.",
        "model_load",
    ),
    (
        "ValueError: Weight input_size_per_partition = 96 is not divisible by weight quantization "
        "block_k = 128.",
        "model_load",
    ),
    ("OSError: [Errno 28] No space left on device", "crash"),  # the disk, not the KV pool: not oom
    ("sglang-1 exited with code 137", "crash"),
    ("subprocess.CalledProcessError: Command '['python3']' died with <Signals.SIGKILL: 9>.", "crash"),
    ("Exception: process 0 terminated with signal SIGABRT", "crash"),
    ("container sglang exited with code -9", "crash"),
    ("RuntimeError: CUDA error: operation not permitted when stream is capturing", "crash"),
    ("CUDA Error 999: unknown error", "crash"),
    ("cudaErrorUnknown", "crash"),
    ("CUDA_ERROR_LAUNCH_TIMEOUT", "crash"),
    ("RuntimeError: CUDART error: initialization error", "crash"),
    ("Exception in run_tp_server:", "crash"),
    ("router init state: Traceback (most recent call last):", "crash"),
    ("Child process unexpectedly failed with an exit code 1. pid=1234", "crash"),
    # generic traceback evidence (weak), behind every launcher prefix
    ("    assert num_stages >= 1", "assertion"),
    ("IndexError: list index out of range", "crash"),
    ('  File "/sgl/scheduler.py", line 2740, in run_scheduler_process', "crash"),
    ('(SGLangWorker pid=38135) File "/x/jit.py", line 662, in run', "crash"),
    ('x (SGLangWorker pid=38135) File "/x/jit.py", line 662, in run', "crash"),
    ("Traceback (most recent call last):", "crash"),
    ("sglang-1  | ValueError: boom", "crash"),
    ("2025-07-25T07:53:08.21748708+08:00 stdout F NameError: name 'deep_gemm' is not defined", "crash"),
    ("[2025-12-15 00:02:05 PP1 TP1] torch.AcceleratorError: boom", "crash"),
    ("TP3 RuntimeError: boom", "crash"),
    ("PP1 TP1 RuntimeError: boom", "crash"),
    ("[1,0]<stderr>:tvm.error.InternalError: boom", "crash"),
    ("0: KeyError: 'model_type'", "crash"),
    ("Capturing batches: 29%|##  | 8/28\r[2025-05-16 10:48:21 TP1] RuntimeError: boom", "crash"),
    ("Exception:", "crash"),
    # issue 27: the catalog's shapes (healthchecks/signatures/shapes.py), lines from public issues and wheels
    ("ValueError: No processor registered for architecture: ['Phi4MMForCausalLM'].", "model_load"),
    ("Message: 'Received sigquit from a child proces. It usually means the child failed.'", "crash"),
    ("Exception: Server process exited with code -9. Check server logs for errors.", "crash"),
    ("[2025-08-04 10:10:09] Rank 0 scheduler is dead. Please check if there are relevant logs.", "crash"),
    (
        "RuntimeError: Expected a.is_contiguous() to be true, but got false.  (Could this error message be "
        "improved?  If so, please report an enhancement request to PyTorch.)",
        "crash",
    ),
    (
        'Assertion 0 && "ERROR : Arch conditional MMA instruction used without targeting appropriate compute '
        'capability. Aborting.\\n" failed.',
        "unsupported_arch",
    ),
    (
        "RuntimeError: Cake FMHA requires compute capability 10.0 (B200/GB200) or 10.3 (B300/GB300), got 10.7",
        "unsupported_arch",
    ),
    (
        "flashinfer.utils.BackendSupportedError: alphamoe_fp8_block_scale_aligned_moe does not support compute "
        "capability 107; supported compute capabilities: [100, 103]",
        "unsupported_arch",
    ),
    ("    assert torch.cuda.get_device_capability(hidden_states.device)[0] >= 9, (", "unsupported_arch"),
    ("RuntimeError: Failed: Assertion error csrc/utils/layout.hpp:57 'Unknown recipe'", "unsupported_arch"),
    ("RuntimeError: CUDA error: invalid device function", "no_kernel_image"),
    (
        "triton.runtime.errors.OutOfResources: shared memory, Required: 147456, Hardware limit: 101376",
        "shared_memory",
    ),
    ("triton.runtime.errors.OutOfResources: out of resource: shared me", "shared_memory"),
    (
        '            raise_(OutOfResources(self.metadata.shared, max_shared, "shared memory"))',
        "shared_memory",
    ),
    (
        "`triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 163842, Hardware "
        "limitation: 101376. reducing the block size or `num_stages` may help`.",
        "shared_memory",
    ),
    (
        "CUDA Error: invalid argument (invalid argument) /root/.cudaforge/git/checkouts/flashinfer-a49b45336e56e461/"
        "include/flashinfer/attention/hopper/prefill_sm90.cuh: line 414 at function cudaFuncSetAttribute(kernel, "
        "cudaFuncAttributeMaxDynamicSharedMemorySize, smem_size)",
        "shared_memory",
    ),
    # issue 36 (healthchecks/signatures/evidence.py): the texts of its sources, none from a held-out log
    ("FileNotFoundError: [Errno 2] No such file or directory: 'ninja'", "kernel_compile"),
    ("RuntimeError: Ninja is required to load C++ extensions", "kernel_compile"),
    ("/bin/sh: 1: ninja: not found", "kernel_compile"),
    (
        "[E socket.cpp:860] [c10d] The client socket has timed out after 60s while trying to connect to "
        "192.0.0.1:1234",
        "nccl",
    ),
    (
        "torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The connection to the C10d "
        "store has failed. See inner exception for details.",
        "nccl",
    ),
    ("torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients.", "nccl"),
    ("[W socket.cpp] TCPStore client failed to connect to host node-0:5000", "nccl"),
    (
        "Assertion failed: deep_gemm/include/deep_gemm/impls/sm100_fp8_gemm_1d1d.cuh:210, condition: "
        "num_tokens <= BLOCK_M",
        "device_assert",
    ),
    (
        "[2026-07-07 10:00:00 TP0] max_total_tokens=131072 is larger than the profiled value -4096. Use the "
        "profiled value instead.",
        "oom",
    ),
    (
        "NVRM: Xid (PCI:0000:01:00): 119, pid=2211, name=python3, Timeout after 45s of waiting for RPC "
        "response from GPU0 GSP! Expected function 76 (GSP_RM_CONTROL) (0x20801702 0x4).",
        "gpu_fault",
    ),
    ("Timeout after 45s of waiting for RPC response from GPU0 GSP! Expected function 76", "gpu_fault"),
    (
        "ValueError: TRTLLM MHA backend is only supported on Blackwell GPUs (SM100). Please use a "
        "different backend.",
        "unsupported_arch",
    ),
    ("AssertionError: Only sm100 is supported", "unsupported_arch"),
    ("RuntimeError: Blackwell (SM100) required for this kernel", "unsupported_arch"),
    ("[2026-09-08 10:00:00 TP0] Assertion 'NaN detected! sampler: next_token_logits' failed.", "nan"),
    # round 4 (evidence.py, in-sample): the driver's GSP time-out banner in both its forms (kernel_gsp.c),
    # SGLang's own words when the weights leave no KV cache (a real run's traceback, quoted in public)
    (
        "NVRM: _kgspLogXid119: ********************************* GSP Timeout "
        "**********************************",
        "gpu_fault",
    ),
    (
        "NVRM: GPU0 _kgspLogGspTimeout: *** GSP Timeout: GSP heartbeat timeout (origin=HealthCheck) ***",
        "gpu_fault",
    ),
    (
        "ValueError: Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=0.5.",
        "oom",
    ),
    # round 7 (in-sample): ProcessGroupNCCL's watchdog in other torch versions' words (ProcessGroupNCCL.cpp)
    (
        "[rank3]:[E227 16:30:43.526 ProcessGroupNCCL.cpp:1785] [PG ID 2 PG GUID 3 Rank 3] Exception (either an "
        "error or timeout) detected by watchdog at work: 32, last enqueued NCCL work: 32, last completed NCCL "
        "work: 31.",
        "nccl",
    ),
    (
        "[rank3]:[E710 18:00:32.426 ProcessGroupNCCL.cpp:2395] [PG ID 0 PG GUID 0(default_pg) Rank 3]  failure "
        "detected by watchdog at work sequence id: 59958 PG status: last enqueued work: 59998",
        "nccl",
    ),
    ("[Rank 3] Timeout at NCCL work: 32, last enqueued NCCL work: 32, last completed NCCL work: 31.", "nccl"),
    (
        "[E ProcessGroupNCCL.cpp:414] Some NCCL operations have failed or timed out. Due to the asynchronous "
        "nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.",
        "nccl",
    ),
    ("[rank2]: Received a dump signal due to a collective timeout from rank 10 and we will try", "nccl"),
    ("[PG ID 0 PG GUID 0 Rank 1] Process group watchdog thread terminated with exception: boom", "nccl"),
    ("[Rank 0] Heartbeat monitor timed out! Process will be terminated after dumping debug info.", "nccl"),
    # round 7: the checkpoint's own exception types (safetensors, torch's load_state_dict, huggingface_hub)
    (
        "safetensors_rust.SafetensorError: Error while deserializing header: MetadataIncompleteBuffer",
        "model_load",
    ),
    ("RuntimeError: Error(s) in loading state_dict for LlamaForCausalLM:", "model_load"),
    (
        "huggingface_hub.errors.LocalEntryNotFoundError: Cannot find an appropriate cached snapshot folder",
        "model_load",
    ),
    ("huggingface_hub.errors.RevisionNotFoundError: 404 Client Error.", "model_load"),
    ("FileNotFoundError: [Errno 2] No such file or directory: '/tmp/cache/marker'", "crash"),  # not those
    # round 7: a killed job as a script's shell reports it; glibc's heap checks (malloc_printerr)
    ("/bin/bash: line 1:    12 Killed                  python3 -m sglang.launch_server --model m", "crash"),
    ("run.sh: line 7: 4242 Segmentation fault      python3 -m sglang.launch_server", "crash"),
    ("double free or corruption (out)", "crash"),
    ("free(): invalid pointer", "crash"),
    ("munmap_chunk(): invalid pointer", "crash"),
    ("corrupted size vs. prev_size", "crash"),
    ("malloc(): corrupted top size", "crash"),
    # round 7: an arch gate worded as an SM version (FlashInfer's CUTLASS FMHA assert, TensorRT-LLM)
    ("AssertionError: Unsupported SM version", "unsupported_arch"),
    ("RuntimeError: Unsupported SM version for FP8 block scaling GEMM", "unsupported_arch"),
    # round 7: torch.distributed's network error type, and the NCCL id's exchange through the store
    ("torch.distributed.DistNetworkError: Connection reset by peer", "nccl"),
    (
        "torch.distributed.DistBackendError: [3] is setting up NCCL communicator and retrieving ncclUniqueId "
        "from [0] via c10d key-value store by key '0', but store->get('0') got error: Socket Timeout",
        "nccl",
    ),
    (
        "RuntimeError: [1] is setting up NCCL communicator and retreiving ncclUniqueId from [0] via c10d",
        "nccl",
    ),
    # round 7: the c10d store's socket in socket.cpp's other words
    (
        "[rank1]:[W623 15:37:01.824 socket.cpp:485] [c10d] waitForInput: socket SocketImpl(fd=100, "
        "addr=[node-0]:43590, remote=[node-0]:20000) timed out after 1800000ms",
        "nccl",
    ),
    (
        "torch.distributed.DistNetworkError: The server socket has failed to listen on any local network "
        "address. port: 29500, useIpv6: 0, code: -98, name: EADDRINUSE",
        "nccl",
    ),
    (
        "RuntimeError: The client socket has failed to connect to any network address of (node-0, 29500).",
        "nccl",
    ),
    # round 7: a failed capture by SGLang's hint (CUDA_GRAPH_CAPTURE_FAILED_MSG, its 2024 spelling, the
    # piecewise runners' hints) and the capture line in another case
    ("4. disable CUDA graph by --disable-cuda-graph. (Not recommended. Huge performance loss)", "crash"),
    ("4. disable cuda graph by --disable-cuda-graph. (Not recommonded. Huge perf loss)", "crash"),
    ("2. set --cuda-graph-max-bs to a smaller value (e.g., 16)", "crash"),
    ("2. set --piecewise-cuda-graph-max-tokens to a smaller value (e.g., 512)", "crash"),
    ("To work around this error, add --disable-piecewise-cuda-graph to your launch command.", "crash"),
    ("Exception: Capture CUDA graph failed: CUDA error: out of bounds", "crash"),
    ("Piecewise CUDA graph failed.", "crash"),
    # round 13, from its training batch: a Rust panic (sglang-router), ROCm aiter's chip table, transformers'
    # missing or unreadable files, the CUDA OOM codes as torch_memory_saver prints them, the store lost
    (
        "[SGLang LOG] thread 'actix-rt|system:0|arbiter:242' panicked at /root/.cargo/registry/src/"
        "index.crates.io-6f17d22bba15001f/actix-server-2.5.0/src/worker.rs:429:30:",
        "crash",
    ),
    ("thread 'main' panicked at 'called `Option::unwrap()` on a `None` value', src/main.rs:4:5", "crash"),
    (
        "KeyError: \"Unknown GPU architecture: gfx1101. Supported architectures: ['native', 'gfx90a', 'gfx942']\"",
        "unsupported_arch",
    ),
    (
        "OSError: lmms-lab/llava-onevision-qwen2-72b-ov does not appear to have a file named "
        "preprocessor_config.json. Checkout 'https://huggingface.co/lmms-lab/llava-onevision-qwen2-72b-ov/tree/"
        "main' for available files.",
        "model_load",
    ),
    (
        "OSError: It looks like the config file at '/models/minimind/pytorch_model.pth' is not a valid JSON file.",
        "model_load",
    ),
    (
        "[torch_memory_saver.cpp] cudaError error: 2 (out of memory) file=csrc/core.cpp func=resume line=172",
        "oom",
    ),
    ("cuMemCreate failed: CUDA_ERROR_OUT_OF_MEMORY", "oom"),
    (
        "[rank12]:[W318 10:00:41.915284135 TCPStore.cpp:125] [c10d] recvValue failed on SocketImpl(fd=135, "
        "addr=[sglang-0-1]:48750, remote=[sglang-0]:20000): Connection reset by peer",
        "nccl",
    ),
    (
        "[rank8]:[W318 10:00:41.929037914 ProcessGroupNCCL.cpp:1771] [PG ID 0 PG GUID 0 Rank 8] Failed to check "
        'the "should dump" flag on TCPStore, (maybe TCPStore server has shut down too early), with error: x',
        "nccl",
    ),
    ("[2026-01-01 00:00:00] Timeout waiting for worker ports from node 0", "nccl"),
    ("RuntimeError: Failed to receive worker ports from node 0 within timeout", "nccl"),
    # round 14, from rounds 11 and 12's misses: other devices' OOM words, cuBLAS's allocation, CANN's invalid
    # address, a launcher's or router's readiness wait, SGLang's watchdog dump, thread dumps
    (
        "[2026-05-29 16:30:21:955] torch_npu.memory: [ERROR] [1537] NPU out of memory. Tried to allocate "
        "450.00 MiB (NPU 0; 61.27 GiB total capacity; 55.97 GiB already allocated)",
        "oom",
    ),
    (
        "[12-24 08:20:04] [TextEncodingStage] Error during execution after 14.8984 ms: CUDA error: "
        "CUBLAS_STATUS_ALLOC_FAILED when calling cublasCreate(handle)",
        "oom",
    ),
    (
        "       The extend info: errcode:(0, 0x200000000000000, 0) errorStr: The MPU address access is invalid. "
        "fixp_error0 info: 0xa0bfbd5",
        "illegal_memory",
    ),
    ("Exception: sglang server did not become ready after waiting.", "health_timeout"),
    (
        "(RolloutManager pid=519445) For more information check: https://developer.mozilla.org/en-US/docs/Web/"
        "HTTP/Status/503, retrying... (attempt 60/60, url=http://10.0.0.1:4674/generate, response=No available "
        "workers (all circuits open or unhealthy))",
        "health_timeout",
    ),
    ("[2025-11-05 10:18:51] Pyspy dump for PID 499:", "timeout"),
    ("[2025-11-05 10:18:51] self.cur_batch.batch_size()=1", "timeout"),
    ('Thread 90256 (idle): "Thread-1"', "hang"),
    ('Thread 499 (active+gil): "MainThread"', "hang"),
    # round 27: faulthandler's dump is a fatal signal's (SGLang only enables it for those), unless its timer
    # made it ('Timeout (0:05:00)!', dump_traceback_later)
    ("Thread 0x00007fce47ae1480 (most recent call first):", "crash"),
    ("Current thread 0x00007769465bb740 (most recent call first):", "crash"),
    ("Timeout (0:05:00)!", "hang"),
    ("Timeout (0:00:30.500000)!", "hang"),
    # round 27, from round 26's misses (in-sample): SGLang's model-class resolution, torch.compile
    (
        "ValueError: Cannot find model module. 'Qwen2_5OmniModel' is not a registered model in the "
        "Transformers library (only relevant if the model is meant to be in Transformers)",
        "model_load",
    ),
    (
        "ValueError: FooForCausalLM has no SGlang implementation and the Transformers implementation is not "
        "compatible with SGLang.",
        "model_load",
    ),
    (
        "[2026-02-28 15:04:30 TP0] Scheduler hit an exception: torch._dynamo.exc.Unsupported: Logger not "
        "supported for non-export cases.",
        "kernel_compile",
    ),
    ("torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:", "kernel_compile"),
    ("torch._inductor.exc.InductorError: LoweringException: AssertionError:", "kernel_compile"),
    # round 16, from round 14's misses: sgl_kernel's loader, NVSHMEM's transport, torch_memory_saver's
    # driver calls
    ("3. Standard Python import: common_ops - failed", "import_error"),
    ("Please ensure sgl_kernel is properly installed with:", "import_error"),
    (
        "/sgl-workspace/nvshmem/src/host/init/init.cu:1007: non-zero status: 7 nvshmem setup connections failed",
        "nccl",
    ),
    (
        "/sgl-workspace/nvshmem/src/modules/transport/ibrc/ibrc.cpp:1433: non-zero status: 7 ep_connect failed",
        "nccl",
    ),
    (
        "[torch_memory_saver.cpp] CUresult error  result=1 file=csrc/torch_memory_saver.cpp func=resume line=206",
        "crash",
    ),
    ("[torch_memory_saver.cpp] CUresult error  result=2 file=csrc/torch_memory_saver.cpp func=resume", "oom"),
    # round 15, from the vendors' own texts: ROCm's HIP and RCCL, XLA on TPU, Ascend's CANN and HCCL, glibc,
    # CPython's thread death
    ("RuntimeError: HIP error: out of memory", "oom"),
    ("hipErrorOutOfMemory", "oom"),
    (
        "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate "
        "1.50GiB.",
        "oom",
    ),
    (
        "ValueError: RESOURCE_EXHAUSTED: Error allocating device buffer: Attempting to allocate 8.00M. That was "
        "not possible. There are 6.43M free.; (0x0x1_HBM0)",
        "oom",
    ),
    ("EL0004: Failed to allocate memory.", "oom"),
    ("hipErrorIllegalAddress", "illegal_memory"),
    ("RuntimeError: RCCL error: unhandled system error", "nccl"),
    (
        "RuntimeError: HCCL function error: HcclCommInitRootInfo(numRanks, &rootInfo, rank, &comm), error "
        "code is 7",
        "nccl",
    ),
    (
        "EI0006: Getting socket times out. Reason: 1. The remote does not initiate a connect request. some NPUs "
        "in the cluster are abnormal.",
        "nccl",
    ),
    ("[ERROR] HCCL(4242,python):2025-11-05-10:18:51.123.456 [hccl_communicator.cc:123] timeout", "nccl"),
    ("EZ9999: Inner Error!", "crash"),
    ("OSError: libhccl.so: cannot open shared object file: No such file or directory", "import_error"),
    ("Exception in thread Thread-3 (forward_thread_func):", "crash"),
    # round 13, from the launchers' sources: Compose, kubelet, systemd, Open MPI, Slurm, Ray, uvicorn, glibc
    ("sglang-1 exited with code 1", "crash"),
    ("  Warning  BackOff  2m (x5 over 4m)  kubelet  Back-off restarting failed container sglang", "crash"),
    ("sglang-0   0/1     CrashLoopBackOff   5 (40s ago)   6m", "crash"),
    ("      Reason:       OOMKilled", "crash"),
    ("sglang.service: Main process exited, code=exited, status=1/FAILURE", "crash"),
    ("sglang.service: Main process exited, code=killed, status=9/KILL", "crash"),
    ("sglang.service: Failed with result 'exit-code'.", "crash"),
    ("mpirun noticed that process rank 0 with PID 1234 on node n1 exited on signal 9 (Killed).", "crash"),
    ("Primary job  terminated normally, but 1 process returned", "crash"),
    ("mpirun detected that one or more processes exited with non-zero status, thus causing", "crash"),
    ("srun: error: node1: task 0: Exited with exit code 1", "crash"),
    ("slurmstepd: error: Detected 1 oom_kill event in StepId=123.0.", "crash"),
    ("(raylet) The actor died unexpectedly before finishing this task.", "crash"),
    ("A worker died or was killed while executing a task by an unexpected system error.", "crash"),
    ("Worker exit type: SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits", "crash"),
    (
        "ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 30000): address already "
        "in use",
        "crash",
    ),
    ("*** stack smashing detected ***: terminated", "crash"),
    ("SystemExit: 1", "crash"),
    (
        'docker: Error response from daemon: could not select device driver "" with capabilities: [[gpu]].',
        "crash",
    ),
    (
        "Error response from daemon: failed to create task for container: failed to create shim task: OCI "
        "runtime create failed: nvidia-container-cli: initialization error",
        "crash",
    ),
]

# Lines that must never raise an alarm (warnings, deprecations, help texts, server_args dumps).
BENIGN = [
    # round 13: allocators that retry, the launchers' clean stops (128 + SIGTERM / SIGINT, systemd's TERM)
    "[torch_memory_saver.cpp] cuMemCreate CUDA_ERROR_OUT_OF_MEMORY (may not be an issue e.g. torch allocator "
    "will free cache and retry)",
    "sglang-1 exited with code 0",
    "sglang-1 exited with code 143",
    "sglang.service: Main process exited, code=killed, status=15/TERM",
    "SystemExit: 0",
    "[2026-10-31 08:00:02] WARNING overrides.py:537: Setting KV cache dtype to fp8_e4m3 for DeepSeek DSA on SM12 device.",
    "[2026-10-31 08:00:02] Set DSA backends for GLM FP8 KV Cache on SM120/SM121: prefill=flashinfer_sparse_mla, decode=flashinfer_sparse_mla.",
    "[2026-10-31 08:00:01] '--nsa-prefill-backend' is deprecated and will be removed in a future release. Use '--dsa-prefill-backend' instead.",
    "  --enable-nan-detection  Enable the NaN detection for debugging purposes.",
    "server_args=ServerArgs(enable_nan_detection=False, watchdog_timeout=300, api_key=None, skip_server_warmup=False)",
    "[2026-03-02 10:14:56] If you experience issues related to RoPE parameters, ... downgrading to transformers==4.57.1",
    "[2026-03-02 10:15:04 TP0] NCCL version 2.27.5+cuda12.9",
    "[2026-03-02 10:15:06 TP0] sglang is using nccl==2.27.5",
    "[2026-03-02 10:17:55 TP0] Capture cuda graph begin. This can take up to several minutes. avail mem=14.01 GB",
    "[2026-03-02 10:21:27] The server is fired up and ready to roll!",
    "[2026-03-02 10:40:03] Health check request received during shutdown. Returning 503.",
    "[2026-03-02 10:21:26] Endpoint '/get_model_info' is deprecated and will be removed in a future version.",
    "[2026-03-02 10:14:58] Ignore import error when loading sglang.srt.models.glm4v_moe: No module named 'decord'",
    "bwstack-serve: server stopped: exit status 143 after SIGTERM",
    "sglang-1 exited with code 0",
    "[2026-03-02 10:14:58] Failed to start the profiler thread; continuing without it",
    "    _watchdog_once (utils/watchdog.py:138)",
    "    time.sleep(self.watchdog_timeout / 2)",
    "sglang-1 exited with code 143",
    "Subprocess exited with code -15",
    "[2026-03-02 10:40:04] Scheduler or DataParallelController 4243 terminated with -15",
    "[2026-03-02 10:40:04] Scheduler or DataParallelController 4243 terminated with 0",
    "[2026-03-02 10:40:04] DP worker rank=1 (pid=4243) exited with code=-15; failing pending requests",
    "Total tokens (total: 12)",
    "[2026-03-02 10:17:55 TP0] KV Cache is allocated. #tokens: 441344, K size: 3.16 GB, available_size()=441344",
    "bwstack-serve: starting python3 -m sglang.launch_server --model-path m --api-key ***",
    "WARNING 12-29 15:21:09 [custom_all_reduce.py:154] Custom allreduce is disabled because it's not supported on more than two PCIe-only GPUs.",
    "adp-1:235:235 [1] NCCL INFO Channel 13/0 : 1[1] -> 2[2] via P2P/IPC",
    "Loading safetensors checkpoint shards: 100% Completed | 14/14 [00:07<00:00,  1.85it/s]",
    "(SGLangWorker pid=3) [2025-03-08 12:29:29] INFO:     Started server process [3207]",
    "[2025-03-08 12:29:21 TP0] KV Cache is allocated. #tokens: 46611, K size: 1.42 GB, V size: 1.42 GB",
    "[2026-01-12 02:47:10] Endpoint '/get_model_info' is deprecated and will be removed",
    "/usr/lib/python3/transformers/utils/hub.py:128: FutureWarning: Using `TRANSFORMERS_CACHE` is deprecated",
    "  warnings.warn(",
    "[2025-06-19 15:12:18] server_args=ServerArgs(disable_custom_all_reduce=False, enable_p2p_check=False)",
    "[2025-03-10 14:17:52 TP6] Ignore import error when loading sglang.srt.models.foo: No module named 'bar'",
    "Capture cuda graph bs [1, 2, 4, 8] Exceptions=0",
    # issue 27: what the shapes must not read as a failure (torch's and SGLang's own words on healthy runs)
    "    Found GPU0 NVIDIA GB10 which is of cuda capability 12.1.",
    "    Minimum and Maximum cuda capability supported by this version of PyTorch is",
    "Warning: please use at least NVCC 12.9 for the best DeepGEMM performance",
    "[2026-10-31 08:00:02 TP0] NVFP4 w4a4 requires compute capability >= 10.0; serving this checkpoint "
    "weight-only via FP4 Marlin instead. Activation quantization is ignored.",
    "[2026-04-08 14:05:21 TP0] Decode batch, #running-req: 5, #token: 20800, token usage: 0.29, cuda graph: True, "
    "gen throughput (token/s): 144.95, #queue-req: 0",
    "[2026-03-06 08:43:46] Use marlin as FP4 GEMM runner backend on SM120 for Muse Glimmer",
    '[2025-10-07 23:22:55] INFO:     127.0.0.1:40052 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
    # round 4: SGLang's warning on the custom all-reduce it goes on without (parallel_state.py), whatever it quotes
    "[2026-04-14 16:08:44 TP1] Setup Custom allreduce failed with CUDART error: peer access is not supported "
    "between these two devices. To silence this warning, specify --disable-custom-all-reduce explicitly.",
    "[t TP0] Setup Custom allreduce failed with invalid literal for int() with base 10: 'GPU-0e72'. To silence "
    "this warning, specify --disable-custom-all-reduce explicitly.",
    # round 5: the floor rule reads a refusal, not a fallback nor a limit on something else
    "[2025-09-01 10:00:00] FlashInfer only supports sm75+ kernels here, falling back to triton",
    "DeepSeek DSA only supports bf16 here",
    "[2026-05-01 10:00:00] Capture frame #3 of the video: 0x10 bytes",
    # round 5: nvcc named without a fatal diagnostic; a line naming files, not frames
    "nvcc: NVIDIA (R) Cuda compiler driver",
    "[2026-05-01 10:00:00] File /models/a.safetensors loaded; File /models/b.safetensors queued",
    # round 7: the new keys' words in healthy lines (a read time-out retried, a smaller value chosen)
    "[2026-05-01 10:00:00] Request to the model hub timed out after 10s, retrying",
    "[2026-05-01 10:00:00] Set chunked_prefill_size to a smaller value (4096) for this GPU",
    "[2026-05-01 10:00:00] server_args=ServerArgs(disable_cuda_graph=False, cuda_graph_max_bs=16)",
    # round 27: a timeout's words where faulthandler did not print them; torch.compile named, not failing
    "[2026-05-01 10:00:00] Timeout (30s) reached while waiting for the model download, retrying",
    "[2026-05-01 10:00:00] torch._dynamo.exc is imported lazily; compile mode: max-autotune",
    # round 25: the excepthook's words where CPython did not print them (a line of prose, a log message)
    "[2026-05-01 10:00:00] Installed a handler for sys.excepthook; the original exception was logged above",
]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_log_excerpt_classifies_to_its_root_cause(name: str) -> None:
    cls, also = EXPECTED[name]
    path = LOGS / name
    match = classify_file(str(path))
    assert match is not None
    assert match.cls == cls
    assert set(match.also) >= also
    assert cls not in match.also
    lines = path.read_text().splitlines()
    assert match.text == lines[match.line - 1].strip()
    assert match.signature.matches(match.text)


@pytest.mark.parametrize("name", HEALTHY)
def test_normal_startup_log_is_healthy(name: str) -> None:
    assert classify_file(str(LOGS / name)) is None


def test_every_log_class_has_an_excerpt() -> None:
    assert {cls for cls, _ in EXPECTED.values()} == LOG_CLASSES


@pytest.mark.parametrize(("line", "cls"), EXAMPLES, ids=[f"{c}-{i}" for i, (_, c) in enumerate(EXAMPLES)])
def test_each_pattern_alternative(line: str, cls: str) -> None:
    match = classify_text(line + "\n")
    assert match is not None and match.cls == cls


def test_every_signature_is_exercised_and_its_keys_prefilter_soundly() -> None:
    for sig in SIGNATURES:
        hits = [line for line, _ in EXAMPLES if sig.pattern.search(line)]
        assert hits, f"no example for {sig.pattern.pattern!r}"
        for line in hits:
            assert any(key in line for key in sig.keys), (sig.pattern.pattern, line)


def test_a_gate_that_only_warns_is_found_by_the_pattern_and_dropped_by_unless() -> None:
    line = "[2025-09-01 10:00:00] FlashInfer only supports sm75+ kernels here, falling back to triton"
    gates = [sig for sig in SIGNATURES if sig.unless and sig.pattern.search(line)]
    assert gates and not any(sig.matches(line) for sig in gates)
    assert all(sig.matches(line.replace(", falling back to triton", "")) for sig in gates)


@pytest.mark.parametrize("line", BENIGN)
def test_no_false_alarm(line: str) -> None:
    assert classify_text(line + "\n") is None


def test_catalog_entries_are_complete() -> None:
    for sig in SIGNATURES:
        assert sig.cls in signatures.CLASSES
        assert sig.source.strip() and sig.keys
    assert set(signatures.DESCRIPTIONS) == set(signatures.CLASSES)
    assert set(signatures.SEVERITY) == set(signatures.CLASSES)
    assert (
        signatures.SEVERITY["healthy"] == 0
        and max(signatures.SEVERITY.values()) == signatures.SEVERITY["nan"]
    )


def test_root_cause_order() -> None:
    nan_after_assert = (
        "RuntimeError: CUDA error: device-side assert triggered\nValueError: Input probs contains NaN.\n"
    )
    match = classify_text(nan_after_assert)
    assert match is not None and (match.cls, match.line, match.also) == ("nan", 2, ("device_assert",))
    crash_first = (
        "Scheduler hit an exception: Traceback\n    assert not self.nsa_kv_cache_store_fp8\nAssertionError\n"
    )
    match = classify_text(crash_first)
    assert match is not None and (match.cls, match.line) == ("assertion", 2)
    arch = "Received sigquit from a child process.\nRuntimeError: Unsupported architecture\n"
    assert (m := classify_text(arch)) is not None and m.cls == "unsupported_arch"
    two_crashes = "SIGQUIT received. x\nScheduler hit an exception: y\n"
    assert (m := classify_text(two_crashes)) is not None and m.line == 1


def test_lines_text_and_file_agree(tmp_path: Path) -> None:
    path = LOGS / "oom_cuda_graph_capture.log"
    text = path.read_text()
    by_lines = classify_lines(text.splitlines())
    by_text = classify_text(text)
    by_file = classify_file(str(path), chunk_bytes=64)
    assert by_lines == by_text == by_file
    assert by_file is not None and by_file.to_dict()["class"] == "oom"
    crlf = tmp_path / "crlf.log"
    crlf.write_bytes(text.replace("\n", "\r\n").encode())
    assert (m := classify_file(str(crlf))) is not None and (m.cls, m.line) == (by_text.cls, by_text.line)  # type: ignore[union-attr]


def test_scanner_state_round_trip_continues_the_scan() -> None:
    text = (LOGS / "nan_multinomial_dense_fp8kv.log").read_text()
    lines = text.splitlines(keepends=True)
    first = Scanner()
    first.feed("".join(lines[:7]))
    resumed = Scanner.from_state(json.loads(json.dumps(first.to_state())))
    resumed.feed("".join(lines[7:]))
    assert resumed.result() == classify_text(text)
    assert Scanner.from_state({"garbage": 1}).result() is None


def test_match_to_dict_shape() -> None:
    match = classify_text("ok\nRuntimeError: CUDA error: out of memory\n")
    assert match is not None
    assert match.to_dict() == {
        "class": "oom",
        "line": 2,
        "text": "RuntimeError: CUDA error: out of memory",
        "also": [],
    }


def test_long_lines_are_truncated_in_the_match_text() -> None:
    match = classify_text("x" * 5000 + " CUDA out of memory\n")
    assert match is not None and len(match.text) <= signatures.MAX_TEXT


def test_module_is_stdlib_only() -> None:
    """The catalog package (healthchecks/signatures/) imports the stdlib and its own modules, nothing else."""
    parts = sorted(Path(signatures.__file__).parent.glob("*.py"))
    assert len(parts) > 1
    for part in parts:
        source = part.read_text()
        imported = set(re.findall(r"^(?:from|import) (\w+)", source, flags=re.MULTILINE))
        assert imported <= {
            "__future__",
            "re",
            "collections",
            "dataclasses",
            "hashlib",
            "typing",
            "healthchecks",
        }, part.name
        # its own modules, and the stdlib-only protocol module (the serve wrapper's marker lines)
        siblings = re.findall(r"^from (healthchecks[\w.]*) import (\w+)", source, flags=re.MULTILINE)
        for module, name in siblings:
            ok = module.startswith("healthchecks.signatures") or (module, name) == ("healthchecks", "verdict")
            assert ok, f"{part.name}: from {module} import {name}"


def test_a_handled_traceback_before_the_ready_line_is_no_verdict() -> None:
    """Real SGLang 0.5.9 on the CPU logs a ModuleNotFoundError (openai_harmony: the Responses API is off),
    then serves: generic traceback evidence followed by the ready line was handled. After it, it counts."""
    handled = [
        "[2026-12-02 16:40:06] server_args=ServerArgs(model_path='tiny', tokenizer_path='tiny')",
        "[2026-12-02 16:40:20] Can not initialize OpenAIServingResponses: Traceback (most recent call last):",
        "ModuleNotFoundError: No module named 'openai_harmony'",
        "[2026-12-02 16:40:31] The server is fired up and ready to roll!",
    ]
    scanner = signatures.Scanner()
    scanner.feed("\n".join(handled) + "\n")
    assert scanner.verdict() == "healthy"
    scanner.feed("Traceback (most recent call last):\nModuleNotFoundError: No module named 'x'\n")
    assert scanner.verdict() == "import_error"
    restored = signatures.Scanner.from_state(scanner.to_state())
    assert restored.verdict() == "import_error"
