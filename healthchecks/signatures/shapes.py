"""Failure signatures by shape: fatal evidence, arch gates, resource limits, and the host's arch and serving.

Stdlib only; part of the one failure catalog (:mod:`healthchecks.signatures` joins ``signatures_gpu``,
``signatures_runtime`` and this table, in that order). The other tables hold sentences read in one library;
this one holds the *shapes* a library's failure takes, so a wording no table lists still reads right:

- **fatal evidence** (class ``crash`` unless a specific signature explains the line): lines that prove a
  process died or a request failed fatally -- SGLang's death notices without a traceback, a failed C++ check
  or a host-side assert, an exception line of any name. See :data:`FATAL` and docs/healthcheck.md.
- **arch gates** (``unsupported_arch``): an arch or compute capability named as required or unsupported, a
  device-property check that compares capabilities, a kernel built for another arch refusing this host.
- **resource limits** (``shared_memory``): Triton's ``OutOfResources`` in every wording of the pinned releases
  (3.5.1, 3.8.0), a failed dynamic-shared-memory request, CUDA's launch-out-of-resources.

It also defines the two facts the scanner keeps beside the verdict: the host's arch as the log states it
(:data:`HOST_ARCH`) and the serving evidence (:data:`SERVING`).
"""

from __future__ import annotations

import re

from healthchecks.signatures.entry import LINE_START, PICK_ARCH, WARNING, Signature, sig

_WEAK = 95  # as signatures_runtime: generic traceback evidence ranks after every crash banner
#: a line that only warns, or says what the server does instead, is no gate (a signature's ``unless``)
_A_WARNING = WARNING + r"|(?i:skipp|serving this)"
#: an arch as a log names it: sm_120, sm120a, SM100f, SM 90, compute_90a, CC 12.0, or a family name
_ARCH = (
    r"(?:\bsm_?\d{2,3}[a-z]?\b|\bSM ?\d{2,3}[a-z]?\b|\bcompute_\d{2,3}[a-z]?\b|\bCC \d|compute capabilit"
    r"|\b(?:Hopper|Blackwell|Ampere|Ada|Volta|Turing)\b)"
)

#: fatal evidence that proves a process died: SGLang's own death notices and crash advice (read in the sglang
#: 0.5.9/0.5.23 wheels: srt/entrypoints/engine.py, srt/utils/watchdog.py, test_utils.py) and the launchers'
_DEATH = sig(
    "crash",
    r"Received sigquit from a child proces|usually means the child failed|\bscheduler is dead\b"
    r"|\bdied during initialization\b|Initialization failed\. Please see the error messages above"
    r"|Dumping requests before crash"
    r"|Server process (?:exited with code -?(?!15\b)[1-9]|terminated unexpectedly)"
    r"|\bExit code: -?(?!15\b)(?!143\b)[1-9]\d*"  # -15 (SIGTERM) is a stop: evidence.STOPPED
    r"|\bScheduler or DataParallelController \d+ terminated with -?(?!15\b)[1-9]\d*",
    (
        "sigquit from a child",
        "usually means the child failed",
        "is dead",
        "died during",
        "Initialization failed",
        "before crash",
        "Server process",
        "Exit code: ",
        "DataParallelController ",
    ),
    "read in sglang 0.5.9/0.5.23 wheels: srt/entrypoints/engine.py ('Received sigquit from a child process. "
    "It usually means the child failed.', 'Rank N scheduler is dead', 'Rank N scheduler died during "
    "initialization (exit code: ..)', 'Exit code: ..', 'Initialization failed. Please see the error messages "
    "above.'), srt/managers/scheduler.py ('Dumping requests before crash'), test/test_utils.py "
    "('Server process "
    "exited with code -9'); sgl-project/sglang#3685 (the 'proces' typo); round 11: 'Scheduler or "
    "DataParallelController {pid} terminated with {exitcode}' (sglang 0.5.23 srt/entrypoints/engine.py, "
    "srt/managers/data_parallel_controller.py: the launcher's join on a scheduler that died)",
    "a server process died: read the lines above it (exit code -9: the OOM killer, dmesg)",
    generic=True,
)
#: fatal evidence of a failed native check: a C++ CHECK / TORCH_CHECK / host-side assert (the backtick
#: form of a CUDA device assert is device_assert's)
_CHECK = sig(
    "crash",
    r"\b(?:[A-Z_]*CHECK\w*|Check)\s*failed\b|\bAssertion error \(?[\w/.-]+:\d+|\bto be true, but got false\b"
    r"|\bAssertion\b[^`\n]*\bfailed\b",
    ("failed", "Failed", "Assertion error", "but got false"),
    "C++ checks that abort an op: DeepGEMM 'Assertion error csrc/utils/layout.hpp:57' "
    "(vllm-project/vllm#21533), "
    "TORCH_CHECK 'Expected .. to be true, but got false', glog/absl 'Check failed:', CUTLASS 'Assertion 0 && "
    '".." failed.\' (NVIDIA/cutlass#2819)',
    "a native check failed: read its condition; rerun with CUDA_LAUNCH_BLOCKING=1",
    generic=True,
)

