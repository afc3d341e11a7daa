"""The one catalog of SGLang failure signatures: log text -> failure class, root cause first.

Stdlib only; imported by the in-container healthcheck (``warmup.py``), by the serve wrapper and by host-side
tools (``from healthchecks import signatures``). No other module maps log text to a class.

Each :class:`Signature` carries the public source of its text (an issue/PR reference, or the wheel file it was
read in) and a priority: when several signatures match one log, the lowest priority wins (the root cause, e.g.
``nan`` before the ``device_assert`` it triggers, a specific ``AssertionError`` before the generic crash lines
that follow it); ties go to the earliest line. The other classes seen are reported as ``also``.

Public API::

    CLASSES                      all failure classes, in documentation order
    DESCRIPTIONS                 class -> one-line meaning and typical fix
    SIGNATURES                   the catalog (tuple of Signature)
    classify_lines(lines)        -> Match | None   (Match: cls, line (1-based), text, also)
    classify_text(text)          -> Match | None
    classify_file(path)          -> Match | None   (streams the file; decodes as UTF-8 with replacement)
    Scanner                      incremental scanning (feed chunks, persist with to_state/from_state)
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

CLASSES: tuple[str, ...] = (
    "nan",
    "garbage",
    "device_assert",
    "assertion",
    "unsupported_arch",
    "no_kernel_image",
    "shared_memory",
    "oom",
    "illegal_memory",
    "warmup_failed",
    "model_load",
    "nccl",
    "health_timeout",
    "backend_override",
    "timeout",
    "crash",
    "starting",
    "healthy",
)

DESCRIPTIONS: dict[str, str] = {
    "nan": "non-finite logits/logprobs (NaN or inf); fix: --kv-cache-dtype bf16 on the dense path, "
    "disable DeepGEMM on SM120 (SGLANG_ENABLE_JIT_DEEPGEMM=0), FlashInfer with the PDL fixes",
    "garbage": "finite but wrong output: the reference passage scores below the model's calibrated baseline, "
    "or sampled logprobs are flat (uniform) or stuck on one token; fix: --kv-cache-dtype bf16 (FP8 KV on "
    "dense backends), another attention/MoE backend, unset SGLANG_SANITIZE_NAN_LOGITS (it hides NaN)",
    "device_assert": "a CUDA device-side assert fired; rerun with CUDA_LAUNCH_BLOCKING=1 to locate "
    "the kernel",
    "assertion": "a Python AssertionError, e.g. the FP8 DSA KV pool written by a non-DSA backend; "
    "fix: --kv-cache-dtype bf16",
    "unsupported_arch": "a backend or kernel that does not support this GPU arch (SM90/SM100-only kernels "
    "on SM120, a gated backend choice); pick a backend listed for the arch",
    "no_kernel_image": "a CUDA library ships no kernel for this GPU (no sm_120 SASS/PTX); "
    "use an image built for the arch",
    "shared_memory": "a kernel needs more shared memory than the GPU has (SM120: ~99 KiB per block); "
    "use another backend or smaller tiles",
    "oom": "out of GPU memory; lower --mem-fraction-static, --cuda-graph-max-bs or the context length",
    "illegal_memory": "the GPU faulted (illegal memory access / instruction, misaligned address); "
    "bisect backends, disable CUDA graphs",
    "warmup_failed": "SGLang's startup warmup failed, or the healthcheck's sampled decode could not be "
    "completed (HTTP error without a log signature, bad or empty response, aborted request)",
    "model_load": "the checkpoint or its config could not be loaded (unknown architecture, shape mismatch, "
    "gated or missing repository)",
    "nccl": "a collective-communication (NCCL) failure or timeout between GPUs",
    "health_timeout": "SGLang's own /health got no detokenizer output in time (server hung or unhealthy)",
    "backend_override": "SGLang resolved a different backend/dtype than the profile requested",
    "timeout": "no answer within the time budget (healthcheck deadline or SGLang watchdog)",
    "crash": "the server process died or a worker raised, with no more specific signature",
    "starting": "the server is still loading (connection refused or /health 503 before the first pass)",
    "healthy": "all checks passed",
}

_CLASS_PRIORITY: dict[str, int] = {
    "nan": 10,
    "unsupported_arch": 20,
    "no_kernel_image": 25,
    "shared_memory": 30,
    "oom": 35,
    "illegal_memory": 40,
    "model_load": 45,
    "device_assert": 50,
    "nccl": 60,
    "health_timeout": 70,
    "timeout": 72,
    "warmup_failed": 80,
    "assertion": 85,
    "crash": 90,
}
_SPECIFIC_ASSERTION = 20
MAX_TEXT = 500


@dataclass(frozen=True)
class Signature:
    """One regex -> class entry with its public source and a typical fix."""

    cls: str
    pattern: re.Pattern[str]
    keys: tuple[str, ...]  # literal texts, one of which every matching line contains (fast prefilter)
    priority: int
    source: str
    fix: str


@dataclass(frozen=True)
class Match:
    """The root-cause match of a log: class, 1-based line, the line's text, other classes seen."""

    cls: str
    line: int
    text: str
    also: tuple[str, ...]
    signature: Signature

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape used by ``bwstack classify-log --json`` and the sweep report."""
        return {"class": self.cls, "line": self.line, "text": self.text, "also": list(self.also)}


def _sig(
    cls: str, regex: str, keys: tuple[str, ...], source: str, fix: str = "", *, priority: int | None = None
) -> Signature:
    if cls not in _CLASS_PRIORITY:
        raise ValueError(f"unknown failure class {cls!r}")
    prio = _CLASS_PRIORITY[cls] if priority is None else priority
    return Signature(cls=cls, pattern=re.compile(regex), keys=keys, priority=prio, source=source, fix=fix)


_KV_BF16 = "pass --kv-cache-dtype bf16 explicitly (DSA models auto-select fp8_e4m3 on SM>=10)"

SIGNATURES: tuple[Signature, ...] = (
    # --- nan: the root cause of the device assert / crash that follows ---------------------------------
    _sig(
        "nan",
        r"probability tensor contains either .?inf.?, .?nan.? or element < 0",
        ("probability tensor contains either",),
        "torch.multinomial (TensorCompare.cu _assert_async_cuda_kernel / Distributions.cpp); "
        "sgl-project/sglang#21460; kvcache-ai/ktransformers#465, zai-org/GLM-4#637",
        _KV_BF16,
    ),
    _sig(
        "nan",
        r"Input (?:probs|logits) contains NaN",
        ("contains NaN",),
        "read in flashinfer-python 0.6.3 wheel flashinfer/sampling.py (check_nan=True)",
        _KV_BF16,
    ),
    _sig(
        "nan",
        r"Detected errors during sampling! NaN in the logits",
        ("Detected errors during sampling",),
        "read in sglang 0.5.9 wheel srt/layers/sampler.py (--enable-nan-detection); sgl-project/sglang#1953",
        _KV_BF16,
    ),
    _sig(
        "nan",
        r"NaN detected\b",
        ("NaN detected",),
        "read in sglang 0.5.17/0.5.23 wheels srt/utils/async_probe.py (SGLANG_SANITIZE_NAN_LOGITS warning, "
        "SGLANG_ENABLE_ASYNC_ASSERT 'NaN detected! ...'); sgl-project/sglang#21460",
        _KV_BF16,
    ),
    _sig(
        "nan",
        r"Out of range float values are not JSON compliant",
        ("Out of range float values",),
        "read in sglang 0.5.9 wheel srt/entrypoints/http_server.py: /generate returns a dict that FastAPI "
        "renders with Starlette JSONResponse (json.dumps allow_nan=False), so a NaN/inf logprob is a 500",
        _KV_BF16,
    ),
    # --- specific assertions -------------------------------------------------------------------------------
    _sig(
        "assertion",
        r"assert not self\.(?:nsa|dsa)_kv_cache_store_fp8",
        ("_kv_cache_store_fp8",),
        "read in sglang 0.5.9 wheel srt/mem_cache/memory_pool.py L1498 (nsa_) and 0.5.23 L4956 (dsa_); "
        "SemiAnalysisAI/InferenceX glm5.2_fp4_rtx6000pro_sglang.sh (triton needs bf16 KV)",
        _KV_BF16,
        priority=_SPECIFIC_ASSERTION,
    ),
    _sig(
        "assertion",
        r"DeepSeek DSA only supports bf16/bfloat16 or fp8_e4m3 kv_cache_dtype",
        ("DeepSeek DSA only supports",),
        "read in sglang 0.5.9 wheel srt/server_args.py (_set_default_nsa_kv_cache_dtype)",
        "use --kv-cache-dtype bf16 or fp8_e4m3 for DSA models",
        priority=_SPECIFIC_ASSERTION,
    ),
    # --- unsupported_arch --------------------------------------------------------------------------------
    _sig(
        "unsupported_arch",
        r"TllmGenFmhaRunner",
        ("TllmGenFmhaRunner",),
        "FlashInfer trtllm fmhaRunner.cuh:37 'Unsupported architecture'; sgl-project/sglang#29562, #37105, "
        "#40558; flashinfer-ai/flashinfer#3263",
        "trtllm DSA/MLA kernels are SM100-only; on SM120 use flashinfer_sparse_mla (>=0.5.17) "
        "or the dense path",
    ),
    _sig(
        "unsupported_arch",
        r"deepgemm/csrc/apis/attention\.hpp:\d+\)?:? Unsupported architecture",
        ("Unsupported architecture",),
        "DeepGEMM indexer kernels (arch 9/10 only); sgl-project/sglang#26087, #23657",
        "DeepGEMM with SM120 kernels (deepseek-ai/DeepGEMM PR #324, branch nv_dev)",
    ),
    _sig(
        "unsupported_arch",
        r"Unsupported architecture",
        ("Unsupported architecture",),
        "generic kernel arch check (FlashInfer, DeepGEMM); sgl-project/sglang#37105, #26087",
        "pick a backend that ships kernels for this GPU arch",
    ),
    _sig(
        "unsupported_arch",
        r"GLM DSA with FP8 KV cache on NVIDIA SM120/SM121 supports only flashinfer_sparse_mla",
        ("supports only flashinfer_sparse_mla",),
        "read in sglang 0.5.17/0.5.23 wheels sglang/kernels/ops/attention/flash_mla_sm120.py",
        "use --dsa-prefill-backend/--dsa-decode-backend flashinfer_sparse_mla "
        "(0.5.23 also triton_sparse_mla for prefill)",
    ),
    _sig(
        "unsupported_arch",
        r"flashinfer_sparse_mla supports only GLM DSA with FP8 KV cache",
        ("flashinfer_sparse_mla supports only",),
        "read in sglang 0.5.17/0.5.23 wheels sglang/kernels/ops/attention/flash_mla_sm120.py",
        "flashinfer_sparse_mla needs a GLM DSA model, FP8 KV (fp8_e4m3) and SM120/SM121",
    ),
    _sig(
        "unsupported_arch",
        r"DSA backend is only supported on ROCm/HIP",
        ("only supported on ROCm/HIP",),
        "read in sglang 0.5.23 wheel srt/arg_groups/overrides.py (_check_dsa_backend_constraints)",
        "the triton DSA backend is ROCm-only; pick a CUDA DSA backend",
    ),
    _sig(
        "unsupported_arch",
        r"tilelang DSA prefill/decode kernels only support an fp8_e4m3 KV cache on ROCm/HIP",
        ("tilelang DSA prefill/decode kernels",),
        "read in sglang 0.5.17 wheel srt/arg_groups/overrides.py; sgl-project/sglang#40286",
        "tilelang on CUDA needs --kv-cache-dtype bf16",
    ),
    _sig(
        "unsupported_arch",
        r"backend (?:for (?:prefill|decode) )?is only supported on (?:Hopper|Blackwell)",
        ("is only supported on",),
        "read in sglang 0.5.9 wheel srt/server_args.py ('TRTLLM MHA backend is only supported on Blackwell "
        "GPUs (SM100)') and 0.5.23 srt/arg_groups/attention_hook.py, overrides.py",
        "choose an attention backend supported on this arch (SM120: triton, flashinfer)",
    ),
    _sig(
        "unsupported_arch",
        r"\brequires SM100\b|TRTLLM FMHAv2 prefill on SM120 does not support",
        ("requires SM100", "TRTLLM FMHAv2 prefill"),
        "read in sglang 0.5.23 wheel srt/arg_groups/attention_hook.py, kv_cache_hook.py",
        "choose a backend supported on this arch",
    ),
    # --- no_kernel_image ---------------------------------------------------------------------------------
    _sig(
        "no_kernel_image",
        r"no kernel image is available for execution on the device|cudaErrorNoKernelImageForDevice",
        ("no kernel image", "cudaErrorNoKernelImageForDevice"),
        "CUDA error 209; sgl-project/sglang#7249 (RTX 5090), vllm-project/vllm#16901",
        "use an image whose CUDA libraries carry sm_120 kernels (bwstack audit)",
    ),
    _sig(
        "no_kernel_image",
        r"with CUDA capability sm_\d+ is not compatible with the current PyTorch installation",
        ("not compatible with the current PyTorch",),
        "torch.cuda capability warning; pytorch/pytorch#150733",
        "use a PyTorch build for this arch (cu128+ for sm_120)",
    ),
    # --- shared_memory -----------------------------------------------------------------------------------
    _sig(
        "shared_memory",
        r"Failed to set the allowed dynamic shared memory size",
        ("dynamic shared memory size",),
        "TileLang kernels needing ~166-170 KB on SM120; sgl-project/sglang#37105, #40286",
        "SM120 has ~99 KiB shared memory per block: use another backend or smaller tiles",
    ),
    _sig(
        "shared_memory",
        r"out of resource: shared memory",
        ("out of resource: shared memory",),
        "Triton OutOfResources; sgl-project/sglang#2847, #8513 (Hardware limit: 101376)",
        "use another backend or smaller Triton block sizes / num_stages",
    ),
    _sig(
        "shared_memory",
        r"(?i:too many resources requested for launch)|cudaErrorLaunchOutOfResources",
        ("resources requested for launch", "cudaErrorLaunchOutOfResources"),
        "CUDA error 701 (launch out of resources); NVIDIA/DeepLearningExamples#779",
        "use another backend or smaller tiles",
    ),
    # --- oom ---------------------------------------------------------------------------------------------
    _sig(
        "oom",
        r"CUDA out of memory|OutOfMemoryError|CUDA error: out of memory|cudaErrorMemoryAllocation",
        ("out of memory", "OutOfMemoryError", "cudaErrorMemoryAllocation"),
        "torch.OutOfMemoryError; decode graph capture OOM sgl-project/sglang#29562",
        "lower --mem-fraction-static or --cuda-graph-max-bs (256 on 96 GB cards)",
    ),
    _sig(
        "oom",
        r"Not enough memory\. Please try to increase --mem-fraction-static",
        ("Not enough memory",),
        "read in sglang 0.5.9 wheel srt/model_executor/model_runner_kv_cache_mixin.py",
        "raise --mem-fraction-static or use more GPUs (TP)",
    ),
    _sig(
        "oom",
        r"(?:Prefill|Decode) out of memory\. Try to lower your batch size|runs out of memory",
        ("out of memory",),
        "read in sglang 0.5.9 wheel srt/mem_cache/common.py",
        "lower --max-running-requests / --chunked-prefill-size",
    ),
    # --- illegal_memory ----------------------------------------------------------------------------------
    _sig(
        "illegal_memory",
        r"an illegal memory access was encountered|cudaErrorIllegalAddress|CUDA error: misaligned address"
        r"|an illegal instruction was encountered",
        ("illegal memory access", "cudaErrorIllegalAddress", "misaligned address", "illegal instruction"),
        "CUDA errors 700/716/715; sgl-project/sglang#8296, #11968, #18785",
        "bisect the attention/MoE backend; try --cuda-graph-backend-decode disabled / --disable-cuda-graph",
    ),
    # --- model_load --------------------------------------------------------------------------------------
    _sig(
        "model_load",
        r"KeyError: '(?:glm_moe_dsa|glm5\w*)'",
        ("KeyError: '",),
        "transformers too old for GLM-5; zai-org/GLM-5#22, sgl-project/sglang#19408",
        "transformers >= 5.2 (SGLang >= 0.5.10)",
    ),
    _sig(
        "model_load",
        r"Transformers does not recognize this architecture|does not recognize this architecture",
        ("does not recognize this architecture",),
        "transformers AutoConfig; zai-org/GLM-5#22",
        "a transformers release that knows the model type",
    ),
    _sig(
        "model_load",
        r"The size of tensor a \(3072\) must match the size of tensor b \(6144\)",
        ("The size of tensor a",),
        "NVFP4 checkpoints keep the shared expert in BF16; sgl-project/sglang#29562; "
        "SemiAnalysisAI/InferenceX PR #2335",
        "--disable-shared-experts-fusion",
    ),
    _sig(
        "model_load",
        r"size mismatch for \S+: copying a param",
        ("size mismatch for",),
        "torch load_state_dict shape mismatch",
        "the checkpoint does not match the model config / quantization",
    ),
    _sig(
        "model_load",
        r"GatedRepoError|RepositoryNotFoundError|Cannot access gated repo|Repository Not Found for url"
        r"|does not appear to have a file named config\.json",
        ("GatedRepoError", "RepositoryNotFoundError", "gated repo", "Repository Not Found", "config.json"),
        "huggingface_hub errors.py / utils/_http.py (read in huggingface_hub 2.4.0 wheel); transformers",
        "check the model id, HF token secret and license acceptance",
    ),
    # --- device_assert (after nan: the NaN assert is the root cause of this one) ---------------------------
    _sig(
        "device_assert",
        r"device-side assert(?:ion)? triggered|cudaErrorAssert|Assertion `.*` failed",
        ("device-side assert", "cudaErrorAssert", "Assertion `"),
        "CUDA device assert (torch.AcceleratorError); sgl-project/sglang#21460",
        "rerun with CUDA_LAUNCH_BLOCKING=1 to find the kernel",
    ),
    # --- nccl --------------------------------------------------------------------------------------------
    _sig(
        "nccl",
        r"\bNCCL (?:[Ee]rror|ERROR)\b|\bnccl(?:UnhandledCudaError|SystemError|InternalError|InvalidArgument"
        r"|InvalidUsage|RemoteError)\b",
        ("NCCL", "nccl"),
        "torch ProcessGroupNCCL errors; pytorch/pytorch#11756, vllm-project/vllm#7896, #10626",
        "NCCL_DEBUG=INFO; on PCIe hosts NCCL_P2P_LEVEL=SYS, iommu=pt; --disable-custom-all-reduce",
    ),
    _sig(
        "nccl",
        r"Watchdog caught collective operation timeout",
        ("Watchdog caught collective",),
        "torch ProcessGroupNCCL watchdog",
        "a rank hung or died; check the other ranks' logs",
    ),
    # --- health_timeout / timeout ------------------------------------------------------------------------
    _sig(
        "health_timeout",
        r"Health check failed\. Server couldn't get a response from detokenizer",
        ("Health check failed",),
        "read in sglang 0.5.9/0.5.23 wheels srt/entrypoints/http_server.py; sgl-project/sglang#22511",
        "the scheduler is hung or busy past SGLANG_HEALTH_CHECK_TIMEOUT",
    ),
    _sig(
        "timeout",
        r"watchdog timeout \(self\.watchdog_timeout=",
        ("watchdog timeout",),
        "read in sglang 0.5.9/0.5.23 wheels srt/utils/watchdog.py",
        "a forward pass hung (graph capture, collective); raise --watchdog-timeout only for JIT warm-up",
    ),
    # --- warmup_failed -----------------------------------------------------------------------------------
    _sig(
        "warmup_failed",
        r"Initialization failed\. warmup error",
        ("Initialization failed",),
        "read in sglang 0.5.9/0.5.23 wheels srt/entrypoints/http_server.py (_wait_and_warmup)",
        "look above for the scheduler error; SGLANG_WARMUP_TIMEOUT for slow JIT warm-up",
    ),
    # --- generic assertion (after warmup_failed: the warmup itself asserts HTTP 200) ---------------------
    _sig(
        "assertion",
        r"\bAssertionError\b",
        ("AssertionError",),
        "Python AssertionError in a traceback",
        "read the assert in the traceback above",
    ),
    # --- crash: generic lines that follow any root cause --------------------------------------------------
    _sig(
        "crash",
        r"\b\w+ hit an exception",
        ("hit an exception",),
        "read in sglang 0.5.9/0.5.23 wheels srt/managers/scheduler.py ('Scheduler hit an exception'), "
        "tokenizer/detokenizer managers, data_parallel_controller.py",
        "read the traceback that follows",
    ),
    _sig(
        "crash",
        r"Received sigquit from a child process|SIGQUIT received\.",
        ("sigquit from a child", "SIGQUIT received"),
        "read in sglang 0.5.9/0.5.23 wheels srt/entrypoints/engine.py, srt/managers/tokenizer_manager.py",
        "a child process failed; read the lines above",
    ),
    _sig(
        "crash",
        r"Capture cuda graph failed",
        ("Capture cuda graph failed",),
        "read in sglang 0.5.9 wheel srt/model_executor/cuda_graph_runner.py",
        "lower --cuda-graph-max-bs / --mem-fraction-static or disable CUDA graphs",
    ),
    _sig(
        "crash",
        r"^bwstack-serve: server crashed\b",
        ("bwstack-serve: server crashed",),
        "this project's serve wrapper (healthchecks/serve.py) when the server exits non-zero on its own",
        "read the server log above",
    ),
)

_KEYS: tuple[str, ...] = tuple(dict.fromkeys(key for sig in SIGNATURES for key in sig.keys))


def _clean(line: str) -> str:
    text = line.strip()
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 3] + "..."


class Scanner:
    """Incremental classifier: feed complete lines (or text chunks ending at a newline), read result()."""

    def __init__(self) -> None:
        self.lines_seen = 0
        self._best: tuple[int, int, str, Signature] | None = None
        self._seen: dict[str, tuple[int, int]] = {}

    def _consider(self, line: str, line_no: int) -> None:
        for sig in SIGNATURES:
            if not any(key in line for key in sig.keys) or not sig.pattern.search(line):
                continue
            if sig.cls not in self._seen or (sig.priority, line_no) < self._seen[sig.cls]:
                self._seen[sig.cls] = (sig.priority, line_no)
            if self._best is None or (sig.priority, line_no) < (self._best[0], self._best[1]):
                self._best = (sig.priority, line_no, _clean(line), sig)

    def feed(self, text: str) -> None:
        """Scan ``text``; its first character starts a new line (a partial last line counts as a line).

        Candidate lines are found with str.find on each signature's literal keys (C speed), and only those
        lines are matched against the regexes.
        """
        starts: set[int] = set()
        for key in _KEYS:
            pos = text.find(key)
            while pos >= 0:
                starts.add(text.rfind("\n", 0, pos) + 1)
                end = text.find("\n", pos)
                pos = -1 if end < 0 else text.find(key, end)
        line_idx = self.lines_seen
        counted = 0
        for start in sorted(starts):
            line_idx += text.count("\n", counted, start)
            counted = start
            end = text.find("\n", start)
            self._consider(text[start : len(text) if end < 0 else end], line_idx + 1)
        self.lines_seen += text.count("\n")
        if text and not text.endswith("\n"):
            self.lines_seen += 1

    def result(self) -> Match | None:
        """The root-cause match so far, or None when nothing matched."""
        if self._best is None:
            return None
        _prio, line_no, text, sig = self._best
        others = sorted((v, k) for k, v in self._seen.items() if k != sig.cls)
        return Match(cls=sig.cls, line=line_no, text=text, also=tuple(k for _, k in others), signature=sig)

    def to_state(self) -> dict[str, Any]:
        """A JSON-able snapshot, so a later process can continue the scan."""
        best = None
        if self._best is not None:
            best = {"index": SIGNATURES.index(self._best[3]), "line": self._best[1], "text": self._best[2]}
        return {
            "lines_seen": self.lines_seen,
            "best": best,
            "seen": {k: list(v) for k, v in self._seen.items()},
        }

    @classmethod
    def from_state(cls, state: Any) -> Scanner:
        """Rebuild a scanner from :meth:`to_state`; anything malformed gives a fresh scanner."""
        scanner = cls()
        try:
            scanner.lines_seen = int(state["lines_seen"])
            best = state["best"]
            if best is not None:
                sig = SIGNATURES[int(best["index"])]
                scanner._best = (sig.priority, int(best["line"]), str(best["text"]), sig)
            scanner._seen = {
                str(k): (int(v[0]), int(v[1])) for k, v in dict(state["seen"]).items() if k in _CLASS_PRIORITY
            }
        except (KeyError, IndexError, TypeError, ValueError):
            return cls()
        return scanner


def classify_lines(lines: Iterable[str]) -> Match | None:
    """Classify log lines (with or without their newlines); line numbers are 1-based."""
    scanner = Scanner()
    for line in lines:
        scanner.feed(line.rstrip("\r\n").replace("\n", " ") + "\n")
    return scanner.result()


def classify_text(text: str) -> Match | None:
    """Classify a whole log given as one string."""
    scanner = Scanner()
    scanner.feed(text)
    return scanner.result()


def classify_file(path: str, chunk_bytes: int = 1 << 20) -> Match | None:
    """Classify a log file by streaming it in chunks cut at line ends; raises OSError if unreadable."""
    scanner = Scanner()
    tail = b""
    with open(path, "rb") as fh:
        while True:
            chunk = fh.read(chunk_bytes)
            if not chunk:
                break
            data = tail + chunk
            cut = data.rfind(b"\n") + 1
            tail = data[cut:]
            if cut:
                scanner.feed(data[:cut].decode("utf-8", errors="replace"))
    if tail:
        scanner.feed(tail.decode("utf-8", errors="replace"))
    return scanner.result()
