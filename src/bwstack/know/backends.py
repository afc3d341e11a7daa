"""The one table of SGLang backends and the kernel libraries they run on.

Each :class:`BackendUse` says: this value of this semantic field (``dsa_decode_backend: flashmla_kv``) runs
on these libraries. Each :class:`Library` says where the library lives in a site-packages folder (glob
patterns on POSIX paths relative to site-packages) and how its kernels reach the GPU:

* ``binaries`` — files whose embedded SASS/PTX ``bwstack audit`` reads (``*.so`` fatbins, ``*.cubin``);
* ``jit_sources`` — (family, glob) pairs: kernels compiled at run time from sources the package ships; a match
  for the target's family (``sm90``, ``sm100``, ``sm120``; ``any`` = every arch) means the package carries a
  kernel source for that arch, no match means it carries none.

``needs`` is a tuple of groups; every group is needed and a group is satisfied by any one of its libraries
(a library may move between packages across SGLang versions: FlashMLA from ``sgl_kernel`` to ``flash_mla``).
The field ``common`` lists libraries every SGLang server loads whatever the profile says.

Plain data, imported by ``audit``, ``rules`` and ``explain``; facts cite the wheel they were read in or a
public issue/PR (sgl-project/sglang unless prefixed).
"""

from __future__ import annotations

from dataclasses import dataclass

from healthchecks import vocabulary

#: the fields an entry belongs to: ``common`` (every server), then each backend field that picks kernels
FIELDS = ("common", *vocabulary.KERNEL_FIELDS)

ANY_FAMILY = "any"


@dataclass(frozen=True)
class Library:
    """A kernel library: where its files are and how its kernels reach the GPU."""

    key: str
    title: str
    packages: tuple[str, ...]
    present: tuple[str, ...]
    source: str
    binaries: tuple[str, ...] = ()
    jit_sources: tuple[tuple[str, str], ...] = ()
    note: str = ""

    @property
    def is_jit(self) -> bool:
        """True when kernels are compiled at run time rather than shipped as SASS/PTX."""
        return bool(self.jit_sources)

    def jit_globs(self, family: str) -> tuple[str, ...]:
        """The JIT-source globs that prove a kernel source for ``family`` (``any`` entries included)."""
        return tuple(glob for fam, glob in self.jit_sources if fam in (family, ANY_FAMILY))

    def all_globs(self) -> tuple[str, ...]:
        """Every glob of this library (presence, binaries, JIT sources), for collecting paths in one walk."""
        return (*self.present, *self.binaries, *(glob for _, glob in self.jit_sources))


@dataclass(frozen=True)
class BackendUse:
    """One value of one semantic field and the libraries it runs on (all groups; any library per group)."""

    field: str
    value: str
    needs: tuple[tuple[str, ...], ...]
    source: str
    note: str = ""


_FI_CUBINS = "flashinfer_cubin/cubins/**/"
_DG_IMPLS = "deep_gemm/include/deep_gemm/impls/"
_FI_CSRC = "flashinfer/**/csrc/"