#: fatal evidence, the one rule: a log line that proves a process died or a request failed fatally. A log
#: with fatal evidence is never ``starting``; with no specific signature it is ``crash``. The strong part
#: (this tuple and SGLang's crash banners in signatures_runtime) counts at once, also while the server still
#: answers; an uncaught exception (a traceback, its exception line of any name, a bare source line) is
#: weak: it counts once nothing answers on the port and in a finished log, because a live server logs
#: handled exceptions (real SGLang 0.5.9 logs one at every start).
FATAL: tuple[Signature, ...] = (_DEATH, _CHECK)

SIGNATURES: tuple[Signature, ...] = (
    *FATAL,
    # --- an exception line of any name (weak: part of the uncaught-exception evidence) ----------------------
    sig(
        "crash",
        LINE_START + r"(?:[a-z_]\w*\.)*(?:errors?|exceptions?)\.[A-Z]\w+: \S",
        ("errors.", "error.", "exceptions."),
        "an exception line whose class name does not end in Error/Exception (triton.runtime.errors."
        "OutOfResources: .., flashinfer.utils.BackendSupportedError: ..)",
        "read the traceback above it",
        priority=_WEAK,
        weak=True,
    ),
    # --- arch gates by shape ------------------------------------------------------------------------------
    sig(
        "unsupported_arch",
        r"(?:\b(?:requires?|required|only supports?)\b[^\n]{0,60}?"
        + _ARCH
        + r"|\b(?:does not|doesn't|do not|cannot|can't) support\b[^\n]{0,40}?"
        + _ARCH
        + r"|\b(?:not |un)supported (?:on|for|by) (?:this |the current |your )?(?:GPU|device|arch|"
        r"architecture|platform|compute capabilit|sm_?\d|SM ?\d)"
        r"|\bsupported (?:compute capabilities|archs?|architectures)\b\s*(?:are|is)?\s*[:=\[]"
        r"|(?:\bsm_?\d{2,3}[a-z]?\b|\bcompute capability \d+(?:\.\d)?)[^\n]{0,30}?\b(?:is |are )?"
        r"(?:not supported|unsupported)"
        r"|without targeting appropriate compute capability"
        r"|\bcompiled for (?:sm_?\d|SM ?\d|compute_\d|another arch|a different arch)[^\n]{0,80}?"
        r"(?:but|while|current|this (?:GPU|device))"
        r"|\bUnsupported SM version\b"
        r")",
        (
            "require",
            "support",
            "appropriate compute capability",
            "compiled for",
            "supported SM version",
        ),
        "the shape of an arch gate, seen in FlashInfer ('Cake FMHA requires compute capability 10.0 "
        ".. or 10.3 "
        ".., got 10.7', flashinfer-ai/flashinfer#5398; 'does not support compute capability 107; supported "
        "compute capabilities: [100, 103]', #5399), DeepGEMM ('requires Blackwell (SM100)'), CUTLASS ('Arch "
        "conditional MMA instruction used without targeting appropriate compute capability', "
        "NVIDIA/cutlass#2819), SGLang ('is only supported on Blackwell GPUs (SM100)'); round 7: 'Unsupported "
        "SM version' (FlashInfer's CUTLASS FMHA: assert sm_version >= 100 and sm_version < 120, 'Unsupported "
        "SM version'; TensorRT-LLM 'Unsupported SM version for FP8 block scaling GEMM')",
        PICK_ARCH,
        unless=_A_WARNING,
    ),
    sig(
        "unsupported_arch",
        LINE_START + r"(?:assert|raise)\b[^\n]*(?:device_capability|compute_capability|cuda_capability"
        r"|sm_version|\bis_sm\d+\w*|\bis_blackwell\w*|\bis_hopper\w*|\bget_arch\w*)",
        ("assert", "raise"),
        "a device-property check cut off with its traceback: the failing `assert`/`raise` compares the GPU's "
        "compute capability (SGLang's is_sm100_supported() gates, sgl-project/sglang#18755)",
        PICK_ARCH,
        weak=True,
    ),
    # --- no_kernel_image by shape: no code for this GPU in the binary ------------------------------------
    sig(
        "no_kernel_image",
        r"invalid device function|cudaErrorInvalidDeviceFunction|CUDA_ERROR_NO_BINARY_FOR_GPU",
        ("invalid device function", "InvalidDeviceFunction", "NO_BINARY_FOR_GPU"),
        "CUDA error 98 (cudaErrorInvalidDeviceFunction) and CUDA_ERROR_NO_BINARY_FOR_GPU (209's "
        "driver twin): the "
        "binary carries no code for this GPU's arch",
        "use an image whose CUDA libraries carry kernels for the arch (bwstack audit)",
    ),
    # --- shared_memory by shape: every wording of Triton 3.5.1 / 3.8.0 and CUDA's launch limits -----------
    sig(
        "shared_memory",
        r"\bOutOfResources\b|\bout of resources?: (?:shared memory|tensor memory|threads)\b"
        r"|\bHardware limit(?:ation)?: \d+|LAUNCH_OUT_OF_RESOURCES|\blaunch out of resources\b"
        r"|MaxDynamicSharedMemorySize[^\n]*(?i:error|fail|invalid)|(?i:error|fail|invalid)[^\n]*"
        r"MaxDynamicSharedMemorySize",
        (
            "OutOfResources",
            "out of resource",
            "Hardware limit",
            "LAUNCH_OUT_OF_RESOURCES",
            "launch out of resources",
            "MaxDynamicSharedMemorySize",
        ),
        "read in triton 3.5.1 and 3.8.0 wheels (the torch 2.9.1 and 2.13/2.14 pins): runtime/errors.py "
        "OutOfResources 'out of resource: {shared memory|tensor memory|threads}, Required: .., "
        "Hardware limit: "
        '..\'; compiler.py raise_(OutOfResources(self.metadata.shared, max_shared, "shared memory")); older '
        "'Hardware limitation:' (alipay/PainlessInferenceAcceleration#35); short 'OutOfResources: "
        "shared memory' "
        "(sgl-project/sglang#28038, GB10); cudaFuncSetAttribute(.., MaxDynamicSharedMemorySize, ..) failing",
        "SM120/SM121 have ~99 KiB shared memory per block: another backend, smaller tiles or Triton "
        "num_stages",
    ),
)

