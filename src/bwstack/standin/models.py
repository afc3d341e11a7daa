"""What the stand-in knows about the served model: architecture, DSA indexer, context length, quantization.

SGLang reads the Hugging Face ``config.json``. The stand-in does the same for a local ``--model-path`` folder
and otherwise looks the id up in a small built-in table of the DSA checkpoints bwstack serves (no network; the
weights are never read, so ``--load-format dummy`` and real ids behave alike). ``--json-model-override-args``
is merged over the config like SGLang does.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

GLM5_CONFIG: dict[str, Any] = {
    # huggingface/transformers configuration_glm_moe_dsa.py; sm120-backends.md §5 (GLM-5 model facts)
    "architectures": ["GlmMoeDsaForCausalLM"],
    "model_type": "glm_moe_dsa",
    "index_topk": 2048,
    "max_position_embeddings": 202752,
    "num_hidden_layers": 78,
    "vocab_size": 154880,
}

DSV32_CONFIG: dict[str, Any] = {
    # deepseek-ai/DeepSeek-V3.2 config.json (model_type deepseek_v32, index_topk 2048, 163840 positions)
    "architectures": ["DeepseekV32ForCausalLM"],
    "model_type": "deepseek_v32",
    "index_topk": 2048,
    "max_position_embeddings": 163840,
    "num_hidden_layers": 61,
    "vocab_size": 129280,
}

_NVFP4 = {"quantization_config": {"quant_method": "modelopt", "quant_algo": "NVFP4"}}
_FP8 = {"quantization_config": {"quant_method": "fp8"}}

#: Hugging Face id (lower case) -> config.json fields the stand-in needs
KNOWN_MODELS: dict[str, dict[str, Any]] = {
    "zai-org/glm-5": GLM5_CONFIG,
    "zai-org/glm-5-fp8": {**GLM5_CONFIG, **_FP8},
    "zai-org/glm-5.1": GLM5_CONFIG,
    "zai-org/glm-5.1-fp8": {**GLM5_CONFIG, **_FP8},
    "zai-org/glm-5.2": GLM5_CONFIG,
    "zai-org/glm-5.2-fp8": {**GLM5_CONFIG, **_FP8},
    "nvidia/glm-5-nvfp4": {**GLM5_CONFIG, **_NVFP4},
    "nvidia/glm-5.1-nvfp4": {**GLM5_CONFIG, **_NVFP4},
    "nvidia/glm-5.2-nvfp4": {**GLM5_CONFIG, **_NVFP4},
    "lukealonso/glm-5-nvfp4": {**GLM5_CONFIG, **_NVFP4},
    "lukealonso/glm-5.1-nvfp4": {**GLM5_CONFIG, **_NVFP4},
    "festr2/glm-5-nvfp4-mtp": {**GLM5_CONFIG, **_NVFP4},
    "deepseek-ai/deepseek-v3.2": {**DSV32_CONFIG, **_FP8},
    "deepseek-ai/deepseek-v3.2-exp": {**DSV32_CONFIG, **_FP8},
}

#: a model nobody configured: a small dense model, so the stand-in still serves
GENERIC_CONFIG: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "max_position_embeddings": 131072,
    "vocab_size": 128256,
}


class ModelError(ValueError):
    """The model's config cannot be read (a local folder with a broken config.json)."""


@dataclass(frozen=True)
class ModelInfo:
    """The parts of a Hugging Face config SGLang's backend resolution and HTTP API look at."""

    path: str
    config: Mapping[str, Any]
    source: str  # "config.json", "built-in table" or "generic"

    @property
    def architecture(self) -> str:
        archs = self.config.get("architectures") or ["LlamaForCausalLM"]
        return str(archs[0])

    @property
    def architectures(self) -> list[str]:
        return [str(a) for a in self.config.get("architectures") or [self.architecture]]

    @property
    def model_type(self) -> str | None:
        value = self.config.get("model_type")
        return None if value is None else str(value)

    @property
    def index_topk(self) -> int | None:
        value = self.config.get("index_topk")
        return None if value is None else int(value)

    @property
    def learnable_sink(self) -> bool:
        return bool(self.config.get("learnable_sink", False))

    @property
    def context_length(self) -> int:
        return int(self.config.get("max_position_embeddings") or 4096)

    @property
    def quant_method(self) -> str | None:
        """SGLang's quantization name for the checkpoint's ``quantization_config`` (None: unquantized)."""
        quant = self.config.get("quantization_config")
        if not isinstance(quant, Mapping):
            return None
        method = str(quant.get("quant_method") or "")
        if method == "modelopt":
            algo = str(quant.get("quant_algo") or "").upper()
            return "modelopt_fp4" if "FP4" in algo else "modelopt_fp8"
        return method or None


def load_model(model_path: str, override_args: str | Mapping[str, Any] | None = None) -> ModelInfo:
    """The model behind ``--model-path`` with ``--json-model-override-args`` applied."""
    config, source = _base_config(model_path)
    overrides = _overrides(override_args)
    return ModelInfo(path=model_path, config={**config, **overrides}, source=source)


def _base_config(model_path: str) -> tuple[dict[str, Any], str]:
    folder = Path(model_path)
    config_file = folder / "config.json"
    if folder.is_dir() and config_file.is_file():
        try:
            loaded = json.loads(config_file.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ModelError(f"{config_file}: cannot read the model config: {exc}") from None
        if not isinstance(loaded, dict):
            raise ModelError(f"{config_file}: the model config is not a JSON object")
        return loaded, "config.json"
    known = KNOWN_MODELS.get(model_path.strip().strip("/").lower())
    if known is not None:
        return dict(known), "built-in table"
    return dict(GENERIC_CONFIG), "generic"


def _overrides(override_args: str | Mapping[str, Any] | None) -> dict[str, Any]:
    if override_args is None or override_args == "":
        return {}
    if isinstance(override_args, Mapping):
        return dict(override_args)
    try:
        loaded = json.loads(override_args)
    except json.JSONDecodeError as exc:
        raise ModelError(f"--json-model-override-args is not valid JSON: {exc}") from None
    if not isinstance(loaded, dict):
        raise ModelError("--json-model-override-args must be a JSON object")
    return loaded