LIBRARIES: tuple[Library, ...] = (
    Library(
        key="torch",
        title="PyTorch CUDA kernels",
        packages=("torch",),
        present=("torch/lib/libtorch_cuda*.so",),
        binaries=("torch/lib/libtorch_cuda*.so", "torch/lib/libc10_cuda.so"),
        source="torch wheels ship their GPU kernels in torch/lib/libtorch_cuda.so",
        note="a torch built without 12.0 fails every profile with 'no kernel image is available'",
    ),
    Library(
        key="sgl_kernel.common_ops",
        title="sgl_kernel common ops",
        packages=("sgl-kernel", "sglang-kernel"),
        present=("sgl_kernel/**/common_ops*.so",),
        binaries=(
            "sgl_kernel/sm100/common_ops*.so",
            "sgl_kernel/sm90/common_ops*.so",
            "sgl_kernel/common_ops*.so",
        ),
        source=(
            "sgl_kernel/load_utils.py (sglang-kernel 0.4.10 wheel): compute capability 9.0 loads "
            "sm90/common_ops, every other arch sm100/common_ops; sgl-kernel/CMakeLists.txt adds sm_120a "
            "with CUDA >= 12.8"
        ),
    ),
    Library(
        key="sgl_kernel.flash_ops",
        title="sgl_kernel FlashAttention 3",
        packages=("sgl-kernel", "sglang-kernel"),
        present=("sgl_kernel/flash_ops*.so",),
        binaries=("sgl_kernel/flash_ops*.so",),
        source="sgl_kernel/flash_attn.py loads flash_ops; FA3 is SM90-only (#37105, PR #36507 comment)",
        note="sglang-kernel 0.4.10: sm_80, sm_86, sm_90a only",
    ),
    Library(
        key="sgl_kernel.flashmla_ops",
        title="FlashMLA in sgl_kernel",
        packages=("sgl-kernel", "sglang-kernel"),
        present=("sgl_kernel/flashmla_ops*.so",),
        binaries=("sgl_kernel/flashmla_ops*.so",),
        source=(
            "sglang 0.5.9 srt/layers/attention/nsa_backend.py imports sgl_kernel.flash_mla; "
            "sgl-kernel/cmake/flashmla.cmake builds sm_90a/sm_100a only; FlashMLA SM120 port "
            "deepseek-ai/FlashMLA#189 closed unmerged"
        ),
        note="sglang-kernel 0.4.10: sm_90a, sm_100f, sm_103a",
    ),
    Library(
        key="flash_mla",
        title="FlashMLA (sgl-flash-mla)",
        packages=("sgl-flash-mla", "flash-mla"),
        present=("flash_mla/*.so",),
        binaries=("flash_mla/*.so",),
        source=(
            "sglang 0.5.23 kernels/ops/attention/flash_mla_interface.py imports flash_mla; "
            "its METADATA requires sgl-flash-mla==1.0.0 (sm_90a, sm_100a, sm_103a, sm_107a)"
        ),
    ),
    Library(
        key="deep_gemm.mqa_logits",
        title="DeepGEMM MQA-logits (DSA indexer)",
        packages=("sgl-deep-gemm", "sgl-kernel", "deep-gemm"),
        present=("deep_gemm/__init__.py",),
        jit_sources=(
            ("sm90", _DG_IMPLS + "sm90_*mqa_logits.cuh"),
            ("sm100", _DG_IMPLS + "sm100_*mqa_logits.cuh"),
            ("sm120", _DG_IMPLS + "sm120_*mqa_logits.cuh"),
        ),
        source=(
            "DSA indexer calls deep_gemm fp8_mqa_logits / fp8_paged_mqa_logits (sglang 0.5.23 "
            "srt/layers/attention/dsa/dsa_indexer.py); released DeepGEMM: arch 9/10 only -> "
            "'attention.hpp:219: Unsupported architecture' (#26087); SM120 sources from deepseek-ai/DeepGEMM "
            "PR #324 are in sgl-deep-gemm 0.2.3.post2 (impls/sm120_fp8_paged_mqa_logits.cuh), not in 0.1.4"
        ),
        note="JIT-compiled at first use (needs the CUDA compiler in the image)",
    ),
    Library(
        key="deep_gemm.gemm",
        title="DeepGEMM FP8 GEMM",
        packages=("sgl-deep-gemm", "sgl-kernel", "deep-gemm"),
        present=("deep_gemm/__init__.py",),
        jit_sources=(
            ("sm90", _DG_IMPLS + "sm90_fp8_gemm_1d*.cuh"),
            ("sm100", _DG_IMPLS + "sm100_fp8_*gemm_1d1d.cuh"),
            ("sm120", _DG_IMPLS + "sm120_fp8_*gemm_1d1d.cuh"),
        ),
        source="deep_gemm impls/ in the sgl-deep-gemm 0.1.4 and 0.2.3.post2 and sgl-kernel 0.3.21 wheels",
        note="JIT-compiled at first use",
    ),
    Library(
        key="flashinfer.attention",
        title="FlashInfer dense attention (FA2 templates, JIT)",
        packages=("flashinfer-python",),
        present=("flashinfer/__init__.py",),
        jit_sources=((ANY_FAMILY, _FI_CSRC + "batch_prefill.cu"), (ANY_FAMILY, _FI_CSRC + "batch_decode.cu")),
        source=(
            "FlashInfer attention on SM120 uses FA2/SM80-template kernels compiled at run time "
            "(flashinfer-ai/flashinfer#1147); sources under flashinfer/data/csrc (flashinfer-python 0.7.2)"
        ),
        note="prebuilt modules of flashinfer-jit-cache are not audited",
    ),
    Library(
        key="flashinfer.sparse_mla_sm120",
        title="FlashInfer SM120 sparse MLA",
        packages=("flashinfer-python",),
        present=("flashinfer/__init__.py",),
        jit_sources=(("sm120", _FI_CSRC + "sparse_mla_sm120/*.cu"),),
        source=(
            "flashinfer-ai/flashinfer PR #3395 (SM120 sparse MLA); used by flashinfer_sparse_mla, "
            "sglang PR #26928; sources in flashinfer/data/csrc/sparse_mla_sm120 (flashinfer-python 0.7.2)"
        ),
        note="SM12x only; JIT-compiled at first use",
    ),
    Library(
        key="flashinfer.trtllm_gen_fmha",
        title="FlashInfer TRT-LLM-gen FMHA cubins",
        packages=("flashinfer-cubin",),
        present=(_FI_CUBINS + "fmha/trtllm-gen/*.cubin",),
        binaries=(_FI_CUBINS + "fmha/trtllm-gen/*.cubin",),
        source=(
            "flashinfer-cubin 0.6.12: fmha/trtllm-gen cubins for sm_100a/sm_100f/sm_103a only; runner error "
            "'TllmGenFmhaRunner ... fmhaRunner.cuh:37: Unsupported architecture' "
            "(#37105, flashinfer-ai/flashinfer#3263)"
        ),
        note="without flashinfer-cubin these cubins are downloaded at first use and cannot be audited",
    ),
    Library(
        key="flashinfer.trtllm_gen_gemm",
        title="FlashInfer TRT-LLM-gen GEMM cubins",
        packages=("flashinfer-cubin",),
        present=(_FI_CUBINS + "batched_gemm-*/*.cubin", _FI_CUBINS + "gemm-*/*.cubin"),
        binaries=(_FI_CUBINS + "batched_gemm-*/*.cubin", _FI_CUBINS + "gemm-*/*.cubin"),
        source=(
            "flashinfer-cubin 0.6.12: batched_gemm/gemm cubins for sm_100f/sm_103a only; "
            "flashinfer_trtllm MoE is SM100-only (NVIDIA/nvidia-gcp-samples glm-5.2-nvfp4 README)"
        ),
        note="without flashinfer-cubin these cubins are downloaded at first use and cannot be audited",
    ),
    Library(
        key="flashinfer.cutlass_moe",
        title="FlashInfer CUTLASS fused MoE (JIT)",
        packages=("flashinfer-python",),
        present=("flashinfer/__init__.py",),
        jit_sources=((ANY_FAMILY, _FI_CSRC + "fused_moe/cutlass_backend/*.cu"),),
        source="flashinfer/jit/fused_moe.py: gen_cutlass_fused_moe_sm{89,90,100,103,120}_module (0.7.2)",
        note="JIT-compiled at first use",
    ),
    Library(
        key="flashinfer.fp4_gemm_cutlass",
        title="FlashInfer CUTLASS FP4 GEMM (JIT)",
        packages=("flashinfer-python",),
        present=("flashinfer/__init__.py",),
        jit_sources=(
            ("sm100", _FI_CSRC + "fp4_gemm_cutlass.cu"),
            ("sm120", _FI_CSRC + "fp4_gemm_cutlass_sm120.cu"),
        ),
        source="flashinfer/data/csrc/fp4_gemm_cutlass{,_sm103,_sm120}.cu (flashinfer-python 0.7.2 wheel)",
        note="JIT-compiled at first use; SM120 PDL race fixed by flashinfer-ai/flashinfer#2780",
    ),
    Library(
        key="sglang.sparse_mla_q8_sm90",
        title="SGLang FP8 sparse-MLA prefill (JIT, SM90)",
        packages=("sglang",),
        present=("sglang/__init__.py",),
        jit_sources=(("sm90", "sglang/kernels/ops/attention/sparse_mla_q8kv8_prefill_sm90.py"),),
        source="sglang 0.5.23 srt/layers/attention/dsa_backend.py: 'flashmla_sparse_q8 is SM90-only'",
    ),
    Library(
        key="triton",
        title="Triton (JIT)",
        packages=("triton",),
        present=("triton/__init__.py",),
        jit_sources=((ANY_FAMILY, "triton/backends/nvidia/compiler.py"),),
        source="Triton compiles each kernel for the GPU it runs on (triton/backends/nvidia/compiler.py)",
        note="needs a Triton whose bundled ptxas knows the target",
    ),
    Library(
        key="tilelang",
        title="TileLang (JIT)",
        packages=("tilelang",),
        present=("tilelang/__init__.py",),
        jit_sources=((ANY_FAMILY, "tilelang/__init__.py"),),
        source="TileLang compiles kernels at first use; SM120 shared-memory limits (#37105) do not show here",
    ),
)

