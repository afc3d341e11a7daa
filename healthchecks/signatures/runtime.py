"""Failure signatures, second part: loading, collectives, hangs, the Python environment, drivers, crashes.

Stdlib only; part of the one failure catalog (:mod:`healthchecks.signatures` joins
:mod:`healthchecks.signatures.gpu` and this table, in that order). Families: ``model_load``,
``device_assert``, ``nccl``, ``health_timeout``/``timeout``, ``warmup_failed``, the generic ``assertion``,
``kernel_compile``, ``import_error``, ``peer_access``, ``gpu_fault``, ``crash``, and the generic traceback
evidence (weak: a verdict only once the server stopped answering). Each entry names the public source of its
text.
"""

from __future__ import annotations

import re

from healthchecks import verdict
from healthchecks.signatures.entry import LINE_START, MODEL_CLASS, RETRIED, Signature, sig

_WEAK = 95  # generic traceback evidence: ranks after every crash banner


def _launcher(regex: str, keys: tuple[str, ...], source: str) -> Signature:
    """A launcher's death notice (round 13: written from the launcher's own texts, not from a log): crash."""
    return sig(
        "crash",
        regex,
        keys,
        source + "; round 13, from the launcher's own texts",
        "the server's process died or never started: read the lines above it, and the launcher's own log "
        "(kubectl describe, journalctl -u, dmesg for the OOM killer)",
    )


