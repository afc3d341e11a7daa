"""The one vocabulary between bwstack and SGLang; stdlib only (runs in the image and in the stand-in too).

Profiles speak in semantic fields (``dsa_decode_backend: flashmla_kv``). SGLang spells them per version: the
flags (``--nsa-decode-backend`` up to 0.5.12, ``--dsa-decode-backend`` from 0.5.15), the ServerArgs fields and
``/server_info`` keys (``nsa_decode_backend`` / ``dsa_decode_backend``, ``fp4_gemm_runner_backend``) and some
values (``nsa`` for ``dsa``, ``bf16`` for ``bfloat16``). This module is the one home of those names and of the
facts about SGLang that several rooms share:

* the semantic backend fields (:data:`BACKEND_FIELDS`; the profile model's backend fields are built from it),
  their flags (:data:`SEMANTIC_FLAGS`) and labels (:data:`FIELD_LABELS`);
* value spellings and aliases (:data:`FIELD_VALUE_ALIASES`, :func:`canonical_value`, :func:`same_value`,
  :data:`VALUE_SPELLINGS`) and the ``/server_info`` key aliases (:data:`KEY_ALIASES`);
* the GPU archs bwstack knows (:data:`ARCHS`: compute capability and the device name torch reports);
* the architectures SGLang runs as DSA models (:data:`DSA_ARCHS_SINCE`) and its DSA prefill/decode defaults
  per release (:data:`DSA_DEFAULTS`, :func:`dsa_default`), each row citing the wheel it was read in.

It lives outside ``src/`` because the in-container healthcheck (``warmup.py``, ``startup.py``) and the CPU
stand-in need it and may import nothing but the stdlib; everything else imports it from here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

Version = tuple[int, ...]

# --- semantic fields, flags, labels ------------------------------------------------------------------------

#: semantic profile field -> candidate flags, preferred first (first one the snapshot has, not deprecated)
SEMANTIC_FLAGS: dict[str, tuple[str, ...]] = {
    "attention_backend": ("--attention-backend",),
    "dsa_prefill_backend": ("--dsa-prefill-backend", "--nsa-prefill-backend"),
    "dsa_decode_backend": ("--dsa-decode-backend", "--nsa-decode-backend"),
    "kv_cache_dtype": ("--kv-cache-dtype",),
    "moe_runner_backend": ("--moe-runner-backend",),
    "fp4_gemm_backend": ("--fp4-gemm-backend",),
}

#: the semantic backend fields of a profile, in profile order
BACKEND_FIELDS: tuple[str, ...] = tuple(SEMANTIC_FLAGS)

#: the two DSA sub-backend fields (prefill side, decode side)
DSA_SIDES: tuple[str, str] = ("dsa_prefill_backend", "dsa_decode_backend")

#: the backend fields that pick kernels (every one but the KV cache dtype)
KERNEL_FIELDS: tuple[str, ...] = tuple(f for f in BACKEND_FIELDS if f != "kv_cache_dtype")

#: how ``bwstack explain`` names each backend field
FIELD_LABELS: dict[str, str] = {
    "attention_backend": "attention backend",
    "dsa_prefill_backend": "DSA prefill backend",
    "dsa_decode_backend": "DSA decode backend",
    "kv_cache_dtype": "KV cache dtype",
    "moe_runner_backend": "MoE runner",
    "fp4_gemm_backend": "FP4 GEMM backend",
}

#: the tensor-parallel flag and its alias (same in every supported version); ``--tp`` works by argparse prefix
TP_FLAGS: tuple[str, ...] = ("--tp-size", "--tensor-parallel-size")

#: the fields a backend report is about: every semantic backend field, then the TP size
REPORT_FIELDS: tuple[str, ...] = (*BACKEND_FIELDS, "tp_size")

# --- names SGLang reports fields under ---------------------------------------------------------------------

#: field (semantic or SGLang's) -> the names SGLang reports it under (ServerArgs field, /server_info key)
KEY_ALIASES: dict[str, tuple[str, ...]] = {
    "dsa_prefill_backend": ("dsa_prefill_backend", "nsa_prefill_backend"),
    "nsa_prefill_backend": ("nsa_prefill_backend", "dsa_prefill_backend"),
    "dsa_decode_backend": ("dsa_decode_backend", "nsa_decode_backend"),
    "nsa_decode_backend": ("nsa_decode_backend", "dsa_decode_backend"),
    "fp4_gemm_backend": ("fp4_gemm_runner_backend", "fp4_gemm_backend"),
    "fp4_gemm_runner_backend": ("fp4_gemm_runner_backend", "fp4_gemm_backend"),
}

# --- value spellings ---------------------------------------------------------------------------------------

#: values SGLang renamed between releases: field -> {old spelling: semantic value}. A flag gets the spelling
#: its version's parser accepts (0.5.9-0.5.12 know only ``nsa``; 0.5.15+ take ``dsa``, ``nsa`` as an alias)
RENAMED_VALUES: dict[str, dict[str, str]] = {"attention_backend": {"nsa": "dsa"}}

#: spellings every release accepts side by side for one value: field -> {spelling: semantic value}
#: (SGLang normalises ``bf16`` to ``bfloat16`` while resolving, 0.5.9 through 0.5.23)
SYNONYM_VALUES: dict[str, dict[str, str]] = {"kv_cache_dtype": {"bf16": "bfloat16"}}

#: field -> {spelling: semantic value}, every alias SGLang has for a value (design.md backend table)
FIELD_VALUE_ALIASES: dict[str, dict[str, str]] = {
    name: {**RENAMED_VALUES.get(name, {}), **SYNONYM_VALUES.get(name, {})}
    for name in (*RENAMED_VALUES, *SYNONYM_VALUES)
}

#: the same, whatever the field: spelling -> semantic value
VALUE_ALIASES: dict[str, str] = {
    spelling: value for aliases in FIELD_VALUE_ALIASES.values() for spelling, value in aliases.items()
}

#: renamed values: field -> {value or old spelling: the spellings to try on a flag, semantic one first}
VALUE_SPELLINGS: dict[str, dict[str, tuple[str, ...]]] = {
    name: {
        spelling: (value, *(old for old, new in renamed.items() if new == value))
        for old, value in renamed.items()
        for spelling in (value, old)
    }
    for name, renamed in RENAMED_VALUES.items()
}


def canonical_value(field: str, value: str) -> str:
    """The semantic spelling of one field's value (``nsa`` -> ``dsa`` for ``attention_backend``)."""
    return FIELD_VALUE_ALIASES.get(field, {}).get(value, value)


