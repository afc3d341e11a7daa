"""Backend auto-resolution for DSA models (GLM-5, DeepSeek-V3.2), the way each SGLang version does it.

SGLang fills unset backends in ``ServerArgs`` (0.5.9-0.5.12: ``_handle_model_specific_adjustments``,
``_set_default_nsa_kv_cache_dtype``, ``_set_default_nsa_backends``; 0.5.15+: ``srt/arg_groups/overrides.py``
``_dsa_kv_cache_dtype_default`` / ``_dsa_split_backend_resolution`` and ``model_overrides/deepseek_v2.py``).
Its DSA prefill/decode defaults and DSA architectures come from their one table,
:mod:`healthchecks.vocabulary` (every row names the wheel it was read in; the rules read the same table).
The stand-in reports the result in ``/server_info`` and logs SGLang's own lines, so the checks that compare
requested and effective backends see what the real server would show.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from bwstack.standin.models import ModelInfo
from healthchecks import vocabulary

Version = vocabulary.Version

#: the oldest and newest SGLang whose wheel this module was checked against; others use the nearest rows
OLDEST_CHECKED: Version = (0, 5, 9)
NEWEST_CHECKED: Version = (0, 5, 23)


#: the DSA prefill/decode pairs the GLM SM12x FP8 path accepts (kernels/ops/attention/flash_mla_sm120.py
#: ``_validate_flashinfer_sparse_mla_backend``: 0.5.17 flashinfer_sparse_mla only; 0.5.23 + triton_sparse_mla)
GLM_SM12_FP8_ALLOWED_SINCE: tuple[tuple[Version, frozenset[str]], ...] = (
    ((0, 5, 17), frozenset({"flashinfer_sparse_mla"})),
    ((0, 5, 23), frozenset({"flashinfer_sparse_mla", "triton_sparse_mla"})),
)

#: quantizations that make SM100 switch the DeepSeek-family MoE runner to flashinfer_trtllm
#: (0.5.9 wheel srt/server_args.py L1302-1310; 0.5.23 wheel overrides.py L809-830 adds modelopt_mixed, None)
MOE_TRTLLM_QUANTS_0_5_9 = frozenset({"fp8", "modelopt_fp8", "modelopt_fp4"})
MOE_TRTLLM_QUANTS_0_5_23 = MOE_TRTLLM_QUANTS_0_5_9 | {"modelopt_mixed", None}


class ResolutionError(Exception):
    """SGLang refuses the configuration while resolving ``ServerArgs`` (it dies with a Python traceback)."""

    def __init__(self, exc_type: str, message: str) -> None:
        super().__init__(message)
        self.exc_type = exc_type
        self.message = message


@dataclass(frozen=True)
class LogLine:
    """One line SGLang logs while resolving (level as in ``logging``: INFO or WARNING)."""

    level: str
    text: str


@dataclass
class Resolution:
    """Field updates SGLang would make to the parsed ``ServerArgs``, and the lines it logs meanwhile."""

    updates: dict[str, Any] = field(default_factory=dict)
    lines: list[LogLine] = field(default_factory=list)
    is_dsa: bool = False

    def info(self, text: str) -> None:
        self.lines.append(LogLine("INFO", text))

    def warning(self, text: str) -> None:
        self.lines.append(LogLine("WARNING", text))


@dataclass(frozen=True)
class Target:
    """What the resolution depends on besides the arguments."""

    version: Version
    capability: tuple[int, int]
    model: ModelInfo
    attention_values: tuple[str, ...] = ()  # choices of --attention-backend (decides "nsa" vs "dsa")
    env: Mapping[str, str] = field(default_factory=dict)
    override_decode: bool = False  # the stand-in's "override" fault


def clamp(version: Version | None) -> Version:
    """The checked version to imitate: unknown -> the newest checked, older than 0.5.9 -> 0.5.9."""
    if version is None:
        return NEWEST_CHECKED
    return max(version[:3], OLDEST_CHECKED)


def dsa_word(version: Version) -> str:
    """``NSA`` in log lines up to 0.5.12 (0.5.9/0.5.10/0.5.12 wheels), ``DSA`` from 0.5.15 (0.5.15+)."""
    return "NSA" if version <= (0, 5, 12) else "DSA"


def dsa_default(version: Version, kv: str, major: int, arch: str) -> vocabulary.DsaDefault:
    """The vocabulary's DSA default for this version, KV dtype, arch major and model."""
    row = vocabulary.dsa_default(version, kv, major, arch)
    if row is not None:
        return row
    # an arch outside every row (e.g. SM80): SGLang's non-Blackwell branch, i.e. the Hopper rows
    return dsa_default(version, kv, 9, arch) if major != 9 else vocabulary.DSA_DEFAULTS[-1]


