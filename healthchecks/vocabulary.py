"""The one vocabulary between bwstack profiles and SGLang's own names; stdlib only (runs in the image too).

Profiles speak in semantic fields (``dsa_decode_backend: flashmla_kv``). SGLang spells them per version: the
flags (``--nsa-decode-backend`` up to 0.5.12, ``--dsa-decode-backend`` from 0.5.15), the ServerArgs fields and
``/server_info`` keys (``nsa_decode_backend`` / ``dsa_decode_backend``, ``fp4_gemm_runner_backend``) and some
values (``nsa`` for ``dsa``, ``bf16`` for ``bfloat16``). These tables live here, outside ``src/``, because the
in-container healthcheck (``warmup.py``, ``startup.py``) needs them and may import nothing but the stdlib;
``bwstack.sglang_cli`` (flag spellings), ``bwstack.sweep`` and ``bwstack.report`` import them from here.
"""

from __future__ import annotations

from typing import Any

#: semantic profile field -> candidate flags, preferred first (first one the snapshot has, not deprecated)
SEMANTIC_FLAGS: dict[str, tuple[str, ...]] = {
    "attention_backend": ("--attention-backend",),
    "dsa_prefill_backend": ("--dsa-prefill-backend", "--nsa-prefill-backend"),
    "dsa_decode_backend": ("--dsa-decode-backend", "--nsa-decode-backend"),
    "kv_cache_dtype": ("--kv-cache-dtype",),
    "moe_runner_backend": ("--moe-runner-backend",),
    "fp4_gemm_backend": ("--fp4-gemm-backend",),
}

#: the tensor-parallel flag and its alias (same in every supported version); ``--tp`` works by argparse prefix
TP_FLAGS: tuple[str, ...] = ("--tp-size", "--tensor-parallel-size")

#: field (semantic or SGLang's) -> the names SGLang reports it under (ServerArgs field, /server_info key)
KEY_ALIASES: dict[str, tuple[str, ...]] = {
    "dsa_prefill_backend": ("dsa_prefill_backend", "nsa_prefill_backend"),
    "nsa_prefill_backend": ("nsa_prefill_backend", "dsa_prefill_backend"),
    "dsa_decode_backend": ("dsa_decode_backend", "nsa_decode_backend"),
    "nsa_decode_backend": ("nsa_decode_backend", "dsa_decode_backend"),
    "fp4_gemm_backend": ("fp4_gemm_runner_backend", "fp4_gemm_backend"),
    "fp4_gemm_runner_backend": ("fp4_gemm_runner_backend", "fp4_gemm_backend"),
}

#: values SGLang spells differently from profiles (docs/design.md backend table): spelling -> semantic value
VALUE_ALIASES = {"bf16": "bfloat16", "nsa": "dsa"}

#: the fields a backend report is about: every semantic backend field, then the TP size
REPORT_FIELDS: tuple[str, ...] = (*SEMANTIC_FLAGS, "tp_size")


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