def same_value(field: str, one: str, other: str) -> bool:
    """True when two spellings of a field's value mean the same to SGLang (``bf16`` and ``bfloat16``)."""
    return canonical_value(field, one) == canonical_value(field, other)


def spellings(field: str, value: str) -> tuple[str, ...]:
    """Every spelling of a field's value, semantic one first (``dsa`` -> ``("dsa", "nsa")``)."""
    return VALUE_SPELLINGS.get(field, {}).get(value, (value,))


def semantic_value(value: Any) -> str:
    """A value in profile vocabulary: lower case, ``nsa`` -> ``dsa``, ``bf16`` -> ``bfloat16``."""
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif value is None:
        text = "none"
    else:
        text = str(value).strip().lower()
    return VALUE_ALIASES.get(text, text)


def field_for_name(name: str) -> str | None:
    """The semantic field a ServerArgs field or /server_info key stands for (``nsa_decode_backend`` ->
    ``dsa_decode_backend``), or None when it is none of :data:`REPORT_FIELDS`."""
    for field in REPORT_FIELDS:
        if name == field or name in KEY_ALIASES.get(field, ()):
            return field
    return None


def field_for_flag(flag: str) -> str | None:
    """The semantic field a command-line flag sets (``--nsa-decode-backend`` -> ``dsa_decode_backend``)."""
    for field, flags in (*SEMANTIC_FLAGS.items(), ("tp_size", TP_FLAGS)):
        if flag in flags:
            return field
    if flag == "--tp":  # argparse prefix of --tp-size, common in pasted commands
        return "tp_size"
    return None


# --- GPU archs ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Arch:
    """A GPU arch bwstack knows: what ``torch.cuda.get_device_capability()`` and ``get_device_name()`` say."""

    capability: tuple[int, int]
    device_name: str
    #: parts of this arch's product names (as nvidia-smi prints them), for drivers whose compute_cap is [N/A]
    products: tuple[str, ...] = ()


#: every arch bwstack knows (a profile may name each), in capability order
ARCHS: dict[str, Arch] = {
    "sm90": Arch((9, 0), "NVIDIA H200", ("H200", "H100")),
    "sm100": Arch((10, 0), "NVIDIA B200", ("B200",)),
    "sm103": Arch((10, 3), "NVIDIA B300", ("B300",)),
    "sm120": Arch(
        (12, 0), "NVIDIA RTX PRO 6000 Blackwell Workstation Edition", ("RTX PRO 6000 Blackwell", "RTX 5090")
    ),
    "sm121": Arch((12, 1), "NVIDIA GB10", ("GB10",)),
}
ARCH_CAPABILITY: dict[str, tuple[int, int]] = {name: arch.capability for name, arch in ARCHS.items()}
DEVICE_NAMES: dict[str, str] = {name: arch.device_name for name, arch in ARCHS.items()}


def product_capability(product: str) -> tuple[int, int] | None:
    """A GPU's compute capability from its product name (``NVIDIA RTX PRO 6000 Blackwell …``), if known."""
    lowered = product.lower()
    for arch in ARCHS.values():
        if any(part.lower() in lowered for part in arch.products):
            return arch.capability
    return None