def is_dsa_model(model: ModelInfo, version: Version | None = None) -> bool:
    """True when SGLang (``version``, or any supported one) would run this model with the DSA machinery."""
    return model.architecture in vocabulary.dsa_archs(version) and model.index_topk is not None


def resolve(args: Mapping[str, Any], target: Target) -> Resolution:
    """The ``ServerArgs`` SGLang would end up with for a DSA model (MoE rule included)."""
    result = Resolution()
    version = clamp(target.version)
    if is_dsa_model(target.model, version):
        result.is_dsa = True
        _resolve_dsa(args, target, version, result)
    _resolve_moe(args, target, version, result)
    return result


def _resolve_dsa(args: Mapping[str, Any], target: Target, version: Version, result: Resolution) -> None:
    major = target.capability[0]
    word = dsa_word(version)
    prefix = "nsa" if "nsa_decode_backend" in args and "dsa_decode_backend" not in args else "dsa"
    _log_prefill_threshold(target, version, result)
    if all(
        args.get(k) is None
        for k in ("attention_backend", "prefill_attention_backend", "decode_attention_backend")
    ):
        value = "dsa" if "dsa" in target.attention_values else "nsa"
        if not target.attention_values:
            value = word.lower()
        result.updates["attention_backend"] = value
        result.info(f"Use {value} attention backend for DeepSeek with DSA.")
    _log_tp_mode(args, version, result)
    result.updates["page_size"] = 64
    result.warning("Setting page size to 64 for DeepSeek DSA.")
    kv = _resolve_kv(args, prefix, major, word, result)
    _resolve_dsa_backends(args, target, version, prefix=prefix, kv=kv, result=result)


def _log_prefill_threshold(target: Target, version: Version, result: Resolution) -> None:
    blackwell = target.capability[0] in vocabulary.BLACKWELL_MAJORS
    glm_blackwell = target.model.architecture == "GlmMoeDsaForCausalLM" and blackwell
    if version <= (0, 5, 9):
        if glm_blackwell:  # 0.5.9 wheel srt/server_args.py L1206-1210
            result.warning(
                "Force NSA prefill to use MLA (i.e. disable MHA_ONE_SHOT) for GlmMoeDsaForCausalLM "
                "on Blackwell."
            )
        return
    if version <= (0, 5, 12) and glm_blackwell:  # 0.5.10 wheel L1516-1520, 0.5.12 wheel L1799
        result.warning(
            "Force NSA prefill to use sparse MLA (i.e. disable MHA_ONE_SHOT) for GlmMoeDsaForCausalLM "
            "on Blackwell."
        )
        return
    env_name = "SGLANG_NSA_PREFILL_DENSE_ATTN_KV_LEN_THRESHOLD"
    if version > (0, 5, 12):
        env_name = "SGLANG_DSA_PREFILL_DENSE_ATTN_KV_LEN_THRESHOLD"
    manual = target.env.get(env_name)
    if manual:  # 0.5.10 wheel L1522-1525; 0.5.23 wheel srt/arg_groups/model_hook.py L282-285
        result.warning(
            f"Dense attention kv len threshold is manually set to {manual} for DSA. Caution: This may cause "
            "performance regression if the threshold is larger than the index topk of model."
        )
        return
    result.warning(  # 0.5.10 wheel L1534; 0.5.23 wheel model_hook.py L294
        f"Set dense attention kv len threshold to model index_topk={target.model.index_topk} "
        "for DeepSeek with DSA."
    )