#: the host's arch as the log states it, most telling first: a capability check's 'got ..' / 'current device
#: is ..' / 'does not support compute capability ..', torch's and SGLang's env reports ('Compute Capability:
#: 12.0', 'which is of cuda capability 12.1', 'with CUDA capability sm_120'), ptxas's target. The groups give
#: major and minor (or the sm number); checked on lines holding one of the keys
HOST_ARCH_KEYS: tuple[str, ...] = ("apability", "ptxas", "is not defined for option")
HOST_ARCH: tuple[re.Pattern[str], ...] = tuple(
    re.compile(pattern)
    for pattern in (
        r"\bgot (?:sm_?|SM ?)?(\d{1,2})\.?(\d)\b",
        r"\bcurrent device is (?:sm_?|SM ?)(\d{2,3})",
        r"Current capability: (\d{2,3})",
        r"(?:does not support|[Uu]nsupported) compute capability:? (\d{1,2})\.?(\d)\b",
        r"(?i:compute capability)(?: is)?: \(?(\d{1,2})[.,]\s*(\d)\b",
        r"(?i:cuda capability) (?:sm_)?(\d{1,2})\.?(\d)\b",
        r"gpu-name=sm_(\d{2,3}a?)",
        r"Value 'sm_(\d{2,3}a?)'",
    )
)


def host_arch(line: str) -> str | None:
    """The host arch a log line states, as ``sm_<major><minor>`` (``sm_120``), else None."""
    for pattern in HOST_ARCH:
        found = pattern.search(line)
        if found is not None:
            return "sm_" + "".join(g for g in found.groups() if g is not None)
    return None