#: the archs in the order profiles.yaml offers them (newest family first: sm120, sm121, sm100, sm103, sm90)
PROFILE_ARCHES: tuple[str, ...] = tuple(
    sorted(ARCHS, key=lambda name: (-ARCHS[name].capability[0], ARCHS[name].capability[1]))
)


def archs_with_major(majors: frozenset[int]) -> tuple[str, ...]:
    """The known archs whose compute-capability major is one of ``majors``, in :data:`ARCHS` order."""
    return tuple(name for name, arch in ARCHS.items() if arch.capability[0] in majors)


# --- DSA models and SGLang's DSA defaults ------------------------------------------------------------------

#: architectures whose config (with ``index_topk``) SGLang treats as DSA, by the release that added them
#: (``is_deepseek_nsa`` / ``is_deepseek_dsa`` in srt/configs/model_config.py: 0.5.9 wheel L54, 0.5.12 L102,
#: 0.5.17 L106, 0.5.23 L191-212; 0.5.9 loads a ``deepseek_v32`` config as DeepseekV3ForCausalLM,
#: hf_transformers_utils.py L178-205)
DSA_ARCHS_SINCE: tuple[tuple[Version, frozenset[str]], ...] = (
    (
        (0, 5, 9),
        frozenset(
            {
                "DeepseekV3ForCausalLM",
                "DeepseekV32ForCausalLM",
                "DeepseekV3ForCausalLMNextN",
                "MistralLarge3ForCausalLM",
                "PixtralForConditionalGeneration",
                "GlmMoeDsaForCausalLM",
            }
        ),
    ),
    (
        (0, 5, 17),
        frozenset({"GlmMoeDsaForCausalLMNextN", "LongcatFlashForCausalLM", "LongcatFlashForCausalLMNextN"}),
    ),
    (
        (0, 5, 23),
        frozenset(
            {
                "Glm5NextForConditionalGeneration",
                "Glm5NextForConditionalGenerationNextN",
                "Dots3NoteForCausalLM",
                "Dots3NoteForCausalLMNextN",
                "HYV4ForCausalLM",
                "HYV4ForCausalLMNextN",
            }
        ),
    ),
)
#: every architecture some supported release treats as DSA
DSA_ARCHS: frozenset[str] = frozenset().union(*(archs for _since, archs in DSA_ARCHS_SINCE))


def dsa_archs(version: Version | None) -> frozenset[str]:
    """The DSA architectures of one SGLang release (all of them when the version is unknown)."""
    if version is None:
        return DSA_ARCHS
    return frozenset().union(*(archs for since, archs in DSA_ARCHS_SINCE if version >= since))


@dataclass(frozen=True)
class DsaDefault:
    """One row of SGLang's DSA prefill/decode defaults for sides a user leaves unset (first match wins)."""

    first: Version  # first SGLang release the row holds for
    last: Version | None  # last release it holds for (None: still true in the newest wheel read)
    kv: str  # resolved KV cache dtype: "fp8_e4m3" or "bfloat16"
    majors: frozenset[int]  # compute-capability majors (torch.cuda.get_device_capability()[0])
    model_arch: str | None  # only for this config architecture (None: every DSA model)
    prefill: str
    decode: str
    evidence: tuple[str, ...]  # "read in sglang <version> wheel <path>:<lines>", one per wheel read
    overrides_user: bool = False  # the default replaces a user-set prefill/decode backend (0.5.10 bug)
    glm_sm12_log: bool = False  # logs "Set DSA backends for GLM FP8 KV Cache on SM120/SM121: ..."

    def holds_for(self, version: Version) -> bool:
        return self.first <= version[:3] and (self.last is None or version[:3] <= self.last)


#: compute-capability majors of Hopper and of Blackwell (SGLang's ``is_blackwell_supported``: 10, 11, 12)
HOPPER_MAJORS = frozenset({9})
BLACKWELL_MAJORS = frozenset({10, 11, 12})
_SM12X = frozenset({12})
_SERVER_ARGS = "sglang/srt/server_args.py"
_OVERRIDES = "sglang/srt/arg_groups/overrides.py"

