"""Two tiny models for the long-context probe (``healthchecks/longprobe.py``): one that copies across 2,000+
tokens, and the same weights with a config that breaks attention past a length.

**Good** (``copy``): a 2-layer Olmo2ForCausalLM (hidden 512, 4 heads of 128, RoPE base 1e8, 4096 positions)
whose attention is *built*, not trained, as an induction circuit, so it is exact and needs no GPU time:

- every token's embedding is a fixed random code ``[z1(t); z2(t)]`` (two unit vectors of :data:`Z` dims);
- layer 0, heads 0 and 1: positional heads (constant q and k from the attention biases) that attend to the
  token 1 and 2 back. Their RoPE amplitudes per frequency are the solution of a small linear programme: the
  largest score gap between the wanted offset and every other offset up to 4096 (:func:`positional_heads`).
  They write the codes of the two previous tokens into their own parts of the residual stream;
- layer 1, head 0: the induction head. Its query is ``[z1(t_i); z2(t_{i-1})]``, its key
  ``[z1(t_{j-1}); z2(t_{j-2})]``, both on the slowest RoPE frequencies only (rotated by under 0.2 rad across
  4096 positions, so a match scores the same at any distance): position i attends to the place where the
  two tokens it has just seen occurred before, and copies the token that followed them; ``lm_head`` reads
  that copy. On the probe's second copy this predicts every token (a random block of ids 16..255 repeats
  most single tokens, but almost never a pair).

Only layer 1's MLP and ``lm_head`` (outside the circuit's columns) are then trained, seconds on the CPU, on
the reference passage (``judging.PASSAGE``) and on short copies, so the short quality probe scores near 0 too.

**Broken past a length** (``copy-window``): the very same weights; ``config.json`` declares every layer a
sliding-window layer (``layer_types: sliding_attention``, ``sliding_window`` = :data:`BROKEN_WINDOW`). SGLang
0.5.23's Olmo2 model file passes that window to the attention backend (torch_native masks keys further back
than the window), so the positional heads (1-2 tokens back) and the short passage are untouched, while the
probe's second copy, 1152 tokens after the first, is out of sight of the induction head: its score falls to
garbage. That is the real failure of a checkpoint whose config declares a window its weights were not made
for (or of a serving engine that applies one where the model had none); no code of ours switches it on.
SGLang 0.5.23's Llama, Mistral and Qwen2 files ignore ``sliding_window`` (read there), hence Olmo2.

Needs numpy, scipy, torch and transformers (the CPU serving venv has them), imported lazily::

    PYTHONPATH=<repo>/src:<repo> <venv>/bin/python -m bwstack.tiny.tinycopy --good DIR --broken DIR2
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import Any

from bwstack.stack.schema import COPY_CONTEXT
from bwstack.tiny import tinymodel, tinytrain
from healthchecks import longprobe

#: the model's shape: the circuit needs 4 residual parts of 128 (own code, two previous codes, the copy)
SPEC = tinymodel.TinySpec(
    arch="olmo2",
    hidden=512,
    layers=2,
    heads=4,
    kv_heads=4,
    intermediate=256,
    vocab=512,
    max_positions=COPY_CONTEXT,
    rope_theta=1e8,
)
#: the broken twin's window: past the short passage and the positional heads, short of the probe's copy
#: distance (half of ``repeat-2304``)
BROKEN_WINDOW = 1024
#: dims of each half of a token's code; also the number of slow RoPE pairs the induction head uses
Z = 30
#: residual parts (offsets into the hidden state)
OWN, PREV1, PREV2, COPY = 0, 128, 256, 384
#: score gaps (logit units) the circuit is built for: positional heads, induction head, lm_head
POSITIONAL_GAP = 30.0
INDUCTION_TEMPERATURE = 30.0
READOUT_GAIN = 25.0
#: positional heads: frequencies used (the fastest 16) and offsets checked (every position a prompt can have)
FAST_PAIRS = 16
TRAIN_STEPS = 120
LEARNING_RATE = 3e-3


def positional_heads(head_dim: int, theta: float, offsets: tuple[int, ...], horizon: int) -> list[Any]:
    """Per offset d: q and k (one head each, numpy) whose RoPE score peaks at distance d, by the largest gap
    to every other distance 0..horizon (a linear programme over the amplitudes of the fastest pairs)."""
    import numpy as np
    from scipy.optimize import linprog

    freqs = theta ** (-np.arange(head_dim // 2) * 2 / head_dim)
    fast = freqs[:FAST_PAIRS]
    distances = np.arange(horizon + 1)
    out = []
    for d in offsets:
        # maximise t: sum_f A_f (1 - cos(w_f (D - d))) >= t for every D != d, sum A_f = 1, A_f >= 0
        gaps = np.delete(1 - np.cos(np.outer(distances - d, fast)), d, axis=0)
        n = len(fast)
        found = linprog(
            np.r_[np.zeros(n), -1.0],
            A_ub=np.hstack([-gaps, np.ones((len(gaps), 1))]),
            b_ub=np.zeros(len(gaps)),
            A_eq=np.r_[np.ones(n), 0.0][None, :],
            b_eq=[1.0],
            bounds=[(0, None)] * n + [(None, None)],
        )
        amplitude = np.r_[found.x[:n], np.zeros(head_dim // 2 - n)]
        scale = POSITIONAL_GAP * math.sqrt(head_dim) / -found.fun
        k = np.sqrt(amplitude * scale).astype(complex)
        q = k * np.exp(-1j * freqs * d)  # q.R(w D)k = sum A cos(w (D - d)) x scale
        half = head_dim // 2
        out.append((np.r_[q.real, q.imag][: 2 * half], np.r_[k.real, k.imag][: 2 * half]))
    return out


def circuit(spec: tinymodel.TinySpec = SPEC) -> dict[str, Any]:
    """The induction circuit's weights (numpy float32, checkpoint names; everything else zero or one)."""
    import numpy as np

    d, hd, vocab = spec.hidden, spec.head_dim, spec.vocab
    rng = np.random.default_rng(spec.seed)
    halves = [rng.normal(size=(vocab, Z)) for _ in range(2)]
    code = np.concatenate([h / np.linalg.norm(h, axis=1, keepdims=True) for h in halves], axis=1)  # |c|=sqrt2
    w = {name: np.zeros(shape, dtype=np.float32) for name, shape in tinymodel.weight_shapes(spec).items()}
    for name, array in w.items():
        if name.endswith("norm.weight"):
            array[:] = 1.0
    eye = np.eye(2 * Z)
    w["model.embed_tokens.weight"][:, OWN : OWN + 2 * Z] = code
    # layer 0: heads 0 and 1 look 1 and 2 tokens back; they copy the own code into PREV1 / PREV2
    a = "model.layers.0.self_attn."
    q_bias, k_bias = np.zeros(d), np.zeros(d)
    for head, (q, k) in enumerate(positional_heads(hd, spec.rope_theta, (1, 2), spec.max_positions)):
        q_bias[head * hd : (head + 1) * hd], k_bias[head * hd : (head + 1) * hd] = q, k
    w[a + "q_proj.bias"][:], w[a + "k_proj.bias"][:] = q_bias, k_bias
    w[a + "q_norm.weight"][:] = math.sqrt(float(np.mean(q_bias**2)))  # the norm then restores the bias
    w[a + "k_norm.weight"][:] = math.sqrt(float(np.mean(k_bias**2)))
    for head, part in ((0, PREV1), (1, PREV2)):
        w[a + "v_proj.weight"][head * hd : head * hd + 2 * Z, OWN : OWN + 2 * Z] = eye
        w[a + "o_proj.weight"][part : part + 2 * Z, head * hd : head * hd + 2 * Z] = eye
    # the post-norm sees two codes (norm 2 together): back to codes of norm sqrt2
    w["model.layers.0.post_attention_layernorm.weight"][:] = 2 / math.sqrt(d)
    # layer 1, head 0: query [z1(t_i); z2(t_i-1)], key [z1(t_j-1); z2(t_j-2)] on the slowest pairs
    a = "model.layers.1.self_attn."
    half = hd // 2
    for n, pair in enumerate(range(half - Z, half)):
        w[a + "q_proj.weight"][pair, OWN + n] = 1.0
        w[a + "q_proj.weight"][pair + half, PREV1 + Z + n] = 1.0
        w[a + "k_proj.weight"][pair, PREV1 + n] = 1.0
        w[a + "k_proj.weight"][pair + half, PREV2 + Z + n] = 1.0
    tau = math.sqrt(INDUCTION_TEMPERATURE * math.sqrt(hd))
    rms = math.sqrt(2 / d)  # q and k are codes of norm sqrt2 in d dims
    w[a + "q_norm.weight"][:] = tau * rms  # the norm divides by rms: q = tau x [z1; z2]
    w[a + "k_norm.weight"][:] = tau * rms
    w[a + "v_proj.weight"][: 2 * Z, OWN : OWN + 2 * Z] = eye
    w[a + "o_proj.weight"][COPY : COPY + 2 * Z, : 2 * Z] = eye
    w["model.layers.1.post_attention_layernorm.weight"][:] = rms
    # the final norm sees four codes (norm sqrt2 each): the copy part arrives as code x sqrt(d)/(2 sqrt2)
    w["lm_head.weight"][:, COPY : COPY + 2 * Z] = code * READOUT_GAIN * 2 * math.sqrt(2) / (2 * math.sqrt(d))
    return w