_FLASHMLA = (("flash_mla", "sgl_kernel.flashmla_ops"),)
_FLASHMLA_SRC = "sm120-backends.md §2: FlashMLA is not built for SM120 (#37105, #39302)"
_DSA_SUB = "sglang srt/layers/attention/dsa_backend.py (0.5.23; nsa_backend.py in 0.5.9)"


def _dsa_sub_backends() -> tuple[BackendUse, ...]:
    """The DSA prefill/decode sub-backends; both fields take the same values."""
    table: tuple[tuple[str, tuple[tuple[str, ...], ...], str], ...] = (
        ("flashmla_sparse", _FLASHMLA, _FLASHMLA_SRC),
        ("flashmla_kv", _FLASHMLA, _FLASHMLA_SRC),
        ("flashmla_auto", _FLASHMLA, _FLASHMLA_SRC),
        ("flashmla_sparse_q8", (("sglang.sparse_mla_q8_sm90",),), "sglang 0.5.16+ dsa_backend.py"),
        ("fa3", (("sgl_kernel.flash_ops",),), "sgl_kernel.flash_attn imports in " + _DSA_SUB),
        ("trtllm", (("flashinfer.trtllm_gen_fmha",),), "flashinfer trtllm-gen MLA in " + _DSA_SUB),
        ("flashinfer_sparse_mla", (("flashinfer.sparse_mla_sm120",),), "PR #26928, flashinfer PR #3395"),
        ("tilelang", (("tilelang",),), "dsa/tilelang_kernel.py in " + _DSA_SUB),
        ("triton_sparse_mla", (("triton",),), "kernels/ops/attention/dsa/triton_sparse_mla*.py (0.5.23)"),
        ("triton", (("triton",),), "ROCm-only in 0.5.23 ('only supported on ROCm/HIP')"),
    )
    return tuple(
        BackendUse(field, value, needs, source)
        for field in vocabulary.DSA_SIDES
        for value, needs, source in table
    )


