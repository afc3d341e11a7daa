"""Tiny models made here, for real SGLang on the CPU: no hub download, every byte reproducible from a seed.

``bwstack tiny-model DIR`` writes a Hugging Face model folder that
``python -m sglang.launch_server --device cpu`` loads like any checkpoint: ``config.json``,
``generation_config.json``, ``model.safetensors`` (random weights, float16) and a byte-level BPE tokenizer
trained here with the ``tokenizers`` library on a few lines of text (``tokenizer.json`` +
``tokenizer_config.json`` with a chat template).

Faults change weights, never code, so a failure comes from SGLang's own code paths:

- ``nan-lm-head``: ``lm_head.weight`` all NaN -> every logit NaN;
- ``nan-norm``: the final RMSNorm weight NaN -> NaN hidden states, then NaN logits;
- ``noise``: finite but wrong: Gaussian noise of ``noise_scale`` added to every weight (garbage, not NaN).

Architectures: ``llama`` (LlamaForCausalLM), ``qwen2`` (Qwen2ForCausalLM: q/k/v biases) and ``olmo2``
(Olmo2ForCausalLM: post-norms, q/k norms, attention biases; of the three, the one whose SGLang 0.5.23 model
file passes a ``sliding_window`` to the attention backend: ``bwstack.tiny.tinycopy`` uses it).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bwstack.errors import UserError
from bwstack.stack.schema import TINY_CONTEXT

ARCHS: dict[str, str] = {
    "llama": "LlamaForCausalLM",
    "qwen2": "Qwen2ForCausalLM",
    "olmo2": "Olmo2ForCausalLM",
}
FAULTS: tuple[str, ...] = ("none", "nan-lm-head", "nan-norm", "noise")
#: the files a tiny model folder holds (also what ``bwstack fetch``-style checks can expect)
FILES: tuple[str, ...] = (
    "config.json",
    "generation_config.json",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
    "bwstack-tiny-model.json",
)
SPECIAL_TOKENS: tuple[str, ...] = ("<unk>", "<s>", "</s>")
CHAT_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}"
)
#: the text the tokenizer is trained on (and a fine prompt for a smoke test)
CORPUS: tuple[str, ...] = (
    "The quick brown fox jumps over the lazy dog.",
    "SGLang serves large language models with RadixAttention and a zero-overhead scheduler.",
    "Blackwell GPUs such as the RTX PRO 6000 report compute capability 12.0, the B200 reports 10.0.",
    "A healthy server answers a sampled decode with finite log probabilities.",
    "Profiles pin one backend combination each: attention, sparse attention, KV cache dtype and MoE runner.",
    "Once upon a time there was a tiny model that lived on a CPU and spoke a little English.",
    "0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20",
)


@dataclass(frozen=True)
class TinySpec:
    """The shape of a tiny model; the defaults are what the project's tests and demo serve."""

    arch: str = "llama"
    hidden: int = 64
    layers: int = 2
    heads: int = 4
    kv_heads: int = 2
    intermediate: int = 128
    vocab: int = 512
    max_positions: int = TINY_CONTEXT
    seed: int = 0
    fault: str = "none"
    noise_scale: float = 0.5
    rope_theta: float = 10000.0
    #: olmo2 only: every layer a sliding-window layer of this many tokens (``layer_types`` says so)
    sliding_window: int | None = None

    def check(self) -> None:
        if self.arch not in ARCHS:
            raise UserError(f"unknown arch {self.arch!r} (valid: {', '.join(ARCHS)})", field="arch")
        if self.fault not in FAULTS:
            raise UserError(f"unknown fault {self.fault!r} (valid: {', '.join(FAULTS)})", field="fault")
        if self.hidden % self.heads or self.heads % self.kv_heads:
            raise UserError(
                f"hidden {self.hidden} must divide by heads {self.heads}, heads by kv_heads {self.kv_heads}",
                field="hidden",
            )
        if not 2 <= self.layers <= 64 or not 300 <= self.vocab <= 65536:
            raise UserError("layers must be 2..64 and vocab 300..65536", field="layers")

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