SIGNATURES: tuple[Signature, ...] = (
    # --- model_load --------------------------------------------------------------------------------------
    sig(
        "model_load",
        r"KeyError: '(?:glm_moe_dsa|glm5\w*)'",
        ("KeyError: '",),
        "transformers too old for GLM-5; zai-org/GLM-5#22, sgl-project/sglang#19408",
        "transformers >= 5.2 (SGLang >= 0.5.10)",
    ),
    sig(
        "model_load",
        r"Transformers does not recognize this architecture|does not recognize this architecture",
        ("does not recognize this architecture",),
        "transformers AutoConfig; zai-org/GLM-5#22",
        "a transformers release that knows the model type",
    ),
    sig(
        "model_load",
        r"Unrecognized model in |Should have a `model_type` key|Model architectures \[[^\]\n]*\] are not "
        r"supported|No processor registered for architecture"
        r"|Unsupported (?:model )?architectures?:? *\[?['\"]?" + MODEL_CLASS,
        (
            "Unrecognized model in ",
            "Should have a `model_type` key",
            "are not supported",
            "No processor registered",
            "Unsupported architecture",
            "Unsupported model architecture",
        ),
        "transformers AutoConfig without a model_type (Ascend/sglang#602, QwenLM/Qwen3#1368); SGLang's model "
        "registry (sgl-project/sglang#4253 title: 'Model architectures [...] are not supported for now'); "
        "the multimodal processor registry (read in sglang 0.5.9/0.5.23 wheels "
        "srt/managers/multimodal_processor.py: 'No processor registered for architecture: [...]', "
        "sgl-project/sglang#12134 on GB10); round 8 (in-sample, sgl-project/sglang#1331): the older "
        "registry's 'ValueError: Unsupported architectures: ChatGLMForConditionalGeneration. Supported "
        "list: [...]'",
        "a transformers/SGLang release that knows the model type; a complete config.json",
    ),
    sig(
        "model_load",
        r"The size of tensor a \(3072\) must match the size of tensor b \(6144\)",
        ("The size of tensor a",),
        "NVFP4 checkpoints keep the shared expert in BF16; sgl-project/sglang#29562; "
        "SemiAnalysisAI/InferenceX PR #2335",
        "--disable-shared-experts-fusion",
    ),
    sig(
        "model_load",
        r"size mismatch for \S+: copying a param",
        ("size mismatch for",),
        "torch load_state_dict shape mismatch",
        "the checkpoint does not match the model config / quantization",
    ),
    sig(
        "model_load",
        r"GatedRepoError|RepositoryNotFoundError|Cannot access gated repo|Repository Not Found for url"
        r"|does not appear to have a file named config\.json",
        ("GatedRepoError", "RepositoryNotFoundError", "gated repo", "Repository Not Found", "config.json"),
        "huggingface_hub errors.py / utils/_http.py (read in huggingface_hub 2.4.0 wheel); transformers",
        "check the model id, HF token secret and license acceptance",
    ),
    # --- device_assert (after nan: the NaN assert is the root cause of this one) ---------------------------
    sig(
        "device_assert",
        r"device-side assert(?:ion)? triggered|cudaErrorAssert|Assertion `.*` failed"
        # round 22 (in-sample Tencent/AngelSlim#16, a paste read off a screenshot: 'Indexkernel.cu:93:
        # operator(): block: 10,0,01, thread: [126,0,0] Assertion '-sizes(i] < index ..'): the message's own
        # shape, whatever quotes and brackets survived (CUDA's device-side __assert_fail: '<file>.cu:<line>:
        # <function>: block: [x,y,z], thread: [x,y,z] Assertion `<condition>` failed.')
        r"|\.cuh?:\d+: [^\n]{0,160}?\bblock: ?[\[(]?\d[\d, ]*[\])]?,? thread: ?[\[(]?\d[\d, ]*[\])] "
        r"Assertion\b",
        ("device-side assert", "cudaErrorAssert", "Assertion `", "] Assertion", ") Assertion"),
        "CUDA device assert (torch.AcceleratorError); sgl-project/sglang#21460; its message read by its "
        "shape (round 22: in-sample Tencent/AngelSlim#16, quotes and brackets garbled)",
        "rerun with CUDA_LAUNCH_BLOCKING=1 to find the kernel",
    ),
    # --- nccl --------------------------------------------------------------------------------------------
    sig(
        "nccl",
        r"\bNCCL (?:[Ee]rror|ERROR)\b|\bnccl(?:UnhandledCudaError|SystemError|InternalError|InvalidArgument"
        r"|InvalidUsage|RemoteError)\b",
        ("NCCL", "nccl"),
        "torch ProcessGroupNCCL errors; pytorch/pytorch#11756, vllm-project/vllm#7896, #10626",
        "NCCL_DEBUG=INFO; on PCIe hosts NCCL_P2P_LEVEL=SYS, iommu=pt; --disable-custom-all-reduce",
    ),
    sig(
        "nccl",
        r"Watchdog caught collective operation timeout"
        # the same watchdog in other torch versions' words (torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp)
        r"|\b(?:failure|Exception \(either an error or timeout\)) detected by watchdog at work\b"
        r"|\bTimeout at NCCL work: \d|\bSome NCCL operations have failed or timed out\b"
        r"|\bReceived a dump signal due to a collective timeout\b"
        r"|\bwatchdog thread terminated with exception\b|\bHeartbeat monitor timed out!",
        (
            "Watchdog caught collective",
            "detected by watchdog at work",
            "Timeout at NCCL work: ",
            "NCCL operations have failed or timed out",
            "dump signal due to a collective timeout",
            "watchdog thread terminated with exception",
            "Heartbeat monitor timed out!",
        ),
        "torch ProcessGroupNCCL watchdog (torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp across torch "
        "2.1-2.9: 'Watchdog caught collective operation timeout: WorkNCCL(...)', 'Exception (either an error "
        "or timeout) detected by watchdog at work: N' (2.4/2.5), '[PG ...] failure detected by watchdog at "
        "work sequence id: N' (2.6+), 'Timeout at NCCL work: N', WorkNCCL::handleException's 'Some NCCL "
        "operations have failed or timed out. Due to the asynchronous nature of CUDA kernels ...', 'Received "
        "a dump signal due to a collective timeout from rank N', 'Process group watchdog thread terminated "
        "with exception', the heartbeat monitor's 'Heartbeat monitor timed out! Process will be terminated "
        "after dumping debug info.')",
        "a rank hung or died; check the other ranks' logs",
    ),
    sig(
        "nccl",
        r"\bNCCL WARN\b|ProcessGroupNCCL's watchdog got stuck|\bDist(?:Backend|Network)Error\b"
        r"|gloo/transport/tcp/\w+\.cc:\d+|\bis setting up NCCL communicator\b",
        (
            "NCCL WARN",
            "watchdog got stuck",
            "DistBackendError",
            "DistNetworkError",
            "gloo/transport",
            "setting up NCCL communicator",
        ),
        "NCCL's own warnings (sgl-project/sglang#6246 'NCCL WARN Cuda failure', #16015); ProcessGroupNCCL "
        "heartbeat monitor (sgl-project/sglang#1691); c10d store (sgl-project/sglang#4096); gloo's TCP "
        "transport, pair.cc (sgl-project/sglang#4205) and unbound_buffer.cc ('Timed out waiting 1800000ms "
        "for send operation to complete', sgl-project/sglang#5883); round 7: torch.distributed's network "
        "error type (c10d exception.h DistNetworkError: a peer or the store unreachable, reset or closed), "
        "ProcessGroupNCCL.cpp broadcastUniqueNCCLID ('[1] is setting up NCCL communicator and retrieving "
        "ncclUniqueId from [0] via c10d key-value store by key '0', but store->get('0') got error: Socket "
        "Timeout'; older torch spells it 'retreiving')",
        "NCCL_DEBUG=INFO; check P2P/IOMMU and the other ranks",
    ),
    # --- health_timeout / timeout ------------------------------------------------------------------------
    sig(
        "health_timeout",
        r"Health check failed\. Server couldn't get a response from detokenizer",
        ("Health check failed",),
        "read in sglang 0.5.9/0.5.23 wheels srt/entrypoints/http_server.py; sgl-project/sglang#22511",
        "the scheduler is hung or busy past SGLANG_HEALTH_CHECK_TIMEOUT",
    ),
    sig(
        "timeout",
        r"(?i:watchdog timeout) \(self\.watchdog_timeout=",
        ("atchdog timeout (self.watchdog_timeout=",),
        "read in sglang 0.5.9/0.5.23 wheels srt/utils/watchdog.py ('Scheduler watchdog timeout', "
        "'TokenizerManager watchdog timeout ... soft=True'); older schedulers: 'Watchdog timeout "
        "(self.watchdog_timeout=300)' (sgl-project/sglang#7783, UCSB-AI/Soft-Thinking#10)",
        "a forward pass hung (graph capture, collective); raise --watchdog-timeout only for JIT warm-up",
    ),
    # --- warmup_failed -----------------------------------------------------------------------------------
    sig(
        "warmup_failed",
        r"Initialization failed\. warmup error|\b[Ww]arm-?up failed; abort"
        r"|\bDisaggregation warmup failed \(mode=|\bdisaggregation mode warm Up Failed, status code\b",
        ("Initialization failed", "armup failed", "arm-up failed", "warm Up Failed"),
        "read in sglang 0.5.9/0.5.23 wheels srt/entrypoints/http_server.py (_wait_and_warmup); round 8 "
        "(in-sample, sgl-project/sglang#28493): the diffusion server's multimodal_gen/runtime/entrypoints/"
        "http_server.py 'Server warmup failed; aborting startup: ..'; round 25, beside the PD warm-up's "
        "success line: a PD server's warm-up answered with an error, its status set UnHealthy on that line "
        "(0.5.23 _execute_server_warmup 'Disaggregation warmup failed (mode=prefill), status codes: [..]', "
        "earlier 0.5.x 'Prefill disaggregation mode warm Up Failed, status code: ..')",
        "look above for the scheduler error; SGLANG_WARMUP_TIMEOUT for slow JIT warm-up",
    ),
    # --- generic assertion (after warmup_failed: the warmup itself asserts HTTP 200) ---------------------
    sig(
        "assertion",
        r"\bAssertionError\b",
        ("AssertionError",),
        "Python AssertionError in a traceback",
        "read the assert in the traceback above",
    ),
    # --- kernel_compile: JIT toolchains ---------------------------------------------------------------------
    sig(
        "kernel_compile",
        r"ptxas fatal|PTXASError|PTX codegen error|ptxas\b[^\n]*returned non-zero exit status"
        r"|is not defined for option 'gpu-(?:name|architecture)'",
        ("ptxas", "PTXAS", "PTX codegen", "is not defined for option"),
        "Triton's bundled ptxas older than the GPU: RLinf/RLinf#92, InternLM/lmdeploy#3410 (sm_120), "
        "triton-lang/triton#8539 (sm_121a), vllm-project/vllm#31338",
        "TRITON_PTXAS_PATH=/usr/local/cuda/bin/ptxas (CUDA >= 12.8) or a Triton release that knows the arch",
    ),
    sig(
        "kernel_compile",
        r"not supported in this architecture",
        ("not supported in this architecture",),
        "Triton codegen ('type fp8e4nv not supported in this architecture'); sgl-project/sglang#7227",
        "an FP8 path supported on this arch, or another kernel backend",
    ),
    sig(
        "kernel_compile",
        r"Command '\[?'?[^'\n]*\b(?:gcc|g\+\+|cc|c\+\+|clang|nvcc|ninja)'?[^\n]*returned non-zero exit status"
        r"|ninja: build stopped: subcommand failed|Error building extension|CompilationError\b"
        r"|error: command '[^'\n]*nvcc' failed",
        (
            "returned non-zero exit status",
            "ninja: build stopped",
            "Error building extension",
            "CompilationError",
            "nvcc' failed",
        ),
        "Triton launcher / FlashInfer / DeepGEMM JIT builds (sgl-project/sglang#4253: gcc on Triton's "
        "cuda_utils.c failed, the model import was skipped)",
        "install a C compiler and the CUDA headers in the image; check the JIT cache directory is writable",
    ),
    # round 22 (in-sample sgl-project/sglang#7768: FlashInfer's CUTLASS MoE JIT, 'cutlass_kernel_file_3.
    # generated.cu(15): error: incomplete type ..'): a C/C++/CUDA compiler's own diagnostic (nvcc's EDG front
    # end 'file.cu(15): error: ..', gcc/clang 'file.cpp:15:3: error: ..', 'fatal error: x.h: No such file')
    sig(
        "kernel_compile",
        r"\.(?:cuh?|cpp|cc|cxx|c|hpp|h|inl)(?:\(\d+\)|(?::\d+){1,2}): (?:catastrophic |fatal )?error: ",
        ("): error: ", ": error: ", "): catastrophic error: ", ": fatal error: "),
        "a compiler's diagnostic on a source file, as nvcc (EDG: 'file.cu(15): error: ..') and gcc/clang "
        "('file.cpp:15:3: error: ..') print it; round 22: in-sample sgl-project/sglang#7768 (FlashInfer's "
        "CUTLASS MoE JIT on B200)",
        "a JIT build of a kernel failed: check the CUDA toolkit and the library version the image pins "
        "support this arch",
    ),
    # --- import_error: a broken Python environment ----------------------------------------------------------
    sig(
        "import_error",
        LINE_START + r"(?:[\w.]+\.)?(?:ModuleNotFoundError|ImportError)(?::|$)",
        ("ModuleNotFoundError", "ImportError"),
        "Python import failure at start: sgl-project/sglang#391, #362, #13276, #7942; real SGLang on a CPU "
        "host "
        "(docs: a ModuleNotFoundError traceback in the main process)",
        "rebuild the image from the pinned lock; never pip-install over it",
        weak=True,
    ),
    # round 22 (in-sample sgl-project/sglang#15206): a traceback flattened onto one line by the paste ('..
    # main ModuleNotFoundError: No module named 'sglang''): the exception is mid-line; SGLang's own 'Ignore
    # import error when loading ..' warning (srt/models/registry.py) goes on
    sig(
        "import_error",
        r"\bModuleNotFoundError: No module named '",
        ("ModuleNotFoundError",),
        "CPython's ModuleNotFoundError wherever a paste put it (a traceback flattened onto one line); round "
        "22: in-sample sgl-project/sglang#15206; weak like the traceback it stands for (real SGLang 0.5.9 "
        "logs 'OpenAIServingResponses init failed (ModuleNotFoundError: ..)' at every start, then serves)",
        "rebuild the image from the pinned lock; never pip-install over it",
        weak=True,
        unless=r"(?i:ignore import error|warn|skipp)",
    ),
    sig(
        "import_error",
        r"\.so[^\n]*: undefined symbol: ",
        ("undefined symbol",),
        "an extension built against another torch: sgl-project/sglang#1321 (vllm _core_C)",
        "rebuild the image from the pinned lock (torch and its extensions must match)",
        weak=True,
    ),
    sig(
        "import_error",
        LINE_START + r"(?:(?:[\w.]+\.)?PackageNotFoundError: No package metadata was found for"
        r"|Exception: [\w.-]+ with minimum required version [\w.]+ is not installed)",
        ("PackageNotFoundError", "with minimum required version"),
        "a backend whose package the image lacks: SGLang 0.5.23 asks importlib.metadata for "
        "flashinfer_python; seen in a real run of profiles.cpu.yaml cpu-flashinfer (docs/cpu.md)",
        "pick a backend whose package the image carries, or an image that has it",
        weak=False,
    ),
    # --- peer_access: GPU P2P / custom all-reduce -----------------------------------------------------------
    sig(
        "peer_access",
        r"peer access is not supported between these two devices|cudaErrorPeerAccessUnsupported"
        r"|custom_all_reduce\.cuh:\d+|(?i:custom ?all-?reduce)[^\n]*(?:failed|error)",
        (
            "peer access",
            "cudaErrorPeerAccess",
            "custom_all_reduce.cuh",
            "ustom allreduce",
            "ustomAllreduce",
            "ustom all-reduce",
            "ustom_all_reduce",
        ),
        "sgl-project/sglang#4814 (RTX 4090 TP2), #552 (T4, custom_all_reduce.cuh:307), "
        "NVIDIA/TensorRT-LLM#1034",
        "--disable-custom-all-reduce; check ACS/IOMMU (iommu=pt) and `nvidia-smi topo -p2p r`",
    ),
    # --- gpu_fault: the driver's view -----------------------------------------------------------------------
    sig(
        "gpu_fault",
        r"NVRM: Xid \(PCI:[^)\n]*\): \d+|fallen off the bus|\bGPU is lost\b|cudaErrorDevicesUnavailable"
        r"|Unable to determine the device handle for GPU",
        (
            "Xid",
            "fallen off the bus",
            "GPU is lost",
            "cudaErrorDevicesUnavailable",
            "Unable to determine the device",
        ),
        "NVIDIA driver Xid messages (leptonai/gpud#46, akash-network/support#244, NVIDIA/NVSentinel#155)",
        "dmesg on the host; reset or drain the GPU; Xid 79 is hardware (power, PCIe)",
    ),
    # --- crash: native crashes, signals, CUDA errors (specific enough to count while HTTP answers) ----------
    sig(
        "crash",
        r"Fatal Python error: |terminate called after throwing an instance of|\(core dumped\)"
        r"|" + LINE_START + r"(?:Segmentation fault|Bus error|Aborted|Killed)\s*$"
        r"|: line \d+: +\d+ +(?:Segmentation fault|Bus error|Aborted|Killed)\b"
        r"|\bdouble free or corruption\b|\b(?:free|munmap_chunk)\(\): invalid (?:pointer|size|next size)"
        r"|\bcorrupted size vs\. prev_size\b|\bmalloc\(\): (?:corrupted|memory corruption)"
        # round 11, from the sources, not from a log: libstdc++'s verbose terminate handler without an
        # exception, absl's and glog's failure-signal handlers, CPython's fatal-error dump of extension
        # modules (its tail alone once a paste is cut), the kernel's OOM killer (host RAM)
        r"|terminate called (?:without an active exception|recursively)"
        r"|\*\*\* SIG[A-Z]+ (?:\(@0x[0-9a-f]+\) )?received (?:at time=|by PID )"
        r"|\*\*\* Aborted at \d+ \(unix time\)"
        r"|" + LINE_START + r"Extension modules: |(?:[\w.]+, )+[\w.]+ \(total: \d+\)\s*$"
        r"|\bOut of memory: Kill(?:ed)? process \d+ \("
        # round 20 (in-sample sgl-project/sglang#3906): UCX's signal handler (ucs/debug/debug.c, loaded with
        # NCCL's and Mooncake's IB transports): '[host:pid:0:tid] Caught signal 11 (Segmentation fault: ..)'
        r"|\bCaught signal \d+ \((?:Segmentation fault|Bus error|Aborted|Illegal instruction"
        r"|Floating point exception)",
        (
            "Caught signal ",
            "Fatal Python error",
            "terminate called ",
            "*** SIG",
            "*** Aborted at ",
            "Extension modules: ",
            " (total: ",
            "Out of memory: Kill",
            "core dumped",
            "Segmentation fault",
            "Bus error",
            "Aborted",
            "Killed",
            "double free or corruption",
            "(): invalid ",
            "corrupted size vs. prev_size",
            "malloc(): corrupted",
            "malloc(): memory corruption",
        ),
        "CPython faulthandler / libstdc++ abort / the shell's signal report: sgl-project/sglang#3451, #3778, "
        "#10350, #10216; sgl-project/sglang#2468 ('Killed'); round 7: a script's shell reports its killed "
        "job as '/bin/bash: line 1:    12 Killed    python3 -m sglang.launch_server ...' (bash jobs.c); "
        "glibc's heap checks abort with 'double free or corruption (out)', 'free(): invalid pointer', "
        "'corrupted size vs. prev_size', 'malloc(): corrupted top size' (malloc/malloc.c malloc_printerr), "
        "with no shell to add '(core dumped)' in a container; libstdc++'s 'terminate called without an "
        "active exception' / 'terminate called recursively' (libsupc++/vterminate.cc); absl's '*** SIGSEGV "
        "received at time=..' (absl/debugging/failure_signal_handler.cc) and glog's '*** Aborted at .. (unix "
        "time)' / '*** SIGSEGV (@0x0) received by PID ..' (glog signalhandler.cc); CPython's 'Extension "
        "modules: a, b (total: N)' after a fatal error (Python/pylifecycle.c _Py_DumpExtensionModules, "
        "3.10+); Linux's 'Out of memory: Killed process N (python3)' (mm/oom_kill.c; 'Kill process' before "
        "4.19); UCX's 'Caught signal 11 (Segmentation fault: address not mapped to object ..)' "
        "(ucs/debug/debug.c, round 20: in-sample sgl-project/sglang#3906)",
        "a native crash: read the thread dump; check driver/CUDA/torch versions match (the OOM killer: host "
        "RAM, dmesg)",
    ),
    sig(
        "crash",
        r"crashed with exit code -?(?!15\b)\d+|(?:terminated|killed) (?:with|by) signal(?! (?:15|SIGTERM)\b)"
        # SIGTERM's -15 is a stop (evidence.STOPPED); 134/137/139 are a shell's or Docker's 128 + SIGABRT,
        # SIGKILL, SIGSEGV
        r"|\bexited(?: \w+){0,2} with (?:exit )?code[ =](?:-(?!15\b)\d+|13[479]\b)"
        r"|\bdied with <Signals\.SIG(?!TERM\b|INT\b)[A-Z]+"
        r"|\bA process in the process pool was terminated abruptly\b",
        (
            "crashed with exit code",
            "with signal",
            "by signal",
            " with code -",
            " with code=",
            " with exit code -",
            " with code 13",
            " with exit code 13",
            "died with <Signals.",
            "terminated abruptly",
        ),
        "read in sglang 0.5.23 wheel srt/utils/watchdog.py (SubprocessWatchdog: 'Subprocess scheduler_0 "
        "(pid=..) "
        "crashed with exit code -6'); sgl-project/sglang#18582; round 8 (in-sample, "
        "sgl-project/sglang#29149): a harness's 'server exited early with code -9', words between 'exited' "
        "and 'with'; Python's subprocess.CalledProcessError ('died with <Signals.SIGKILL: 9>.'); "
        "Docker/Compose's 'exited with code 137'; round 11 (sglang 0.5.23 wheel "
        "srt/disaggregation/encoder/runtime.py: 'DP worker rank=1 (pid=..) exited with code=-11'); CPython's "
        "BrokenProcessPool ('A process in the process pool was terminated abruptly ..', "
        "concurrent/futures/process.py)",
        "a child was killed by a signal: read the lines above (OOM killer: dmesg)",
    ),
    # round 13, from the launchers' own sources, not from a log: what Docker Compose, Kubernetes, systemd,
    # Open MPI, Slurm, Ray, uvicorn, glibc and CPython print when the server's process died or never ran (one
    # entry per launcher: a line holding one launcher's key runs only that launcher's regex)
    _launcher(
        LINE_START + r"[\w.-]+ exited with code (?!0\b|130\b|143\b)\d+\s*$",
        ("exited with code ",),
        "Docker Compose v2 ('<container> exited with code N'; 130 and 143 are SIGINT's and SIGTERM's stop)",
    ),
    _launcher(
        r"\bBack-off restarting failed container\b|\bCrashLoopBackOff\b|\bReason:\s+OOMKilled\b",
        ("Back-off restarting failed container", "CrashLoopBackOff", "OOMKilled"),
        "kubelet ('Back-off restarting failed container', a pod's 'CrashLoopBackOff', kubectl describe's "
        "'Reason: OOMKilled')",
    ),
    _launcher(
        r"\bMain process exited, code=(?:exited, status=(?!0/)\d+|killed, status=(?!(?:15|2)/)\d+"
        r"|dumped, status=\d+)|\bFailed with result '(?:exit-code|signal|core-dump|oom-kill|timeout)'",
        ("Main process exited, code=", "Failed with result '"),
        "systemd src/core/service.c ('Main process exited, code=exited, status=1/FAILURE'; killed by TERM or "
        "INT is a stop) and unit.c ('Failed with result 'exit-code'.')",
    ),
    _launcher(
        r"\bmpirun noticed that process rank \d+ with PID \d+ on node \S+ exited on signal (?!15\b)\d+"
        r"|\bPrimary job\s+terminated normally, but \d+ process(?:es)? returned\b"
        r"|\bmpirun detected that one or more processes exited with non-zero status"
        r"|\bsrun: error: \S+: tasks? [\d,-]+: (?:Killed|Exited with exit code [1-9]|Segmentation fault"
        r"|Aborted)|\bDetected \d+ oom[_-]kill events?\b",
        ("mpirun ", "Primary job", "srun: error: ", "oom_kill event", "oom-kill event"),
        "Open MPI ('mpirun noticed that process rank 0 with PID .. on node .. exited on signal 9 (Killed).', "
        "'Primary job  terminated normally, but 1 process returned'), Slurm ('srun: error: node1: task 0: "
        "Killed', slurmstepd's 'Detected 1 oom_kill event')",
    ),
    _launcher(
        r"\bThe actor died unexpectedly before finishing this task\b"
        r"|\bA worker died or was killed while executing a task\b"
        r"|\bWorker exit type: (?:SYSTEM_ERROR|NODE_OUT_OF_MEMORY)\b",
        ("actor died unexpectedly", "A worker died or was killed", "Worker exit type: "),
        "Ray ('The actor died unexpectedly before finishing this task.', the raylet's 'A worker died or was "
        "killed while executing a task by an unexpected system error.', 'Worker exit type: SYSTEM_ERROR')",
    ),
    _launcher(
        r"\berror while attempting to bind on address\b|\*\*\* stack smashing detected \*\*\*"
        r"|^\s*SystemExit: (?!0\s*$)\S"
        r"|\bOCI runtime create failed\b|\bcould not select device driver \S* with capabilities",
        (
            "error while attempting to bind",
            "stack smashing detected",
            "SystemExit: ",
            "OCI runtime create failed",
            "could not select device driver",
        ),
        "uvicorn server.py ('error while attempting to bind on address ..': it exits), glibc ('*** stack "
        "smashing detected ***: terminated'), CPython ('SystemExit: 1' closing a traceback), Docker's 'OCI "
        "runtime create failed' / 'could not select device driver \"\" with capabilities: [[gpu]]' (the "
        "container never ran)",
    ),
    sig(
        "crash",
        r"\bCUDA (?:error|Error|ERROR)(?: \d+)?: |\bcudaError[A-Z]\w+|\bCUDA_ERROR_[A-Z_]+|\bCUDART error: ",
        ("CUDA error", "CUDA Error", "CUDA ERROR", "cudaError", "CUDA_ERROR_", "CUDART error"),
        "CUDA runtime/driver error codes (torch c10 CUDAException, FlashInfer 'CUDA Error: ... (209)'); "
        "sgl-project/sglang#7918 ('operation not permitted when stream is capturing')",
        "read the CUDA error; CUDA_LAUNCH_BLOCKING=1 locates it",
        priority=92,
        # round 13: torch_memory_saver's cuMemCreate warning says the allocator frees its cache and retries
        unless=RETRIED,
        generic=True,
    ),
    sig(
        "crash",
        r"Exception in (?:run_tp_server|ModelTpServer|Controller\w*|DetokenizerManager|TokenizerManager)"
        r"|\binit state: Traceback|Child process unexpectedly failed",
        ("Exception in ", "init state: Traceback", "unexpectedly failed"),
        "SGLang 0.1-0.2 crash banners: sgl-project/sglang#748, #350, #373, flashinfer-ai/flashinfer#402",
        "read the traceback that follows",
    ),
    # --- generic traceback evidence (weak: a verdict once the port stops answering, and in classify-log) ----
    sig(
        "assertion",
        LINE_START + r"assert\s",
        ("assert",),
        "a traceback cut after its source line: the failing `assert ...` is the only evidence "
        "(triton-lang/triton#7942)",
        "read the assert",
        weak=True,
    ),
    sig(
        "crash",
        LINE_START + r"(?:[A-Za-z_]\w*\.)*(?:[A-Z]\w*)?(?:Error|Exception)(?::\s|:?\s*$)",
        ("Error", "Exception"),
        "the exception line that ends a Python traceback (ValueError: .., torch.AcceleratorError: .., "
        "tvm.error.InternalError: ..)",
        "read the traceback above it",
        priority=_WEAK,
        weak=True,
    ),
    sig(
        "crash",
        r"Traceback \(most recent call last\)|" + LINE_START + r'File "|\([\w.-]+ pid=\d+[^)\n]*\)\s+File "',
        ("Traceback (most recent call last)", 'File "'),
        "a Python traceback (also a truncated one that shows only its frames, or faulthandler's thread dump)",
        "read the traceback",
        priority=_WEAK + 1,
        weak=True,
    ),
    # --- crash: generic lines that follow any root cause --------------------------------------------------
    sig(
        "crash",
        r"\b\w+ hit an exception",
        ("hit an exception",),
        "read in sglang 0.5.9/0.5.23 wheels srt/managers/scheduler.py ('Scheduler hit an exception'), "
        "tokenizer/detokenizer managers, data_parallel_controller.py",
        "read the traceback that follows",
    ),
    sig(
        "crash",
        r"Received sigquit from a child process|SIGQUIT received\.",
        ("sigquit from a child", "SIGQUIT received"),
        "read in sglang 0.5.9/0.5.23 wheels srt/entrypoints/engine.py, srt/managers/tokenizer_manager.py",
        "a child process failed; read the lines above",
    ),
    sig(
        "crash",
        r"(?i:Capture (?:[\w ]+ )?cuda graph failed)|\bPiecewise CUDA graph failed\."
        # the hint SGLang appends to a failed capture (its cause is the exception printed above it)
        r"|--disable-cuda-graph\. \(Not recomm|(?:cuda-graph-max-bs|cuda-graph-max-tokens) to a smaller value"
        r"|add --disable-piecewise-cuda-graph to your launch command",
        (
            "graph failed",
            "--disable-cuda-graph. (Not recomm",
            "to a smaller value",
            "--disable-piecewise-cuda-graph to your launch command",
        ),
        "read in sglang 0.5.9 wheel srt/model_executor/cuda_graph_runner.py ('Capture cuda graph failed: "
        "{e}' + CUDA_GRAPH_CAPTURE_FAILED_MSG: 'Possible solutions: ... 2. set --cuda-graph-max-bs to a "
        "smaller value (e.g., 16) ... 4. disable CUDA graph by --disable-cuda-graph. (Not recommended. Huge "
        "performance loss)'; 2024 releases: '(Not recommonded. Huge perf loss)', sgl-project/sglang#6218); "
        "piecewise_cuda_graph_runner.py ('set --piecewise-cuda-graph-max-tokens to a smaller value', 'To "
        "work around this error, add --disable-piecewise-cuda-graph to your launch command.'), "
        "tc_piecewise 'Piecewise CUDA graph failed.'; NPU_GRAPH_CAPTURE_FAILED_MSG the same hint",
        "lower --cuda-graph-max-bs / --mem-fraction-static or disable CUDA graphs",
    ),
    sig(
        "crash",
        "^" + re.escape(verdict.marker(verdict.CRASHED)) + r"\b",
        (verdict.marker(verdict.CRASHED),),
        "this project's serve wrapper (healthchecks/serve.py) when the server exits non-zero on its own",
        "read the server log above",
    ),
)