#: serving evidence, the one rule: SGLang's batch lines and successful generation answers. A run that shows
#: SERVING_MIN of them after its start banner serves, also when the ready line is not in view (an excerpt, a
#: rotated log); SGLang's own warmup logs at most two (one prefill batch, one POST /generate 200).
SERVING: tuple[bytes, ...] = (
    b"decode batch",
    # SGLang's ``Prefill batch.`` and 2024's router's ``new fill batch.`` (sglang 0.1.x
    # srt/managers/router/model_rpc.py, sgl-project/sglang#444), counted in one pass
    b"fill batch",
    b'/generate http/1.1" 200',
    b'/completions http/1.1" 200',
    # round 5 (issue 36): a client's model listing; SGLang's own warm-up never asks for it (it polls
    # GET /model_info, then posts /generate, /encode or, for a VLM, /v1/chat/completions: sglang
    # srt/entrypoints/http_server.py _execute_server_warmup), so a 200 on it is a client served
    # (sgl-project/sglang#30047: sglang.bench_serving against an NPU server)
    b'/v1/models http/1.1" 200',
    # round 7: an embedding model's OpenAI route; its warm-up posts /encode (the same function), never this
    b'/v1/embeddings http/1.1" 200',
    # round 10 (in-sample, kvcache-ai/Mooncake#851): a health probe answered 200; SGLang answers 503 until
    # its warm-up is done (sglang 0.5.9-0.5.23 srt/entrypoints/http_server.py health_generate: ServerStatus.
    # Starting -> 503), and its own warm-up never asks for it
    b'/health http/1.1" 200',
    b'/health_generate http/1.1" 200',
    # round 13 (in-sample, THUDM/slime#1487): a metrics scraper answered; the warm-up never asks for it, and
    # SERVING_MIN of them (a scrape every 15 s by default) is a server up for a minute
    b'/metrics http/1.1" 200',
)
SERVING_MIN = 4
#: serving evidence that is decisive alone (an excerpt may hold one line of it; issue 36 round 5):
#: - a decode batch line: SGLang logs one every --decode-log-interval (40) decode steps of the scheduler
#:   (sglang 0.5.19 wheel scheduler_components/batch_result_processor.py counts forward_ct_decode,
#:   metrics_reporter.py report_decode_stats logs when forward_ct_decode % decode_log_interval == 0), and its
#:   warm-up asks for max_new_tokens=8 (srt/entrypoints/http_server.py _execute_server_warmup): at most 7
#:   decode steps, never a decode batch line;
#: - a prefill batch that reused cached tokens (``#cached-token: 12``): the radix cache starts empty and the
#:   warm-up is the run's first request, so a prefix hit is a later request's.
#: A 200 on /generate or /v1/chat/completions is not decisive: the warm-up posts one and is answered 200.
#: - the same in 2024's router wording: ``new fill batch. #seq: 1. #cached_token: 330. #new_token: 2172.``
#:   (sglang 0.1.x srt/managers/router/model_rpc.py; sgl-project/sglang#444).
#: - a finished request that generated more tokens than the warm-up asks for (``'completion_tokens': 14``
#:   in --log-requests' ``out={'meta_info': ..}``, or a JSON answer's ``"completion_tokens": 14``): the
#:   warm-up's max_new_tokens is 8 (1 for an embedding model), so it is a client's (round 9, in-sample:
#:   sgl-project/sglang#18989).
#: - a /health_generate answered 200 (round 12, in-sample: round 10's sgl-project/sglang#3695): it answers
#:   503 while the server is starting (sglang 0.5.9-0.5.23 srt/entrypoints/http_server.py health_generate:
#:   ServerStatus.Starting) and else generates one token first (every version), so a 200 is a server up and
#:   generating; the warm-up never asks for it. ``/health`` is not: before 0.5.9 it answered 200 at once.
#: - a POST /v1/completions answered 200 (round 12, in-sample: round 10's ovg-project/kvcached#5): the
#:   warm-up posts /generate, /encode or, for a VLM, /v1/chat/completions (sglang 0.5.9-0.5.23
#:   _execute_server_warmup), never the text-completion route, so its 200 is a client served.
#: - ``sglang.bench_one_batch``'s ``Decode.  median latency:`` (round 12, in-sample: round 10's
#:   mirage-project/mirage#405; sglang 0.5.9 bench_one_batch.py): every prefill and decode step of the
#:   offline run completed.
SERVED: tuple[bytes, ...] = (
    b"decode batch",
    b'/health_generate http/1.1" 200',
    b'post /v1/completions http/1.1" 200',
    b"decode.  median latency: ",
    # round 12 (in-sample: round 10's sgl-project/sglang#7118): a PD transfer of a client's request failed;
    # the warm-up's request uses the fake transfer backend, which never fails (sglang 0.5.23
    # srt/disaggregation/prefill.py: FAKE_BOOTSTRAP_HOST -> TransferBackend.FAKE), so the server was serving
    # (one failed request is no fatal evidence: round 8's convention)
    b"transfer failed for request rank=",
    # round 13 (in-sample, THUDM/slime#1305): an RL trainer's calls, made once the server is up (slime, verl
    # and miles wait for it): flushing the cache, updating or releasing the weights; SGLang's warm-up polls
    # /model_info and posts one /generate, /encode or /v1/chat/completions, never these (sglang 0.5.23
    # srt/entrypoints/http_server.py _execute_server_warmup and its routes)
    b'/flush_cache http/1.1" 200',
    b'/abort_request http/1.1" 200',
    # round 14 (in-sample, THUDM/slime#1497): the scheduler's answer to a client's flush (HTTP /flush_cache,
    # Engine.flush_cache, release_memory_occupation: sglang 0.5.23 scheduler.py flush_cache); SGLang never
    # flushes on its own while starting
    b"cache flushed successfully!",
    b'/update_weights_from_disk http/1.1" 200',
    b'/update_weights_from_tensor http/1.1" 200',
    b'/update_weights_from_distributed http/1.1" 200',
    b'/release_memory_occupation http/1.1" 200',
    b'/resume_memory_occupation http/1.1" 200',
    # round 25 (in-sample: round 24's sgl-project/sglang#15881): a PD server's warm-up answered 200, its
    # status set Up on the same line (sglang 0.5.x srt/entrypoints/http_server.py _execute_server_warmup:
    # 'End of prefill disaggregation mode warmup with status 200' only when res.status_code == 200, else
    # 'warm Up Failed'; 0.5.23: 'End of disaggregation warmup' only when no DP rank failed): the ready
    # line's state, logged before it
    b"end of prefill disaggregation mode warmup with status 200",
    b"end of disaggregation warmup",
    # Not serving evidence, though a log may read so (each a corpus miss with its note): a grammar backend
    # skipping a client's constraint ('skip invalid json schema', 'skip invalid regex': logged when the
    # request arrives, before any token is generated; sgl-project/sglang#1776) and the router's 'All workers
    # are healthy' (its workers answered /health, which proves no generation; sgl-project/sglang#8557)
)
_CACHED = b"#cached"
_CACHED_TOKEN = (b"-token: ", b"_token: ")  # ``#cached-token: 12`` (0.2 on), ``#cached_token: 12`` (0.1.x)
_COMPLETION = b"completion_tokens"
_WARMUP_MAX_NEW_TOKENS = 8  # sglang srt/entrypoints/http_server.py _execute_server_warmup