def config_json(spec: TinySpec) -> dict[str, Any]:
    """The Hugging Face ``config.json`` of the model (ids of the special tokens are 0, 1, 2)."""
    config: dict[str, Any] = {
        "architectures": [ARCHS[spec.arch]],
        "model_type": spec.arch,
        "hidden_size": spec.hidden,
        "intermediate_size": spec.intermediate,
        "num_hidden_layers": spec.layers,
        "num_attention_heads": spec.heads,
        "num_key_value_heads": spec.kv_heads,
        "head_dim": spec.head_dim,
        "vocab_size": spec.vocab,
        "max_position_embeddings": spec.max_positions,
        "rms_norm_eps": 1e-6,
        "rope_theta": spec.rope_theta,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
        "torch_dtype": "float16",
        "bos_token_id": 1,
        "eos_token_id": 2,
        "pad_token_id": 0,
    }
    if spec.arch == "qwen2":
        config["use_sliding_window"] = False
    if spec.arch == "olmo2":
        config["attention_bias"] = True
        kind = "full_attention" if spec.sliding_window is None else "sliding_attention"
        config["layer_types"] = [kind] * spec.layers
        if spec.sliding_window is not None:
            config["sliding_window"] = spec.sliding_window
    return config


def weight_shapes(spec: TinySpec) -> dict[str, tuple[int, ...]]:
    """Every tensor name of the checkpoint and its shape, in the layout SGLang's loaders read."""
    kv = spec.kv_heads * spec.head_dim
    shapes: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (spec.vocab, spec.hidden)}
    for i in range(spec.layers):
        p = f"model.layers.{i}"
        if spec.arch == "olmo2":
            shapes[f"{p}.self_attn.q_norm.weight"] = (spec.hidden,)
            shapes[f"{p}.self_attn.k_norm.weight"] = (kv,)
            shapes[f"{p}.post_feedforward_layernorm.weight"] = (spec.hidden,)
        else:
            shapes[f"{p}.input_layernorm.weight"] = (spec.hidden,)
        shapes[f"{p}.post_attention_layernorm.weight"] = (spec.hidden,)
        shapes[f"{p}.self_attn.q_proj.weight"] = (spec.hidden, spec.hidden)
        shapes[f"{p}.self_attn.k_proj.weight"] = (kv, spec.hidden)
        shapes[f"{p}.self_attn.v_proj.weight"] = (kv, spec.hidden)
        shapes[f"{p}.self_attn.o_proj.weight"] = (spec.hidden, spec.hidden)
        if spec.arch in ("qwen2", "olmo2"):
            shapes[f"{p}.self_attn.q_proj.bias"] = (spec.hidden,)
            shapes[f"{p}.self_attn.k_proj.bias"] = (kv,)
            shapes[f"{p}.self_attn.v_proj.bias"] = (kv,)
        if spec.arch == "olmo2":
            shapes[f"{p}.self_attn.o_proj.bias"] = (spec.hidden,)
        shapes[f"{p}.mlp.gate_proj.weight"] = (spec.intermediate, spec.hidden)
        shapes[f"{p}.mlp.up_proj.weight"] = (spec.intermediate, spec.hidden)
        shapes[f"{p}.mlp.down_proj.weight"] = (spec.hidden, spec.intermediate)
    shapes["model.norm.weight"] = (spec.hidden,)
    shapes["lm_head.weight"] = (spec.vocab, spec.hidden)
    return shapes