#: SGLang's DSA prefill/decode defaults: ``ServerArgs._set_default_nsa_backends`` (0.5.9-0.5.12;
#: ``_set_default_dsa_backends`` in 0.5.13/0.5.14) and ``_dsa_split_backend_resolution`` in
#: ``srt/arg_groups/overrides.py`` (0.5.15+). From 0.5.11 every wheel read picks trtllm/trtllm for an FP8 KV
#: cache on compute major >= 10, SM120 included (0.5.12 wheel server_args.py L1721-1726: ``elif
#: kv_cache_dtype == "fp8_e4m3": if major >= 10: ... = "trtllm"``); GLM on SM12x gets flashinfer_sparse_mla
#: from 0.5.17. No row names a major below 9: SGLang's non-Blackwell branch gives those the Hopper values
#: (the stand-in asks for major 9 then); the rules leave them unknown.
DSA_DEFAULTS: tuple[DsaDefault, ...] = (
    DsaDefault(
        (0, 5, 9), (0, 5, 9), "fp8_e4m3", HOPPER_MAJORS | BLACKWELL_MAJORS, None,
        "flashmla_auto", "flashmla_kv",
        (f"read in sglang 0.5.9 wheel {_SERVER_ARGS}:1158-1163",),
    ),
    DsaDefault(
        (0, 5, 10), (0, 5, 10), "fp8_e4m3", BLACKWELL_MAJORS, None, "trtllm", "trtllm",
        (f"read in sglang 0.5.10 wheel {_SERVER_ARGS}:1464-1467",), overrides_user=True,
    ),
    DsaDefault(
        (0, 5, 10), (0, 5, 10), "fp8_e4m3", HOPPER_MAJORS, None, "flashmla_auto", "flashmla_kv",
        (f"read in sglang 0.5.10 wheel {_SERVER_ARGS}:1468-1473",),
    ),
    DsaDefault(
        (0, 5, 17), None, "fp8_e4m3", _SM12X, "GlmMoeDsaForCausalLM", "flashinfer_sparse_mla",
        "flashinfer_sparse_mla",
        (
            f"read in sglang 0.5.17 wheel {_OVERRIDES}:1600-1617",
            f"read in sglang 0.5.23 wheel {_OVERRIDES}:637-675",
        ),
        glm_sm12_log=True,
    ),
    DsaDefault(
        (0, 5, 11), None, "fp8_e4m3", BLACKWELL_MAJORS, None, "trtllm", "trtllm",
        (
            f"read in sglang 0.5.11 wheel {_SERVER_ARGS}:1617-1622",
            f"read in sglang 0.5.12 wheel {_SERVER_ARGS}:1721-1726",
            f"read in sglang 0.5.13 wheel {_SERVER_ARGS}:1772-1777",
            f"read in sglang 0.5.14 wheel {_SERVER_ARGS}:3447-3452",
            f"read in sglang 0.5.15 wheel {_OVERRIDES}:1141-1147",
            f"read in sglang 0.5.17 wheel {_OVERRIDES}:1638-1644",
            f"read in sglang 0.5.23 wheel {_OVERRIDES}:714-720",
        ),
    ),
    DsaDefault(
        (0, 5, 11), None, "fp8_e4m3", HOPPER_MAJORS, None, "flashmla_kv", "flashmla_kv",
        (
            f"read in sglang 0.5.11 wheel {_SERVER_ARGS}:1623-1628",
            f"read in sglang 0.5.12 wheel {_SERVER_ARGS}:1727-1732",
            f"read in sglang 0.5.15 wheel {_OVERRIDES}:1141-1147",
            f"read in sglang 0.5.17 wheel {_OVERRIDES}:1638-1644",
            f"read in sglang 0.5.23 wheel {_OVERRIDES}:714-720",
        ),
    ),
    DsaDefault(
        (0, 5, 9), None, "bfloat16", BLACKWELL_MAJORS, None, "flashmla_sparse", "trtllm",
        (
            f"read in sglang 0.5.9 wheel {_SERVER_ARGS}:1164-1170",
            f"read in sglang 0.5.12 wheel {_SERVER_ARGS}:1733-1739",
            f"read in sglang 0.5.15 wheel {_OVERRIDES}:1148-1153",
            f"read in sglang 0.5.23 wheel {_OVERRIDES}:721-726",
        ),
    ),
    DsaDefault(
        (0, 5, 9), None, "bfloat16", HOPPER_MAJORS, None, "flashmla_sparse", "fa3",
        (
            f"read in sglang 0.5.9 wheel {_SERVER_ARGS}:1171-1176",
            f"read in sglang 0.5.12 wheel {_SERVER_ARGS}:1740-1745",
            f"read in sglang 0.5.15 wheel {_OVERRIDES}:1148-1153",
            f"read in sglang 0.5.23 wheel {_OVERRIDES}:721-726",
        ),
    ),
)  # fmt: skip


def dsa_default(version: Version, kv: str, major: int, model_arch: str) -> DsaDefault | None:
    """The first :data:`DSA_DEFAULTS` row for this SGLang release, KV dtype, compute major and model, if any
    (None before 0.5.9 and for a major no row names)."""
    for row in DSA_DEFAULTS:
        if not row.holds_for(version) or kv != row.kv or major not in row.majors:
            continue
        if row.model_arch is not None and model_arch != row.model_arch:
            continue
        return row
    return None