BACKENDS: tuple[BackendUse, ...] = (
    BackendUse("common", "torch", (("torch",),), "every SGLang server runs PyTorch CUDA kernels"),
    BackendUse(
        "common",
        "sgl_kernel",
        (("sgl_kernel.common_ops",),),
        "sglang imports sgl_kernel at start-up (all versions)",
    ),
    BackendUse(
        "attention_backend",
        "dsa",
        (("deep_gemm.mqa_logits",),),
        "every DSA backend runs the DeepGEMM indexer (#26087; sm120-backends.md §3)",
        note="the indexer; the attention kernel itself is the dsa_prefill/decode backend",
    ),
    BackendUse(
        "attention_backend",
        "flashinfer",
        (("flashinfer.attention",),),
        "srt/layers/attention/flashinfer_backend.py",
    ),
    BackendUse("attention_backend", "triton", (("triton",),), "srt/layers/attention/triton_backend.py"),
    BackendUse(
        "attention_backend",
        "fa3",
        (("sgl_kernel.flash_ops",),),
        "srt/layers/attention/flashattention_backend.py",
    ),
    BackendUse("attention_backend", "flashmla", _FLASHMLA, "srt/layers/attention/flashmla_backend.py"),
    BackendUse(
        "attention_backend", "trtllm_mla", (("flashinfer.trtllm_gen_fmha",),), "trtllm_mla_backend.py; #24633"
    ),
    BackendUse(
        "attention_backend",
        "trtllm_mha",
        (("flashinfer.trtllm_gen_fmha",),),
        "trtllm_mha_backend.py: 'TRTLLM MHA backend is only supported on Blackwell GPUs (SM100)'",
    ),
    *_dsa_sub_backends(),
    BackendUse("moe_runner_backend", "triton", (("triton",),), "srt/layers/moe (Triton fused MoE)"),
    BackendUse("moe_runner_backend", "deep_gemm", (("deep_gemm.gemm",),), "srt/layers/moe DeepGEMM runner"),
    BackendUse(
        "moe_runner_backend",
        "flashinfer_trtllm",
        (("flashinfer.trtllm_gen_gemm",),),
        "SM100-only (NVIDIA/nvidia-gcp-samples glm-5.2-nvfp4 README)",
    ),
    BackendUse(
        "moe_runner_backend",
        "flashinfer_cutlass",
        (("flashinfer.cutlass_moe",),),
        "the SM120 MoE recipe (sm120-backends.md §6B)",
    ),
    BackendUse(
        "fp4_gemm_backend", "flashinfer_cutlass", (("flashinfer.fp4_gemm_cutlass",),), "sm120-backends.md §6B"
    ),
    BackendUse(
        "fp4_gemm_backend", "flashinfer_trtllm", (("flashinfer.trtllm_gen_gemm",),), "flashinfer#2577"
    ),
    BackendUse(
        "fp4_gemm_backend", "cutlass", (("sgl_kernel.common_ops",),), "sgl_kernel nvfp4 GEMM (ENABLE_NVFP4)"
    ),
)

_BY_KEY = {lib.key: lib for lib in LIBRARIES}


def library(key: str) -> Library:
    """The library with this key; KeyError if there is none."""
    return _BY_KEY[key]


def lookup(field: str, value: str) -> BackendUse | None:
    """The table entry for a field/value (any spelling: ``nsa`` is ``dsa``), or None when the table does not
    know it."""
    wanted = vocabulary.canonical_value(field, value)
    return next((b for b in BACKENDS if b.field == field and b.value == wanted), None)


def backend_uses(field: str | None = None) -> tuple[BackendUse, ...]:
    """Every entry, or the entries of one field."""
    return tuple(b for b in BACKENDS if field is None or b.field == field)


def libraries_for(field: str, value: str) -> tuple[tuple[Library, ...], ...]:
    """The library groups a field/value needs (each group: alternatives); () when unknown."""
    use = lookup(field, value)
    if use is None:
        return ()
    return tuple(tuple(library(key) for key in group) for group in use.needs)


def family_of(device: tuple[int, int]) -> str:
    """The JIT-source family of a compute capability: (12, 0) and (12, 1) → ``sm120``, (10, 3) → ``sm100``."""
    return f"sm{device[0] * 10}"