def random_weights(spec: TinySpec) -> dict[str, Any]:
    """Seeded random weights (numpy float16), the spec's fault applied."""
    import numpy as np

    rng = np.random.default_rng(spec.seed)
    weights: dict[str, Any] = {}
    for name, shape in weight_shapes(spec).items():
        if name.endswith("norm.weight"):
            array = np.ones(shape, dtype=np.float32)
        elif name.endswith(".bias"):
            array = np.zeros(shape, dtype=np.float32)
        else:
            array = rng.normal(0.0, 0.02 if len(shape) == 2 else 1.0, size=shape).astype(np.float32)
        weights[name] = array
    return apply_fault(weights, spec)


def apply_fault(weights: Mapping[str, Any], spec: TinySpec) -> dict[str, Any]:
    """The weights with ``spec.fault`` applied (a copy; float32 in, float16 out)."""
    import numpy as np

    out = {name: np.array(array, dtype=np.float32) for name, array in weights.items()}
    if spec.fault == "nan-lm-head":
        out["lm_head.weight"][:] = np.nan
    elif spec.fault == "nan-norm":
        out["model.norm.weight"][:] = np.nan
    elif spec.fault == "noise":
        rng = np.random.default_rng(spec.seed + 1)
        for name, array in out.items():
            scale = spec.noise_scale * (float(np.std(array)) or 1.0)
            out[name] = array + rng.normal(0.0, scale, size=array.shape).astype(np.float32)
    return {name: array.astype(np.float16) for name, array in out.items()}


def train_tokenizer(vocab: int, corpus: Iterable[str] = CORPUS) -> Any:
    """A byte-level BPE tokenizer trained on ``corpus`` (deterministic for the same input)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))  # noqa: S106 - a token, not a password
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(list(corpus), trainer=trainer)
    return tokenizer


def tokenizer_config(max_length: int = TINY_CONTEXT) -> dict[str, Any]:
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "unk_token": "<unk>",
        "bos_token": "<s>",
        "eos_token": "</s>",
        "pad_token": "<unk>",
        "add_bos_token": False,
        "model_max_length": max_length,
        "clean_up_tokenization_spaces": False,
        "chat_template": CHAT_TEMPLATE,
    }


def write(
    target: Path,
    spec: TinySpec,
    *,
    weights: Mapping[str, Any] | None = None,
    corpus: Iterable[str] = CORPUS,
    extra: Mapping[str, Any] | None = None,
) -> Path:
    """Write the model folder ``target`` atomically (built beside it, then renamed into place).

    ``weights`` replaces the random ones (e.g. a trained model's; the fault is applied to them too).
    ``extra`` is recorded in ``bwstack-tiny-model.json`` next to the spec.
    """
    spec.check()
    from safetensors.numpy import save_file

    target = Path(target)
    if target.exists() and not target.is_dir():
        raise UserError("exists and is not a folder", file=target)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        tensors = apply_fault(weights, spec) if weights is not None else random_weights(spec)
        save_file(
            dict(sorted(tensors.items())), str(staging / "model.safetensors"), metadata={"format": "pt"}
        )
        train_tokenizer(spec.vocab, corpus).save(str(staging / "tokenizer.json"))
        _dump(staging / "config.json", config_json(spec))
        _dump(staging / "generation_config.json", {"bos_token_id": 1, "eos_token_id": 2, "do_sample": True})
        _dump(staging / "tokenizer_config.json", tokenizer_config(spec.max_positions))
        _dump(staging / "bwstack-tiny-model.json", {"spec": spec.__dict__, **dict(extra or {})})
        for path in staging.iterdir():
            path.chmod(0o644)  # the serving container's user (uid 10001) reads a bind mount
        staging.chmod(0o755)
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target


def _dump(path: Path, data: Mapping[str, Any]) -> None:
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def recorded_spec(target: Path) -> dict[str, Any] | None:
    """The spec a made model folder records (``bwstack-tiny-model.json``), None unless it is complete."""
    try:
        data = json.loads((target / "bwstack-tiny-model.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    spec = data.get("spec") if isinstance(data, dict) else None
    return spec if isinstance(spec, dict) and all((target / f).is_file() for f in FILES) else None
