"""Failure signatures, first part: wrong numbers, and what the GPU cannot run or hold.

Stdlib only; part of the one failure catalog (:mod:`healthchecks.signatures` joins this table and
:mod:`healthchecks.signatures.runtime`, in this order: the order is part of the catalog, it breaks ties
between signatures of one rank on one line and numbers the entries a saved scan refers to). Families: ``nan``,
the specific assertions (an unsupported KV cache dtype), ``unsupported_arch``, ``no_kernel_image``,
``shared_memory``, ``oom``, ``illegal_memory``. Each entry names the public source of its text.
"""

from __future__ import annotations

from healthchecks.signatures.entry import MODEL_CLASS, Signature, sig

_KV_BF16 = "pass --kv-cache-dtype bf16 explicitly (DSA models auto-select fp8_e4m3 on SM>=10)"
_SPECIFIC_ASSERTION = 20

SIGNATURES: tuple[Signature, ...] = (
    # --- nan: the root cause of the device assert / crash that follows ---------------------------------
    sig(
        "nan",
        r"probability tensor contains either .?inf.?, .?nan.? or element < 0",
        ("probability tensor contains either",),
        "torch.multinomial (TensorCompare.cu _assert_async_cuda_kernel / Distributions.cpp); "
        "sgl-project/sglang#21460; kvcache-ai/ktransformers#465, zai-org/GLM-4#637",
        _KV_BF16,
    ),
    sig(
        "nan",
        r"Input (?:probs|logits) contains NaN",
        ("contains NaN",),
        "read in flashinfer-python 0.6.3 wheel flashinfer/sampling.py (check_nan=True)",
        _KV_BF16,
    ),
    sig(
        "nan",
        r"Detected errors during sampling! NaN in the logits",
        ("Detected errors during sampling",),
        "read in sglang 0.5.9 wheel srt/layers/sampler.py (--enable-nan-detection); sgl-project/sglang#1953",
        _KV_BF16,
    ),
    sig(
        "nan",
        r"NaN detected\b",
        ("NaN detected",),
        "read in sglang 0.5.17/0.5.23 wheels srt/utils/async_probe.py (SGLANG_SANITIZE_NAN_LOGITS warning, "
        "SGLANG_ENABLE_ASYNC_ASSERT 'NaN detected! ...'); sgl-project/sglang#21460",
        _KV_BF16,
    ),
    sig(
        "nan",
        r"Out of range float values are not JSON compliant",
        ("Out of range float values",),
        "read in sglang 0.5.9 wheel srt/entrypoints/http_server.py: /generate returns a dict that FastAPI "
        "renders with Starlette JSONResponse (json.dumps allow_nan=False), so a NaN/inf logprob is a 500",
        _KV_BF16,
    ),
    # --- specific assertions -------------------------------------------------------------------------------
    sig(
        "assertion",
        r"assert not self\.(?:nsa|dsa)_kv_cache_store_fp8",
        ("_kv_cache_store_fp8",),
        "read in sglang 0.5.9 wheel srt/mem_cache/memory_pool.py L1498 (nsa_) and 0.5.23 L4956 (dsa_); "
        "SemiAnalysisAI/InferenceX glm5.2_fp4_rtx6000pro_sglang.sh (triton needs bf16 KV)",
        _KV_BF16,
        priority=_SPECIFIC_ASSERTION,
    ),
    sig(
        "assertion",
        r"DeepSeek DSA only supports bf16/bfloat16 or fp8_e4m3 kv_cache_dtype",
        ("DeepSeek DSA only supports",),
        "read in sglang 0.5.9 wheel srt/server_args.py (_set_default_nsa_kv_cache_dtype)",
        "use --kv-cache-dtype bf16 or fp8_e4m3 for DSA models",
        priority=_SPECIFIC_ASSERTION,
    ),
    # --- unsupported_arch --------------------------------------------------------------------------------
    sig(
        "unsupported_arch",
        r"CPU FP8 KV cache requires (?:Intel AMX support|the intel_amx attention backend)",
        ("CPU FP8 KV cache requires",),
        "SGLang 0.5.23 srt/mem_cache/kv_cache_configurator.py; seen in a real run of profiles.cpu.yaml "
        "cpu-fp8-kv (docs/cpu.md)",
        "the CPU FP8 KV cache needs Intel AMX and SGLang's CPU kernels (intel_amx); use kv_cache_dtype auto "
        "with torch_native",
    ),
    sig(
        "unsupported_arch",
        r"RuntimeError: 0 active drivers \(\[\]\)",
        ("0 active drivers",),
        "Triton runtime/driver.py finds no GPU driver; seen in a real run of profiles.cpu.yaml cpu-triton "
        "(SGLang 0.5.23 on the CPU, docs/cpu.md)",
        "Triton kernels need a GPU: on the CPU use attention_backend torch_native",
    ),
    sig(
        "unsupported_arch",
        r"TllmGenFmhaRunner",
        ("TllmGenFmhaRunner",),
        "FlashInfer trtllm fmhaRunner.cuh:37 'Unsupported architecture'; sgl-project/sglang#29562, #37105, "
        "#40558; flashinfer-ai/flashinfer#3263",
        "trtllm DSA/MLA kernels are SM100-only; on SM120 use flashinfer_sparse_mla (>=0.5.17) "
        "or the dense path",
    ),
    sig(
        "unsupported_arch",
        r"deepgemm/csrc/apis/attention\.hpp:\d+\)?:? Unsupported architecture",
        ("Unsupported architecture",),
        "DeepGEMM indexer kernels (arch 9/10 only); sgl-project/sglang#26087, #23657",
        "DeepGEMM with SM120 kernels (deepseek-ai/DeepGEMM PR #324, branch nv_dev)",
    ),
    sig(
        "unsupported_arch",
        # not a model's architecture (a class name like ChatGLMForConditionalGeneration): that is model_load
        r"Unsupported (?:CUDA |GPU )?arch(?:itecture)?\b(?!s?:? *\[?['\"]?" + MODEL_CLASS + ")",
        ("Unsupported architecture", "Unsupported CUDA arch", "Unsupported GPU arch", "Unsupported arch"),
        "generic kernel arch check (FlashInfer, DeepGEMM); sgl-project/sglang#37105, #26087, #25877; "
        "sgl-project/mini-sglang#129; Comfy-Org/ComfyUI#7494 ('Unsupported CUDA architecture: sm120')",
        "pick a backend that ships kernels for this GPU arch",
    ),
    sig(
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
    sig(
        "unsupported_arch",
        r"Assertion error \(?[^)\n]*layout\.hpp:\d+\)?:? '?Unknown recipe",
        ("Unknown recipe",),
        "DeepGEMM scale-factor recipe missing for the arch (SM120 FP8 block GEMM); "
        "ai-dynamo/aiconfigurator#975, "
        '#1176; deepseek-ai/DeepGEMM#324; also as "Assertion error csrc/utils/layout.hpp:57 '
        "'Unknown recipe'\" "
        "(vllm-project/vllm#21533)",
        "DeepGEMM with SM120 kernels, or SGLANG_ENABLE_JIT_DEEPGEMM=0",
    ),
    sig(
        "unsupported_arch",
        r"GLM DSA with FP8 KV cache on NVIDIA SM120/SM121 supports only flashinfer_sparse_mla",
        ("supports only flashinfer_sparse_mla",),
        "read in sglang 0.5.17/0.5.23 wheels sglang/kernels/ops/attention/flash_mla_sm120.py",
        "use --dsa-prefill-backend/--dsa-decode-backend flashinfer_sparse_mla "
        "(0.5.23 also triton_sparse_mla for prefill)",
    ),
    sig(
        "unsupported_arch",
        r"flashinfer_sparse_mla supports only GLM DSA with FP8 KV cache",
        ("flashinfer_sparse_mla supports only",),
        "read in sglang 0.5.17/0.5.23 wheels sglang/kernels/ops/attention/flash_mla_sm120.py",
        "flashinfer_sparse_mla needs a GLM DSA model, FP8 KV (fp8_e4m3) and SM120/SM121",
    ),
    sig(
        "unsupported_arch",
        r"DSA backend is only supported on ROCm/HIP",
        ("only supported on ROCm/HIP",),
        "read in sglang 0.5.23 wheel srt/arg_groups/overrides.py (_check_dsa_backend_constraints)",
        "the triton DSA backend is ROCm-only; pick a CUDA DSA backend",
    ),
    sig(
        "unsupported_arch",
        r"tilelang DSA prefill/decode kernels only support an fp8_e4m3 KV cache on ROCm/HIP",
        ("tilelang DSA prefill/decode kernels",),
        "read in sglang 0.5.17 wheel srt/arg_groups/overrides.py; sgl-project/sglang#40286",
        "tilelang on CUDA needs --kv-cache-dtype bf16",
    ),
    sig(
        "unsupported_arch",
        r"backend (?:for (?:prefill|decode) )?is only supported on (?:Hopper|Blackwell)",
        ("is only supported on",),
        "read in sglang 0.5.9 wheel srt/server_args.py ('TRTLLM MHA backend is only supported on Blackwell "
        "GPUs (SM100)') and 0.5.23 srt/arg_groups/attention_hook.py, overrides.py",
        "choose an attention backend supported on this arch (SM120: triton, flashinfer)",
    ),
    sig(
        "unsupported_arch",
        r"\brequires SM100\b|TRTLLM FMHAv2 prefill on SM120 does not support",
        ("requires SM100", "TRTLLM FMHAv2 prefill"),
        "read in sglang 0.5.23 wheel srt/arg_groups/attention_hook.py, kv_cache_hook.py",
        "choose a backend supported on this arch",
    ),
    # --- no_kernel_image ---------------------------------------------------------------------------------
    sig(
        "no_kernel_image",
        r"no kernel image is available for execution on the device|cudaErrorNoKernelImageForDevice",
        ("no kernel image", "cudaErrorNoKernelImageForDevice"),
        "CUDA error 209; sgl-project/sglang#7249 (RTX 5090), vllm-project/vllm#16901",
        "use an image whose CUDA libraries carry sm_120 kernels (bwstack audit)",
    ),
    sig(
        "no_kernel_image",
        r"with CUDA capability sm_\d+ is not compatible with the current PyTorch installation",
        ("not compatible with the current PyTorch",),
        "torch.cuda capability warning; pytorch/pytorch#150733",
        "use a PyTorch build for this arch (cu128+ for sm_120)",
    ),
    # --- shared_memory -----------------------------------------------------------------------------------
    sig(
        "shared_memory",
        r"Failed to set the allowed dynamic shared memory size",
        ("dynamic shared memory size",),
        "TileLang kernels needing ~166-170 KB on SM120; sgl-project/sglang#37105, #40286",
        "SM120 has ~99 KiB shared memory per block: use another backend or smaller tiles",
    ),
    sig(
        "shared_memory",
        r"out of resource: shared memory",
        ("out of resource: shared memory",),
        "Triton OutOfResources; sgl-project/sglang#2847, #8513 (Hardware limit: 101376)",
        "use another backend or smaller Triton block sizes / num_stages",
    ),
    sig(
        "shared_memory",
        r"(?i:too many resources requested for launch)|cudaErrorLaunchOutOfResources",
        ("resources requested for launch", "cudaErrorLaunchOutOfResources"),
        "CUDA error 701 (launch out of resources); NVIDIA/DeepLearningExamples#779",
        "use another backend or smaller tiles",
    ),
    # --- oom ---------------------------------------------------------------------------------------------
    sig(
        "oom",
        r"CUDA out of memory|OutOfMemoryError|CUDA error: out of memory|cudaErrorMemoryAllocation",
        ("out of memory", "OutOfMemoryError", "cudaErrorMemoryAllocation"),
        "torch.OutOfMemoryError; decode graph capture OOM sgl-project/sglang#29562",
        "lower --mem-fraction-static or --cuda-graph-max-bs (256 on 96 GB cards)",
    ),
    sig(
        "oom",
        r"Not enough memory\. Please try to increase --mem-fraction-static",
        ("Not enough memory",),
        "read in sglang 0.5.9 wheel srt/model_executor/model_runner_kv_cache_mixin.py",
        "raise --mem-fraction-static or use more GPUs (TP)",
    ),
    sig(
        "oom",
        # the KV pool exhausted while decoding, raised as an assert: a person names the pool, not the assert
        r"No space left for (?:only )?one request|\bavailable_size\(\) ?= ?0\b",
        ("No space left for", "available_size()"),
        "sglang srt/managers/schedule_batch.py retract_decode ('No space left for only one request' with the "
        "allocator's available_size()=0); round 8 (in-sample, sgl-project/sglang#14948, a PD decode server)",
        "lower --max-running-requests or the context length; raise --mem-fraction-static",
    ),
    sig(
        "oom",
        r"(?:Prefill|Decode) out of memory\. Try to lower your batch size|runs out of memory",
        ("out of memory",),
        "read in sglang 0.5.9 wheel srt/mem_cache/common.py",
        "lower --max-running-requests / --chunked-prefill-size",
    ),
    # --- illegal_memory ----------------------------------------------------------------------------------
    sig(
        "illegal_memory",
        # "an illegal memory access" without "was encountered": an error text cut short (a streamed error
        # message, a capped reason) still names the fault
        r"an illegal memory access|cudaErrorIllegalAddress|CUDA error: misaligned address"
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
)