def _log_tp_mode(args: Mapping[str, Any], version: Version, result: Resolution) -> None:
    tp = int(args.get("tp_size") or 1)
    if version < (0, 5, 23):  # 0.5.9-0.5.17 wheels: warn when dp_size < tp_size
        dp = int(args.get("dp_size") or 1)
        if dp < tp:
            result.warning(
                f"DSA with TP mode is active, dp_size={dp}, tp_size={tp}, "
                f"attn_tp_size={tp}, attention weights will be sharded across {tp} ranks."
            )
        return
    attn_dp = int(args.get("attn_dp_size") or 1)  # 0.5.23 wheel srt/arg_groups/model_hook.py L324-334
    attn_cp = int(args.get("attn_cp_size") or 1)
    attn_tp = max(tp // max(attn_dp * attn_cp, 1), 1)
    if attn_tp > 1:
        result.warning(
            f"DSA with TP mode is active, attn_dp_size={attn_dp}, tp_size={tp}, "
            f"attn_tp_size={attn_tp}, attention weights will be sharded across {attn_tp} ranks."
        )


def _resolve_kv(args: Mapping[str, Any], prefix: str, major: int, word: str, result: Resolution) -> str:
    """KV dtype: auto -> fp8_e4m3 on major >= 10 (SM120 too) else bfloat16; bf16 -> bfloat16 (all)."""
    kv = str(args.get("kv_cache_dtype") or "auto")
    user_set = (
        args.get(f"{prefix}_prefill_backend") is not None or args.get(f"{prefix}_decode_backend") is not None
    )
    if user_set and kv == "auto":
        flag = word.lower()
        result.warning(
            f"When specifying --{flag}-prefill-backend or --{flag}-decode-backend, "
            "you should also explicitly set --kv-cache-dtype (e.g., 'fp8_e4m3' or 'bfloat16'). "
            "DeepSeek V3.2 defaults to FP8 KV cache which may not be compatible with all backends."
        )
    if kv == "auto":
        kv = "fp8_e4m3" if major >= 10 else "bfloat16"
        result.warning(f"Setting KV cache dtype to {kv} for DeepSeek DSA on SM{major} device.")
    if kv == "bf16":
        kv = "bfloat16"
    if kv not in ("bfloat16", "fp8_e4m3"):
        raise ResolutionError(
            "AssertionError", "DeepSeek DSA only supports bf16/bfloat16 or fp8_e4m3 kv_cache_dtype"
        )
    result.updates["kv_cache_dtype"] = kv
    return kv


def _resolve_dsa_backends(
    args: Mapping[str, Any], target: Target, version: Version, *, prefix: str, kv: str, result: Resolution
) -> None:
    prefill_key, decode_key = f"{prefix}_prefill_backend", f"{prefix}_decode_backend"
    user_prefill, user_decode = args.get(prefill_key), args.get(decode_key)
    row = dsa_default(version, kv, target.capability[0], target.model.architecture)
    prefill = row.prefill if user_prefill is None or row.overrides_user else str(user_prefill)
    decode = row.decode if user_decode is None or row.overrides_user else str(user_decode)
    if target.override_decode:
        decode = override_value(str(user_decode) if user_decode is not None else decode)
    if version >= (0, 5, 23):
        _check_dsa_constraints(kv, prefill, decode)
    result.updates[prefill_key] = prefill
    result.updates[decode_key] = decode
    word = dsa_word(version)
    if row.glm_sm12_log and not target.override_decode:
        # the real line names flashinfer_sparse_mla even when a user flag kept another backend
        result.warning(
            f"Set {word} backends for GLM FP8 KV Cache on SM120/SM121: "
            f"prefill={row.prefill}, decode={row.decode}."
        )
    else:
        result.warning(f"Set {word} backends for {kv} KV Cache: prefill={prefill}, decode={decode}.")


def override_value(requested: str) -> str:
    """The decode backend the "override" fault runs instead of the requested one (trtllm, like 0.5.10)."""
    return "trtllm" if requested != "trtllm" else "flashmla_kv"


def _check_dsa_constraints(kv: str, prefill: str, decode: str) -> None:
    """0.5.23 wheel srt/arg_groups/overrides.py ``_check_dsa_backend_constraints`` (CUDA only)."""
    chosen = {prefill, decode}
    if "triton" in chosen:
        raise ResolutionError(
            "ValueError",
            "The triton DSA backend is only supported on ROCm/HIP. Pick an alternative DSA backend for CUDA "
            "(flashmla_kv on Hopper, trtllm on Blackwell).",
        )
    if kv == "fp8_e4m3" and "tilelang" in chosen and (prefill != "tilelang" or decode != "tilelang"):
        raise ResolutionError(
            "ValueError",
            "CUDA TileLang FP8 KV requires both DSA backends to be tilelang; "
            "raw and scaled FP8 KV layouts cannot be mixed.",
        )


def glm_sm12_rejection(version: Version, args: Mapping[str, Any], target: Target) -> str | None:
    """The ValueError text SGLang >= 0.5.17 raises while building the DSA attention backend, if any.

    ``_validate_flashinfer_sparse_mla_backend`` (kernels/ops/attention/flash_mla_sm120.py; 0.5.17 L584-599,
    0.5.23 L694-713) runs when the attention backend is nsa/dsa.
    """
    version = clamp(version)
    allowed = None
    for since, backends in GLM_SM12_FP8_ALLOWED_SINCE:
        if version >= since:
            allowed = backends
    if allowed is None or args.get("attention_backend") not in vocabulary.spellings(
        "attention_backend", "dsa"
    ):
        return None
    prefix = "dsa" if "dsa_decode_backend" in args else "nsa"
    prefill, decode = str(args.get(f"{prefix}_prefill_backend")), str(args.get(f"{prefix}_decode_backend"))
    major = target.capability[0]
    glm = target.model.architecture in ("GlmMoeDsaForCausalLM", "GlmMoeDsaForCausalLMNextN")
    glm_sm12_fp8 = glm and major == 12 and args.get("kv_cache_dtype") == "fp8_e4m3"
    kv_dtype = "torch.float8_e4m3fn" if args.get("kv_cache_dtype") == "fp8_e4m3" else "torch.bfloat16"
    if "flashinfer_sparse_mla" in (prefill, decode) and not glm_sm12_fp8:
        return (
            "flashinfer_sparse_mla supports only GLM DSA with FP8 KV cache on NVIDIA SM120/SM121; "
            f"got model_arch={target.model.architecture!r}, sm_major={major}, kv_cache_dtype={kv_dtype}, "
            f"prefill_impl={prefill!r}, decode_impl={decode!r}."
        )
    unsupported = sorted({prefill, decode} - allowed) if glm_sm12_fp8 else []
    if not unsupported:
        return None
    if version >= (0, 5, 23):
        return (
            "GLM DSA with FP8 KV cache on NVIDIA SM120/SM121 supports only flashinfer_sparse_mla (default) "
            f"or triton_sparse_mla (prefill), but got {unsupported}."
        )
    return (
        "GLM DSA with FP8 KV cache on NVIDIA SM120/SM121 supports only flashinfer_sparse_mla, "
        f"but got {unsupported}."
    )


def _resolve_moe(args: Mapping[str, Any], target: Target, version: Version, result: Resolution) -> None:
    """MoE runner: only SM100 (major == 10) switches ``auto`` to flashinfer_trtllm; SM120 stays ``auto``."""
    family = (
        target.model.architecture in vocabulary.dsa_archs(version)
        or target.model.architecture == "KimiK25ForConditionalGeneration"
    )
    if not family or target.capability[0] != 10:
        return
    quantization = args.get("quantization")
    if quantization is None and target.model.quant_method is not None:
        quantization = target.model.quant_method
        result.updates["quantization"] = quantization
    elif (
        quantization is None
        and version < (0, 5, 23)
        and _loaded_arch(target.model, version) == "DeepseekV3ForCausalLM"
    ):
        # 0.5.9 wheel srt/server_args.py L1288-1299 (0.5.23 checks the checkpoint's weights instead)
        quantization = "fp8"
        result.updates["quantization"] = quantization
        result.info("Quantization not specified, default to fp8 for DeepSeek on sm100")
    allowed = MOE_TRTLLM_QUANTS_0_5_23 if version >= (0, 5, 23) else MOE_TRTLLM_QUANTS_0_5_9
    a2a = args.get("moe_a2a_backend", "none")
    if args.get("moe_runner_backend", "auto") == "auto" and a2a in ("none", None) and quantization in allowed:
        result.updates["moe_runner_backend"] = "flashinfer_trtllm"
        result.info("Use flashinfer_trtllm as MoE runner backend on sm100 for DeepseekV3ForCausalLM")


def _loaded_arch(model: ModelInfo, version: Version) -> str:
    """The architecture SGLang sees: 0.5.9 (transformers 4.57.1) loads a ``deepseek_v32`` config as
    DeepseekV3ForCausalLM (srt/utils/hf_transformers_utils.py ``_load_deepseek_v32_model``, 0.5.9 wheel)."""
    if version <= (0, 5, 9) and model.architecture == "DeepseekV32ForCausalLM":
        return "DeepseekV3ForCausalLM"
    return model.architecture