def copy_score(model: Any, length: int) -> float:
    """The long probe's score (mean logprob of the second copy) of a transformers model."""
    import torch

    ids, start = longprobe.prompt(length)
    with torch.no_grad():
        x = torch.tensor([ids])
        logprobs = torch.log_softmax(model(input_ids=x).logits.float(), -1)
        return float(logprobs[0, start - 1 : -1].gather(-1, x[0, start:, None]).mean())


def build(
    spec: tinymodel.TinySpec = SPEC, *, steps: int = TRAIN_STEPS
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The good model's weights (the circuit, then layer 1's MLP and ``lm_head`` outside the circuit
    trained on the passage and short copies) and a summary with the scores transformers computes."""
    import numpy as np
    import torch
    import transformers

    started = time.monotonic()
    torch.manual_seed(spec.seed)
    weights = circuit(spec)
    skip = ("architectures", "torch_dtype")
    config = transformers.Olmo2Config(
        **{k: v for k, v in tinymodel.config_json(spec).items() if k not in skip}
    )
    model = transformers.Olmo2ForCausalLM(config).float()
    model.load_state_dict({k: torch.tensor(v) for k, v in weights.items()}, strict=True)
    trained = [f"model.layers.1.mlp.{p}.weight" for p in ("gate_proj", "up_proj", "down_proj")]
    params = dict(model.named_parameters())
    for name, param in params.items():
        param.requires_grad_(name in trained or name == "lm_head.weight")
    keep = torch.zeros_like(params["lm_head.weight"], dtype=torch.bool)
    keep[:, COPY : COPY + 2 * Z] = True  # the circuit's readout stays as built
    params["lm_head.weight"].register_hook(lambda grad: grad.masked_fill(keep, 0.0))
    with torch.no_grad():  # the MLP starts small, not silent: a zero down_proj gets no gradient upstream
        for name in trained:
            params[name].normal_(0.0, 0.02)
    tokenizer = tinymodel.train_tokenizer(spec.vocab, tinytrain.corpus())
    passage = torch.tensor([tokenizer.encode(tinytrain.passage()).ids])
    generator = torch.Generator().manual_seed(spec.seed)
    optimizer = torch.optim.Adam([p for p in params.values() if p.requires_grad], lr=LEARNING_RATE)
    model.train()
    loss_value = float("inf")
    for _ in range(steps):
        block = torch.randint(longprobe.ID_LOW, longprobe.ID_HIGH, (8, 64), generator=generator)
        copies = torch.cat([block, block], 1)
        labels = copies.clone()
        labels[:, :64] = -100
        optimizer.zero_grad()
        passage_loss = model(input_ids=passage, labels=passage).loss
        loss = passage_loss + model(input_ids=copies, labels=labels).loss
        loss.backward()
        optimizer.step()
        loss_value = float(passage_loss.detach())
    model.eval()
    length = longprobe.length_for(None, spec.max_positions)
    state = model.state_dict()
    out = {name: state[name].detach().cpu().numpy().astype(np.float32) for name in weights}
    summary = {
        "trained_on": "healthchecks.judging.PASSAGE + copies (layer 1 MLP, lm_head); attention built",
        "passage_loss": round(loss_value, 4),
        "steps": steps,
        f"transformers_{longprobe.probe_id(length)}": round(copy_score(model, length), 4),
        "build_seconds": round(time.monotonic() - started, 1),
    }
    return out, summary


def write_pair(good: Path, broken: Path, *, steps: int = TRAIN_STEPS) -> dict[str, Any]:
    """Build once; write the good model and its sliding-window twin (same weights, one config change)."""
    weights, summary = build(SPEC, steps=steps)
    tinymodel.write(good, SPEC, weights=weights, corpus=tinytrain.corpus(), extra=summary)
    twin = tinymodel.TinySpec(**{**SPEC.__dict__, "sliding_window": BROKEN_WINDOW})
    tinymodel.write(broken, twin, weights=weights, corpus=tinytrain.corpus(), extra=summary)
    return summary


def write_in_venv(python: Path, good: Path, broken: Path, *, timeout: float = 600.0) -> dict[str, Any]:
    """Run :func:`write_pair` in an interpreter with numpy, scipy, torch and transformers (the CPU venv)."""
    import json

    args = ["--good", str(good), "--broken", str(broken)]
    out = tinytrain.run_module(python, "bwstack.tiny.tinycopy", args, what="building the copy models",
                               timeout=timeout)  # fmt: skip
    found: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return found


def main(argv: list[str] | None = None) -> int:
    import json

    parser = argparse.ArgumentParser(
        prog="python -m bwstack.tiny.tinycopy", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--good", required=True, type=Path, help="write the copying model here")
    parser.add_argument("--broken", required=True, type=Path, help="write its sliding-window twin here")
    parser.add_argument("--steps", type=int, default=TRAIN_STEPS)
    args = parser.parse_args(argv)
    summary = write_pair(args.good, args.broken, steps=args.steps)
    print(json.dumps(summary, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