#: Ray's log deduplication folds a worker's repeated line into one ending "[repeated 4x across cluster]"
#: (ray/_private/ray_logging: RAY_DEDUP_LOGS, on by default): the line stands for that many more
_RAY_REPEATED = b"[repeated "
_RAY_ACROSS = b"x across cluster]"


def repeated_serving(low: bytes, start: int) -> int:
    """How many more SERVING lines the Ray-deduplicated ones in lower-cased ``low`` (from ``start`` on)
    stand for (round 13, in-sample: THUDM/slime#1487's ``GET /metrics .. 200 OK [repeated 4x across
    cluster]``)."""
    more = 0
    at = low.find(_RAY_REPEATED, start)
    while at >= 0:
        end = low.find(_RAY_ACROSS, at)
        count = low[at + len(_RAY_REPEATED) : end]
        if end >= 0 and count.isdigit():
            line = low[low.rfind(b"\n", 0, at) + 1 : at]
            if any(word in line for word in SERVING):
                more += int(count)
        at = low.find(_RAY_REPEATED, at + 1)
    return more


def served(low: bytes, start: int) -> bool:
    """Whether lower-cased log text ``low`` holds decisive serving evidence (:data:`SERVED`, a prefix-cache
    hit) from offset ``start`` on (C-speed finds only)."""
    if any(low.find(word, start) >= 0 for word in SERVED):
        return True
    at = low.find(_CACHED, start)
    while at >= 0:
        after = low[at + len(_CACHED) : at + len(_CACHED) + 9]
        if after[:8] in _CACHED_TOKEN and after[8:].isdigit() and after[8:] != b"0":
            return True
        at = low.find(_CACHED, at + 1)
    at = low.find(_COMPLETION, start)
    while at >= 0:
        after = low[at + len(_COMPLETION) : at + len(_COMPLETION) + 12].lstrip(b"'\":= ")
        digits = after[: len(after) - len(after.lstrip(b"0123456789"))]
        if digits and int(digits) > _WARMUP_MAX_NEW_TOKENS:
            return True
        at = low.find(_COMPLETION, at + 1)
    return False
