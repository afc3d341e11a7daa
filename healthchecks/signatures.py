"""The one catalog of SGLang failure signatures: log text -> failure class, root cause first.

Stdlib only; imported by the in-container healthcheck (``warmup.py``), by the serve wrapper and by host-side
tools (``from healthchecks import signatures``). No other module maps log text to a class.

Each :class:`Signature` carries the public source of its text (an issue/PR reference, or the wheel file it was
read in) and a priority taken from its class: when several signatures match one log, the root cause wins (the
class earliest in the causal chain, e.g. ``nan`` before the ``device_assert`` it triggers, a specific
``AssertionError`` before the generic crash lines that follow it); ties go to the earliest line. The other
classes seen are reported as ``also``. Generic traceback evidence (an exception line, frames, a bare
``Traceback`` header) is *weak*: it makes a log ``crash`` but, in the live healthcheck, only once the server
has stopped answering. Only what follows the last start banner counts. A log without any match is
``healthy`` when it reached SGLang's ready line and ``starting`` otherwise -- never ``healthy`` because
nothing matched.

Public API::

    CLASS_INFO / CLASSES         every class with its meaning, typical fix, rank and fail-fast flag
    DESCRIPTIONS                 class -> "meaning; fix: typical fix"
    FAIL_FAST_CLASSES            classes that do not heal by waiting
    SEVERITY                     class -> 0 (healthy) .. 3 (serves wrong output), for comparing sweeps
    SIGNATURES                   the catalog (tuple of Signature)
    classify_lines(lines)        -> Match | None   (Match: cls, line (1-based), text, also, signature)
    classify_text(text)          -> Match | None
    classify_file(path)          -> Match | None   (streams the file; decodes as UTF-8 with replacement)
    scan_text / scan_file        -> Scanner        (.result(), .verdict(): class or healthy/starting, .ready)
    Scanner                      incremental scanning (feed chunks, persist with to_state/from_state)
    class_table()                the Markdown class table of the README and docs/healthcheck.md
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple


class ClassInfo(NamedTuple):
    """One failure class: what it means, its typical fix, its rank among root causes, whether it heals."""

    name: str
    meaning: str
    fix: str
    priority: int | None  # lower = closer to the root cause; None: the class never comes from a log line
    fail_fast: bool  # does not heal by waiting: the serve wrapper stops the server on it (common.py)
    #: how bad for someone serving the model, to compare two sweeps (``bwstack report diff``): 0 serves
    #: correctly; 1 refuses to start, with a clear cause, before serving anything; 2 started but crashed,
    #: hung, or runs other backends than asked; 3 serves wrong output. A verdict moving up a tier regressed.
    severity: int


_KV_BF16 = "pass --kv-cache-dtype bf16 explicitly (DSA models auto-select fp8_e4m3 on SM>=10)"

#: every failure class, in documentation order (the README and docs/healthcheck.md tables render it)
CLASS_INFO: tuple[ClassInfo, ...] = (
    ClassInfo(
        "nan",
        "non-finite logits/logprobs (NaN or inf), or the multinomial 'probability tensor contains either "
        "inf, "
        "nan' assert",
        "--kv-cache-dtype bf16 on the dense path; disable DeepGEMM on SM120 (SGLANG_ENABLE_JIT_DEEPGEMM=0); "
        "FlashInfer with the PDL fixes",
        10,
        True,
        3,
    ),
    ClassInfo(
        "garbage",
        "finite but wrong output: the reference passage scores below the model's calibrated baseline, or "
        "sampled logprobs are flat (uniform) or stuck on one token",
        "--kv-cache-dtype bf16 (FP8 KV on dense backends), another attention/MoE backend, unset "
        "SGLANG_SANITIZE_NAN_LOGITS (it hides NaN)",
        None,
        True,
        3,
    ),
    ClassInfo(
        "device_assert",
        "a CUDA device-side assert fired, e.g. an in-kernel bounds check (an `index out of bounds` assertion "
        "in IndexKernel.cu or a Triton kernel)",
        "rerun with CUDA_LAUNCH_BLOCKING=1 to find the kernel; check token ids / vocab size of the "
        "checkpoint",
        50,
        True,
        2,
    ),
    ClassInfo(
        "assertion",
        "a Python AssertionError (also a truncated traceback whose `assert ...` source line is the only "
        "evidence), e.g. the FP8 DSA KV pool written by a non-DSA backend",
        "read the assert; for `dsa_kv_cache_store_fp8`: --kv-cache-dtype bf16",
        85,
        True,
        2,
    ),
    ClassInfo(
        "unsupported_arch",
        "a backend or kernel gated to other GPU archs (`Unsupported architecture`, `Unsupported compute "
        "capability`, `No supported CUDA architectures found`, DeepGEMM `Unknown recipe`, TRT-LLM "
        "SM100-only)",
        "pick a backend listed for the arch (bwstack explain); DeepGEMM with SM120 kernels or DeepGEMM off",
        20,
        True,
        1,
    ),
    ClassInfo(
        "no_kernel_image",
        "a CUDA library ships no kernel for this GPU (no sm_120 SASS/PTX)",
        "use an image whose CUDA libraries carry kernels for the arch (bwstack audit)",
        25,
        True,
        1,
    ),
    ClassInfo(
        "kernel_compile",
        "a JIT kernel build failed: ptxas (`Value 'sm_120' is not defined for option 'gpu-name'`), Triton "
        "(`... not supported in this architecture`), nvcc/gcc/ninja for FlashInfer, DeepGEMM or Triton "
        "launchers",
        "a toolchain that knows the arch: CUDA >= 12.8 ptxas (TRITON_PTXAS_PATH=/usr/local/cuda/bin/ptxas), "
        "a Triton/FlashInfer release with sm_120, a C compiler and CUDA headers in the image",
        27,
        True,
        1,
    ),
    ClassInfo(
        "shared_memory",
        "a kernel needs more shared memory than the GPU has (SM120: ~99 KiB per block)",
        "use another backend or smaller tiles / Triton num_stages",
        30,
        True,
        1,
    ),
    ClassInfo(
        "oom",
        "out of GPU memory (weights, KV pool or CUDA-graph capture)",
        "lower --mem-fraction-static, --cuda-graph-max-bs or the context length; more GPUs (TP)",
        35,
        True,
        1,
    ),
    ClassInfo(
        "import_error",
        "the Python environment is broken: a module is missing or does not match (`ModuleNotFoundError`, "
        "`ImportError`, `undefined symbol` in an extension)",
        "rebuild the image from the pinned lock (bwstack build); do not pip-install over it",
        38,
        True,
        1,
    ),
    ClassInfo(
        "illegal_memory",
        "a kernel faulted: illegal memory access / instruction, misaligned address, unspecified launch "
        "failure",
        "bisect the attention/MoE backend; try --disable-cuda-graph; report with CUDA_LAUNCH_BLOCKING=1",
        40,
        True,
        2,
    ),
    ClassInfo(
        "gpu_fault",
        "the NVIDIA driver reported a GPU fault (`NVRM: Xid`, fallen off the bus, GPU lost)",
        "read dmesg on the host: Xid 13/31/43 follow a kernel fault (as illegal_memory), "
        "48/63/64/74/79/92/94/95 "
        "are hardware (ECC, NVLink, power): reset or drain the GPU",
        41,
        True,
        2,
    ),
    ClassInfo(
        "peer_access",
        "GPU peer-to-peer access failed, usually in SGLang's custom all-reduce (`peer access is not "
        "supported "
        "between these two devices`)",
        "--disable-custom-all-reduce; on PCIe hosts check ACS/IOMMU (iommu=pt) and nvidia-smi topo -p2p r",
        42,
        True,
        2,
    ),
    ClassInfo(
        "model_load",
        "the checkpoint or its config could not be loaded (unknown architecture or missing `model_type`, "
        "shape "
        "mismatch, gated or missing repository)",
        "a transformers release that knows the model (GLM-5: >= 5.2), the right revision, the HF token "
        "secret",
        45,
        True,
        1,
    ),
    ClassInfo(
        "nccl",
        "a collective-communication failure between GPUs: NCCL errors (also only as `NCCL WARN` lines), "
        "ProcessGroupNCCL watchdog, c10d store / gloo connection errors",
        "NCCL_DEBUG=INFO; on PCIe hosts NCCL_P2P_LEVEL=SYS, iommu=pt; --disable-custom-all-reduce; check the "
        "other ranks' logs",
        60,
        True,
        2,
    ),
    ClassInfo(
        "timeout",
        "no answer within the time budget: SGLang's scheduler watchdog (every spelling) or the healthcheck "
        "deadline",
        "a forward pass hung (graph capture, collective): read the py-spy dump; raise --watchdog-timeout "
        "only for "
        "slow JIT warm-up",
        68,
        False,
        2,
    ),
    ClassInfo(
        "health_timeout",
        "SGLang's own /health got no detokenizer output in time (server hung or unhealthy)",
        "the scheduler is hung or busy past SGLANG_HEALTH_CHECK_TIMEOUT: read the log",
        70,
        False,
        2,
    ),
    ClassInfo(
        "backend_override",
        "SGLang resolved a different backend/dtype than the profile requested",
        "fix the profile or pin the flag",
        None,
        True,
        2,
    ),
    ClassInfo(
        "warmup_failed",
        "SGLang's startup warmup failed, or the healthcheck's sampled decode could not be completed (HTTP "
        "error "
        "without a log signature, bad or empty response, aborted request)",
        "read the reason and the scheduler error above it; SGLANG_WARMUP_TIMEOUT for slow JIT warm-up",
        80,
        False,
        2,
    ),
    ClassInfo(
        "crash",
        "the server process died (traceback, `Fatal Python error`, killed by a signal, SGLang's crash "
        "banner, a "
        "CUDA error code) with no more specific signature",
        "read the traceback / the lines before the crash",
        90,
        False,
        2,
    ),
    ClassInfo(
        "starting",
        "still loading: the log has not reached SGLang's ready line and shows nothing fatal (refused or "
        "/health "
        "503 before the first healthy pass)",
        "wait (start_period); a log that stops growing while the port refuses is reported as crash",
        None,
        False,
        2,
    ),
    ClassInfo(
        "healthy",
        "the log reached the ready line with nothing fatal after it / every check passed",
        "-",
        None,
        False,
        0,
    ),
)

CLASSES: tuple[str, ...] = tuple(info.name for info in CLASS_INFO)
DESCRIPTIONS: dict[str, str] = {info.name: f"{info.meaning}; fix: {info.fix}" for info in CLASS_INFO}
#: verdicts that do not heal by waiting (fail-fast stops the server on them)
FAIL_FAST_CLASSES: frozenset[str] = frozenset(info.name for info in CLASS_INFO if info.fail_fast)
#: class -> severity tier (see :class:`ClassInfo`), for ``bwstack report diff``
SEVERITY: dict[str, int] = {info.name: info.severity for info in CLASS_INFO}
#: classes a log line may carry that are no verdict while the server still answers (SGLang's /health timeout)
NOT_FATAL_WHILE_ALIVE: tuple[str, ...] = ("health_timeout",)
_CLASS_PRIORITY: dict[str, int] = {i.name: i.priority for i in CLASS_INFO if i.priority is not None}
_SPECIFIC_ASSERTION = 20
_WEAK = 95  # generic traceback evidence: ranks after every crash banner
MAX_TEXT = 500

#: SGLang's line once its own warmup request passed (srt/entrypoints/http_server.py, 0.2 .. 0.5.23)
READY_TEXT = "The server is fired up and ready to roll"
#: the lines that open a new server run in one log: SGLang's ServerArgs dump (a repr up to 0.5.1x, a dict in
#: 0.5.23: ``server_args={'model_path': …``, seen in real 0.5.23 logs), this project's serve wrapper
START_TEXTS: tuple[str, ...] = ("server_args=ServerArgs(", "server_args={", "bwstack-serve: starting ")


@dataclass(frozen=True)
class Signature:
    """One regex -> class entry with its public source and a typical fix."""

    cls: str
    regex: str
    keys: tuple[str, ...]  # literal texts, one of which every matching line contains (fast prefilter)
    priority: int
    source: str
    fix: str
    weak: bool = False  # generic traceback evidence: a verdict only once the server stopped answering
    generic: bool = False  # counts only on lines no specific signature explains (weak implies generic)

    @property
    def pattern(self) -> re.Pattern[str]:
        """The compiled regex, compiled on first use (a light probe with no new log lines compiles none)."""
        found = _COMPILED.get(self.regex)
        if found is None:
            found = _COMPILED[self.regex] = re.compile(self.regex)
        return found


_COMPILED: dict[str, re.Pattern[str]] = {}


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
    cls: str,
    regex: str,
    keys: tuple[str, ...],
    source: str,
    fix: str = "",
    *,
    priority: int | None = None,
    weak: bool = False,
    generic: bool = False,
) -> Signature:
    if cls not in _CLASS_PRIORITY:
        raise ValueError(f"unknown failure class {cls!r}")
    prio = _CLASS_PRIORITY[cls] if priority is None else priority
    return Signature(
        cls=cls,
        regex=regex,
        keys=keys,
        priority=prio,
        source=source,
        fix=fix,
        weak=weak,
        generic=generic or weak,
    )


#: what launchers put before a log line: ANSI colour, Ray's ``(SGLangWorker pid=..)``, ``[/bin/sh@<0,0>]:``,
#: mpirun's ``[1,0]<stderr>:``, the CRI ``<time> stdout F``, SGLang's ``[<time> DP1 PP1 TP3]``, compose's
#: ``service-1  |``, srun's ``0:``, bare rank tags (``TP3``, ``PP1 TP1``); anchored patterns skip them
_PREFIX = (
    r"(?:\x1b\[[0-9;]*[A-Za-z]"
    r"|\([\w.-]+ pid=\d+[^)\n]*\)"
    r"|\[[^\]\n]*@<[\d,]+>\]:"
    r"|\[\d+,\d+\]<std(?:out|err)>:"
    r"|\d{4}-\d\d-\d\dT[\d:.]+(?:Z|[+-]\d\d:?\d\d)?\s+(?:stdout|stderr)\s+[FP]"
    r"|\[\d{4}-\d\d-\d\d[^\]\n]*\]"
    r"|[\w.-]+\s+\|"
    r"|\d+:"
    r"|[A-Z]{2,}[A-Z_]*\d+"
    r")"
)
LINE_START = rf"(?:^|\r)\s*(?:{_PREFIX}\s*)*"

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
        r"CPU FP8 KV cache requires (?:Intel AMX support|the intel_amx attention backend)",
        ("CPU FP8 KV cache requires",),
        "SGLang 0.5.23 srt/mem_cache/kv_cache_configurator.py; seen in a real run of profiles.cpu.yaml "
        "cpu-fp8-kv (docs/cpu.md)",
        "the CPU FP8 KV cache needs Intel AMX and SGLang's CPU kernels (intel_amx); use kv_cache_dtype auto "
        "with torch_native",
    ),
    _sig(
        "unsupported_arch",
        r"RuntimeError: 0 active drivers \(\[\]\)",
        ("0 active drivers",),
        "Triton runtime/driver.py finds no GPU driver; seen in a real run of profiles.cpu.yaml cpu-triton "
        "(SGLang 0.5.23 on the CPU, docs/cpu.md)",
        "Triton kernels need a GPU: on the CPU use attention_backend torch_native",
    ),
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
        r"Unsupported (?:CUDA |GPU )?arch(?:itecture)?\b",
        ("Unsupported architecture", "Unsupported CUDA arch", "Unsupported GPU arch", "Unsupported arch"),
        "generic kernel arch check (FlashInfer, DeepGEMM); sgl-project/sglang#37105, #26087, #25877; "
        "sgl-project/mini-sglang#129; Comfy-Org/ComfyUI#7494 ('Unsupported CUDA architecture: sm120')",
        "pick a backend that ships kernels for this GPU arch",
    ),
    _sig(
        "unsupported_arch",
        r"Unsupported compute capability|No supported CUDA architectures found|No compiled \w+ for CUDA "
        r"device "
        r"capability|requires (?:GPUs with )?sm_?\d+|is only supported on (?:SM|sm_?)\d+",
        (
            "Unsupported compute capability",
            "No supported CUDA architectures found",
            "No compiled ",
            "requires sm",
            "requires GPUs with sm",
            "only supported on SM",
            "only supported on sm",
        ),
        "sgl-project/sglang#32933 (pdmux 'Unsupported compute capability: 12.0'); torch cpp_extension / "
        "FlashInfer JIT ('No supported CUDA architectures found', 'FlashInfer requires sm75+', "
        "flashinfer-ai/flashinfer#371, #3674); vllm-project/vllm#32109 ('No compiled cutlass_scaled_mm for "
        "CUDA "
        "device capability: 120'); ai-dynamo/aiconfigurator#975 ('Sparse Attention Forward Kernel is only "
        "supported on SM90a and SM100f')",
        "pick a backend/kernel built for this compute capability",
    ),
    _sig(
        "unsupported_arch",
        r"Assertion error \([^)]*layout\.hpp:\d+\): Unknown recipe",
        ("Unknown recipe",),
        "DeepGEMM scale-factor recipe missing for the arch (SM120 FP8 block GEMM); "
        "ai-dynamo/aiconfigurator#975, "
        "#1176; deepseek-ai/DeepGEMM#324",
        "DeepGEMM with SM120 kernels, or SGLANG_ENABLE_JIT_DEEPGEMM=0",
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
        r"|an illegal instruction was encountered|unspecified launch failure|cudaErrorLaunchFailure",
        (
            "illegal memory access",
            "cudaErrorIllegalAddress",
            "misaligned address",
            "illegal instruction",
            "unspecified launch failure",
            "cudaErrorLaunchFailure",
        ),
        "CUDA errors 700/716/715/719; sgl-project/sglang#8296, #11968, #18785, #15132; "
        "deepseek-ai/DeepSeek-MoE#47",
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
        r"Unrecognized model in |Should have a `model_type` key|Model architectures \[[^\]\n]*\] are not "
        r"supported",
        ("Unrecognized model in ", "Should have a `model_type` key", "are not supported"),
        "transformers AutoConfig without a model_type (Ascend/sglang#602, QwenLM/Qwen3#1368); SGLang's model "
        "registry (sgl-project/sglang#4253 title: 'Model architectures [...] are not supported for now')",
        "a transformers/SGLang release that knows the model type; a complete config.json",
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
    _sig(
        "nccl",
        r"\bNCCL WARN\b|ProcessGroupNCCL's watchdog got stuck|\bDistBackendError\b"
        r"|gloo/transport/tcp/pair\.cc:\d+",
        ("NCCL WARN", "watchdog got stuck", "DistBackendError", "gloo/transport"),
        "NCCL's own warnings (sgl-project/sglang#6246 'NCCL WARN Cuda failure', #16015); ProcessGroupNCCL "
        "heartbeat monitor (sgl-project/sglang#1691); c10d store (sgl-project/sglang#4096); gloo TCP pair "
        "(sgl-project/sglang#4205)",
        "NCCL_DEBUG=INFO; check P2P/IOMMU and the other ranks",
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
        r"(?i:watchdog timeout) \(self\.watchdog_timeout=",
        ("atchdog timeout (self.watchdog_timeout=",),
        "read in sglang 0.5.9/0.5.23 wheels srt/utils/watchdog.py ('Scheduler watchdog timeout', "
        "'TokenizerManager watchdog timeout ... soft=True'); older schedulers: 'Watchdog timeout "
        "(self.watchdog_timeout=300)' (sgl-project/sglang#7783, UCSB-AI/Soft-Thinking#10)",
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
    # --- kernel_compile: JIT toolchains ---------------------------------------------------------------------
    _sig(
        "kernel_compile",
        r"ptxas fatal|PTXASError|PTX codegen error|ptxas\b[^\n]*returned non-zero exit status"
        r"|is not defined for option 'gpu-(?:name|architecture)'",
        ("ptxas", "PTXAS", "PTX codegen", "is not defined for option"),
        "Triton's bundled ptxas older than the GPU: RLinf/RLinf#92, InternLM/lmdeploy#3410 (sm_120), "
        "triton-lang/triton#8539 (sm_121a), vllm-project/vllm#31338",
        "TRITON_PTXAS_PATH=/usr/local/cuda/bin/ptxas (CUDA >= 12.8) or a Triton release that knows the arch",
    ),
    _sig(
        "kernel_compile",
        r"not supported in this architecture",
        ("not supported in this architecture",),
        "Triton codegen ('type fp8e4nv not supported in this architecture'); sgl-project/sglang#7227",
        "an FP8 path supported on this arch, or another kernel backend",
    ),
    _sig(
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
    # --- import_error: a broken Python environment ----------------------------------------------------------
    _sig(
        "import_error",
        LINE_START + r"(?:[\w.]+\.)?(?:ModuleNotFoundError|ImportError)(?::|$)",
        ("ModuleNotFoundError", "ImportError"),
        "Python import failure at start: sgl-project/sglang#391, #362, #13276, #7942; real SGLang on a CPU "
        "host "
        "(docs: a ModuleNotFoundError traceback in the main process)",
        "rebuild the image from the pinned lock; never pip-install over it",
        weak=True,
    ),
    _sig(
        "import_error",
        r"\.so[^\n]*: undefined symbol: ",
        ("undefined symbol",),
        "an extension built against another torch: sgl-project/sglang#1321 (vllm _core_C)",
        "rebuild the image from the pinned lock (torch and its extensions must match)",
        weak=True,
    ),
    _sig(
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
    _sig(
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
    _sig(
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
    _sig(
        "crash",
        r"Fatal Python error: |terminate called after throwing an instance of|\(core dumped\)"
        r"|" + LINE_START + r"(?:Segmentation fault|Bus error|Aborted|Killed)\s*$",
        (
            "Fatal Python error",
            "terminate called after",
            "core dumped",
            "Segmentation fault",
            "Bus error",
            "Aborted",
            "Killed",
        ),
        "CPython faulthandler / libstdc++ abort / the shell's signal report: sgl-project/sglang#3451, #3778, "
        "#10350, #10216; sgl-project/sglang#2468 ('Killed')",
        "a native crash: read the thread dump; check driver/CUDA/torch versions match",
    ),
    _sig(
        "crash",
        r"crashed with exit code -?\d+|(?:terminated|killed) (?:with|by) signal|exited with (?:exit )?code "
        r"-\d+",
        (
            "crashed with exit code",
            "with signal",
            "by signal",
            "exited with code -",
            "exited with exit code -",
        ),
        "read in sglang 0.5.23 wheel srt/utils/watchdog.py (SubprocessWatchdog: 'Subprocess scheduler_0 "
        "(pid=..) "
        "crashed with exit code -6'); sgl-project/sglang#18582",
        "a child was killed by a signal: read the lines above (OOM killer: dmesg)",
    ),
    _sig(
        "crash",
        r"\bCUDA (?:error|Error|ERROR)(?: \d+)?: |\bcudaError[A-Z]\w+|\bCUDA_ERROR_[A-Z_]+|\bCUDART error: ",
        ("CUDA error", "CUDA Error", "CUDA ERROR", "cudaError", "CUDA_ERROR_", "CUDART error"),
        "CUDA runtime/driver error codes (torch c10 CUDAException, FlashInfer 'CUDA Error: ... (209)'); "
        "sgl-project/sglang#7918 ('operation not permitted when stream is capturing')",
        "read the CUDA error; CUDA_LAUNCH_BLOCKING=1 locates it",
        priority=92,
        generic=True,
    ),
    _sig(
        "crash",
        r"Exception in (?:run_tp_server|ModelTpServer|Controller\w*|DetokenizerManager|TokenizerManager)"
        r"|\binit state: Traceback|Child process unexpectedly failed",
        ("Exception in ", "init state: Traceback", "unexpectedly failed"),
        "SGLang 0.1-0.2 crash banners: sgl-project/sglang#748, #350, #373, flashinfer-ai/flashinfer#402",
        "read the traceback that follows",
    ),
    # --- generic traceback evidence (weak: a verdict once the port stops answering, and in classify-log) ----
    _sig(
        "assertion",
        LINE_START + r"assert\s",
        ("assert",),
        "a traceback cut after its source line: the failing `assert ...` is the only evidence "
        "(triton-lang/triton#7942)",
        "read the assert",
        weak=True,
    ),
    _sig(
        "crash",
        LINE_START + r"(?:[A-Za-z_]\w*\.)*(?:[A-Z]\w*)?(?:Error|Exception)(?::\s|:?\s*$)",
        ("Error", "Exception"),
        "the exception line that ends a Python traceback (ValueError: .., torch.AcceleratorError: .., "
        "tvm.error.InternalError: ..)",
        "read the traceback above it",
        priority=_WEAK,
        weak=True,
    ),
    _sig(
        "crash",
        r"Traceback \(most recent call last\)|" + LINE_START + r'File "|\([\w.-]+ pid=\d+[^)\n]*\)\s+File "',
        ("Traceback (most recent call last)", 'File "'),
        "a Python traceback (also a truncated one that shows only its frames, or faulthandler's thread dump)",
        "read the traceback",
        priority=_WEAK + 1,
        weak=True,
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

_KEYS: tuple[str, ...] = tuple(
    dict.fromkeys((*START_TEXTS, READY_TEXT, *(key for sig in SIGNATURES for key in sig.keys)))
)
#: lower-case scan words: the text is scanned once per word (not once per key), a line holding one is
#: checked for the exact keys that contain it. Chosen to cover many keys, to be long (a longer needle scans
#: faster) and rare in healthy logs; a key that contains none of them is scanned for itself.
_SCAN_WORDS: tuple[str, ...] = (
    "error", "support", "ustom", "requires", "watchdog", "exit", "assert", "fail", "bwstack-serve",
    "recognize", "illegal", "sigquit", "signal", "kernel", "ptx", "tensor",
    "not compatible with the current pytorch", "out of resource: shared memory",
    "should have a `model_type` key", "resources requested for launch", "unable to determine the device",
    "dynamic shared memory size", "out of range float values", "is not defined for option", "repo",
    "server_args=serverargs(", "server_args={", "terminate called after", "trtllm fmhav2 prefill",
    "init state: traceback",
    "ninja: build stopped", "_kv_cache_store_fp8", "fallen off the bus", "segmentation fault", "nccl",
    "misaligned address", "size mismatch for", "tllmgenfmharunner", "not enough memory", "undefined symbol",
    "hit an exception", "unknown recipe", "gloo/transport", "exception in ", "nan detected", "contains nan",
    "no compiled ", "gpu is lost", "core dumped", "peer access", "config.json", "aborted", "killed",
    "the server is fired up and ready to roll", "traceback (most recent call last)", "out of memory", "xid",
    "exception", 'file "',
)  # fmt: skip
_KEYS_LOW: tuple[str, ...] = tuple(key.lower() for key in _KEYS)
_SCAN: tuple[str, ...] = (
    *_SCAN_WORDS,
    *(low for low in _KEYS_LOW if not any(word in low for word in _SCAN_WORDS)),
)
_SCAN_BYTES: tuple[bytes, ...] = tuple(word.encode() for word in _SCAN)
#: scan word index -> indexes (in _KEYS) of the keys that contain it
_WORD_KEYS: tuple[tuple[int, ...], ...] = tuple(
    tuple(i for i, low in enumerate(_KEYS_LOW) if word in low) for word in _SCAN
)
_START_KEYS = frozenset(range(len(START_TEXTS)))
_READY_KEY = len(START_TEXTS)
#: key index -> indexes of the signatures that list it
_KEY_INDEX: dict[str, int] = {key: i for i, key in enumerate(_KEYS)}
_SIGS_OF: list[set[int]] = [set() for _ in _KEYS]
for _i, _sig_entry in enumerate(SIGNATURES):
    for _key in _sig_entry.keys:
        _SIGS_OF[_KEY_INDEX[_key]].add(_i)
_KEY_SIGS: tuple[frozenset[int], ...] = tuple(frozenset(found) for found in _SIGS_OF)
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_Best = tuple[int, int, str, Signature]


def _clean(line: str) -> str:
    text = _ANSI.sub("", line).strip()
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 3] + "..."


class Scanner:
    """Incremental classifier: feed complete lines (or text chunks ending at a newline), read result().

    Only what follows the last start banner (``START_TEXTS``) counts: a log that holds an earlier run keeps
    the verdict of the newest one. ``ready`` tells whether that run reached SGLang's ready line.
    """

    def __init__(self) -> None:
        self.lines_seen = 0
        self.start_line = 0  # 1-based line of the last start banner (0: none seen)
        self.ready_line = 0  # 1-based line of the last ready line after it (0: none)
        self._best: _Best | None = None
        self._strong: _Best | None = None
        self._seen: dict[str, tuple[int, int]] = {}
        self._seen_strong: dict[str, tuple[int, int]] = {}

    @property
    def ready(self) -> bool:
        """True when the current run logged SGLang's ready line."""
        return self.ready_line > 0

    def _consider(self, line: str, line_no: int, keys: list[int]) -> None:
        """Match one candidate line; ``keys`` are the indexes (in ``_KEYS``) of the literal keys it holds."""
        if not _START_KEYS.isdisjoint(keys):
            self.start_line, self.ready_line = line_no, 0
            self._best = self._strong = None
            self._seen, self._seen_strong = {}, {}
            return
        if _READY_KEY in keys:
            # the run went on to be ready: generic traceback evidence before this line was handled (real
            # 0.5.9 logs a ModuleNotFoundError for openai_harmony, then serves); specific signatures stay
            self.ready_line = line_no
            self._best, self._seen = self._strong, dict(self._seen_strong)
        candidates = sorted(frozenset().union(*(_KEY_SIGS[k] for k in keys)))
        found = [SIGNATURES[i] for i in candidates if SIGNATURES[i].pattern.search(line)]
        if any(not sig.generic for sig in found):
            found = [sig for sig in found if not sig.generic]
        for sig in found:
            rank = (sig.priority, line_no)
            if sig.cls not in self._seen or rank < self._seen[sig.cls]:
                self._seen[sig.cls] = rank
            if self._best is None or rank < (self._best[0], self._best[1]):
                self._best = (sig.priority, line_no, _clean(line), sig)
            if not sig.weak and (self._strong is None or rank < (self._strong[0], self._strong[1])):
                self._strong = (sig.priority, line_no, _clean(line), sig)
            if not sig.weak and (sig.cls not in self._seen_strong or rank < self._seen_strong[sig.cls]):
                self._seen_strong[sig.cls] = rank

    def feed(self, text: str) -> None:
        """Scan ``text``; its first character starts a new line (a partial last line counts as a line).

        Candidate lines are found with bytes.find (C speed) on the lower-cased UTF-8 text, once per scan word
        (each signature key contains one); only the signatures whose keys a line holds are matched against it.
        """
        raw = text.encode("utf-8", "surrogatepass")  # bytes: one byte per ASCII char, lower() keeps offsets
        low = raw.lower()
        found: dict[int, set[int]] = {}
        for index, word in enumerate(_SCAN_BYTES):
            pos = low.find(word)
            while pos >= 0:
                found.setdefault(low.rfind(b"\n", 0, pos) + 1, set()).update(_WORD_KEYS[index])
                end = low.find(b"\n", pos)
                pos = -1 if end < 0 else low.find(word, end)
        line_idx = self.lines_seen
        counted = 0
        for start in sorted(found):
            end = raw.find(b"\n", start)
            line = raw[start : len(raw) if end < 0 else end].decode("utf-8", "surrogatepass")
            keys = [k for k in sorted(found[start]) if _KEYS[k] in line]
            if keys:
                line_idx += raw.count(b"\n", counted, start)
                counted = start
                self._consider(line, line_idx + 1, keys)
        self.lines_seen += text.count("\n")
        if text and not text.endswith("\n"):
            self.lines_seen += 1

    def result(self, strong_only: bool = False) -> Match | None:
        """The root cause of the current run, or None; ``strong_only`` skips generic traceback evidence."""
        best = self._strong if strong_only else self._best
        if best is None:
            return None
        _prio, line_no, text, sig = best
        others = sorted((v, k) for k, v in self._seen.items() if k != sig.cls)
        return Match(cls=sig.cls, line=line_no, text=text, also=tuple(k for _, k in others), signature=sig)

    def verdict(self) -> str:
        """The log's class: the root cause, else ``healthy`` after the ready line, else ``starting``."""
        match = self.result()
        if match is not None:
            return match.cls
        return "healthy" if self.ready else "starting"

    def to_state(self) -> dict[str, Any]:
        """A JSON-able snapshot, so a later process can continue the scan."""

        def best(found: _Best | None) -> dict[str, Any] | None:
            if found is None:
                return None
            return {"index": SIGNATURES.index(found[3]), "line": found[1], "text": found[2]}

        return {
            "lines_seen": self.lines_seen,
            "start": self.start_line,
            "ready": self.ready_line,
            "best": best(self._best),
            "strong": best(self._strong),
            "seen": {k: list(v) for k, v in self._seen.items()},
            "seen_strong": {k: list(v) for k, v in self._seen_strong.items()},
        }

    @classmethod
    def from_state(cls, state: Any) -> Scanner:
        """Rebuild a scanner from :meth:`to_state`; anything malformed gives a fresh scanner."""

        def best(found: Any) -> _Best | None:
            if found is None:
                return None
            sig = SIGNATURES[int(found["index"])]
            return (sig.priority, int(found["line"]), str(found["text"]), sig)

        scanner = cls()
        try:
            scanner.lines_seen = int(state["lines_seen"])
            scanner.start_line = int(state.get("start", 0))
            scanner.ready_line = int(state.get("ready", 0))
            scanner._best = best(state["best"])
            scanner._strong = best(state.get("strong"))
            scanner._seen = {
                str(k): (int(v[0]), int(v[1])) for k, v in dict(state["seen"]).items() if k in _CLASS_PRIORITY
            }
            scanner._seen_strong = {
                str(k): (int(v[0]), int(v[1]))
                for k, v in dict(state.get("seen_strong", {})).items()
                if k in _CLASS_PRIORITY
            }
        except (KeyError, IndexError, TypeError, ValueError, AttributeError):
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
    return scan_text(text).result()


def scan_text(text: str) -> Scanner:
    """A scanner that has read ``text`` (for ``verdict()`` and ``ready`` besides ``result()``)."""
    scanner = Scanner()
    scanner.feed(text)
    return scanner


def classify_file(path: str, chunk_bytes: int = 1 << 20) -> Match | None:
    """Classify a log file by streaming it in chunks cut at line ends; raises OSError if unreadable."""
    return scan_file(path, chunk_bytes).result()


def scan_file(path: str, chunk_bytes: int = 1 << 20) -> Scanner:
    """A scanner that has streamed the file (UTF-8 with replacement); raises OSError if unreadable."""
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
    return scanner


def class_table() -> str:
    """The Markdown table of every class with its meaning and typical fix (README, docs/healthcheck.md)."""
    rows = ["| class | meaning | typical fix | fail-fast |", "| --- | --- | --- | --- |"]
    rows += [f"| `{i.name}` | {i.meaning} | {i.fix} | {'yes' if i.fail_fast else '-'} |" for i in CLASS_INFO]
    return "\n".join(rows) + "\n"


if __name__ == "__main__":  # python3 -m healthchecks.signatures: print the class table for the docs
    print(class_table(), end="")
