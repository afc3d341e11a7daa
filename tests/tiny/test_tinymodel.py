"""bwstack tiny-model: real safetensors and tokenizer files, faults in the weights only."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file
from tokenizers import Tokenizer

from bwstack.tiny import tinymodel


def test_writes_a_loadable_llama_folder(tmp_path: Path) -> None:
    spec = tinymodel.TinySpec()
    folder = tinymodel.write(tmp_path / "m", spec)
    assert sorted(p.name for p in folder.iterdir()) == sorted(tinymodel.FILES)
    weights = load_file(str(folder / "model.safetensors"))
    assert {k: v.shape for k, v in weights.items()} == tinymodel.weight_shapes(spec)
    assert all(np.isfinite(v).all() for v in weights.values())
    config = json.loads((folder / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"] and config["vocab_size"] == spec.vocab
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    assert tokenizer.get_vocab_size() == spec.vocab
    ids = tokenizer.encode("The quick brown fox").ids
    assert tokenizer.decode(ids) == "The quick brown fox"
    assert all(oct(p.stat().st_mode)[-3:] == "644" for p in folder.iterdir())


def test_same_seed_same_bytes_other_seed_other_weights(tmp_path: Path) -> None:
    a = tinymodel.write(tmp_path / "a", tinymodel.TinySpec(seed=3))
    b = tinymodel.write(tmp_path / "b", tinymodel.TinySpec(seed=3))
    c = tinymodel.write(tmp_path / "c", tinymodel.TinySpec(seed=4))
    for name in ("model.safetensors", "tokenizer.json", "config.json"):
        assert (a / name).read_bytes() == (b / name).read_bytes()
    assert (a / "model.safetensors").read_bytes() != (c / "model.safetensors").read_bytes()


@pytest.mark.parametrize(
    ("fault", "tensor", "nan"),
    [
        ("nan-lm-head", "lm_head.weight", True),
        ("nan-norm", "model.norm.weight", True),
        ("noise", "lm_head.weight", False),
    ],
)
def test_faults_change_weights_only(tmp_path: Path, fault: str, tensor: str, nan: bool) -> None:
    clean = load_file(str(tinymodel.write(tmp_path / "clean", tinymodel.TinySpec()) / "model.safetensors"))
    folder = tinymodel.write(tmp_path / fault, tinymodel.TinySpec(fault=fault))
    broken = load_file(str(folder / "model.safetensors"))
    assert np.isnan(broken[tensor]).all() == nan
    assert not np.array_equal(broken[tensor], clean[tensor])
    assert (folder / "config.json").read_text() == (tmp_path / "clean" / "config.json").read_text()


def test_qwen2_has_attention_biases(tmp_path: Path) -> None:
    spec = tinymodel.TinySpec(arch="qwen2")
    weights = load_file(str(tinymodel.write(tmp_path / "q", spec) / "model.safetensors"))
    assert "model.layers.0.self_attn.q_proj.bias" in weights


def test_olmo2_has_the_layout_sglang_loads_and_a_window_only_in_config(tmp_path: Path) -> None:
    """The long-context pair (bwstack.tiny.tinycopy): same tensors, the twin's config.json names a window."""
    full = tinymodel.TinySpec(arch="olmo2")
    windowed = tinymodel.TinySpec(arch="olmo2", sliding_window=1024)
    assert tinymodel.weight_shapes(full) == tinymodel.weight_shapes(windowed)
    weights = load_file(str(tinymodel.write(tmp_path / "o", windowed) / "model.safetensors"))
    for name in ("self_attn.q_norm.weight", "self_attn.k_norm.weight", "self_attn.o_proj.bias",
                 "post_feedforward_layernorm.weight"):  # fmt: skip
        assert f"model.layers.1.{name}" in weights
    assert "model.layers.0.input_layernorm.weight" not in weights
    config = json.loads((tmp_path / "o" / "config.json").read_text())
    assert config["architectures"] == ["Olmo2ForCausalLM"] and config["attention_bias"] is True
    assert config["layer_types"] == ["sliding_attention"] * 2 and config["sliding_window"] == 1024
    plain = tinymodel.config_json(full)
    assert plain["layer_types"] == ["full_attention"] * 2 and "sliding_window" not in plain


def test_cli_refuses_an_unknown_fault_with_exit_2(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "bwstack.cli", "tiny-model", str(tmp_path / "x"), "--fault", "nan-everything"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2
    assert "unknown fault 'nan-everything'" in out.stderr and "Traceback" not in out.stderr
    assert not (tmp_path / "x").exists()
