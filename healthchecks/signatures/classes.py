"""The failure classes of the catalog: meaning, typical fix, rank among root causes, fail-fast, severity tier.

Stdlib only; part of the one failure catalog (:mod:`healthchecks.signatures` is its public face: import the
names from there). Every list of classes elsewhere (the docs' class tables, the fail-fast set, the rules
schema's enum, the profile ``expect`` values, ``bwstack report diff``'s tiers) is derived from
:data:`CLASS_INFO`.
"""

from __future__ import annotations

from typing import NamedTuple


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
        "hang",
        "busy and stuck: requests in flight and no token generated for the hang bound (SGLang's own "
        "/metrics counters), or a streamed probe/soak request with no token within it; in a log, a thread "
        "dump of a stuck process (py-spy, faulthandler) with nothing fatal",
        "a livelocked kernel (FlashInfer SM120 sparse MLA under load): another DSA decode backend or the "
        "dense fallback; read a py-spy dump of the scheduler",
        94,
        True,
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
#: classes a restart of the same spec may heal, so Docker's restart policy may retry them (healthchecks/
#: norestart.py remembers every other failure per spec and refuses to reload the model for it): a NCCL or
#: store hiccup, a probe or start-up timeout, an OOM at start (another process held the memory), a failure to
#: fetch or read the weights, an unknown crash, a warmup request that failed on the way
RESTART_HEALS: frozenset[str] = frozenset(
    {"nccl", "timeout", "health_timeout", "oom", "model_load", "warmup_failed", "crash"}
)
#: class -> severity tier (see :class:`ClassInfo`), for ``bwstack report diff``
SEVERITY: dict[str, int] = {info.name: info.severity for info in CLASS_INFO}
#: classes a log line may carry that are no verdict while the server still answers (SGLang's /health timeout)
NOT_FATAL_WHILE_ALIVE: tuple[str, ...] = ("health_timeout",)
#: class -> rank among root causes (lower wins); classes that never come from a log line are left out
CLASS_PRIORITY: dict[str, int] = {i.name: i.priority for i in CLASS_INFO if i.priority is not None}


def class_table() -> str:
    """The Markdown table of every class with its meaning and typical fix (README, docs/healthcheck.md)."""
    rows = ["| class | meaning | typical fix | fail-fast |", "| --- | --- | --- | --- |"]
    rows += [f"| `{i.name}` | {i.meaning} | {i.fix} | {'yes' if i.fail_fast else '-'} |" for i in CLASS_INFO]
    return "\n".join(rows) + "\n"
