"""Train a tiny model (``bwstack.tinymodel``) on the healthcheck's reference passage, on the CPU, in seconds.

The quality probe (``healthchecks/warmup.py``) scores ``warmup.PASSAGE`` by teacher forcing. A model that
has learnt the passage by heart scores it near 0 nats/token; the same model with noise added to its weights
(the ``noise`` fault) scores it far lower, and a NaN model cannot score it at all. Tests and the demo use this
to put the probe in front of real SGLang with a known-good and a known-garbage model.

Training needs torch and transformers (the CPU serving venv has both), imported lazily. Run it in that venv::

    PYTHONPATH=<repo>/src:<repo> <venv>/bin/python -m bwstack.tinytrain DIR [--fault noise] [--steps N]

:func:`write_in_venv` does exactly that from the host tools' own interpreter.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from bwstack import tinymodel
from bwstack.errors import ExternalError

DEFAULT_STEPS = 300
LEARNING_RATE = 3e-3
#: stop early once the passage's mean next-token loss (nats) is below this: the model reproduces it
TARGET_LOSS = 0.02


def passage() -> str:
    from healthchecks import warmup

    return warmup.PASSAGE


def corpus() -> tuple[str, ...]:
    """The tokenizer's training text: the tiny model's corpus plus the passage (so it tokenizes compactly)."""
    return (*tinymodel.CORPUS, passage())


def train(spec: tinymodel.TinySpec, *, steps: int = DEFAULT_STEPS) -> tuple[dict[str, Any], dict[str, Any]]:
    """Weights (numpy float32, checkpoint names) that reproduce the passage, and a summary of the run."""
    import numpy as np
    import torch
    import transformers

    torch.manual_seed(spec.seed)
    tokenizer = tinymodel.train_tokenizer(spec.vocab, corpus())
    ids = tokenizer.encode(passage()).ids
    config_cls = transformers.LlamaConfig if spec.arch == "llama" else transformers.Qwen2Config
    model_cls = transformers.LlamaForCausalLM if spec.arch == "llama" else transformers.Qwen2ForCausalLM
    skip = ("architectures", "torch_dtype")
    config = config_cls(**{k: v for k, v in tinymodel.config_json(spec).items() if k not in skip})
    model = model_cls(config).float()
    model.train()
    optimizer = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE)
    batch = torch.tensor([ids], dtype=torch.long)
    loss_value = float("inf")
    done = 0
    for done in range(1, steps + 1):  # noqa: B007 - the count is reported
        optimizer.zero_grad()
        loss = model(input_ids=batch, labels=batch).loss
        loss.backward()
        optimizer.step()
        loss_value = float(loss.detach())
        if loss_value < TARGET_LOSS:
            break
    shapes = tinymodel.weight_shapes(spec)
    state = model.state_dict()
    weights = {name: state[name].detach().cpu().numpy().astype(np.float32) for name in shapes}
    summary = {"passage_tokens": len(ids), "steps": done, "final_loss": round(loss_value, 5)}
    return weights, summary


def write_trained(target: Path, spec: tinymodel.TinySpec, *, steps: int = DEFAULT_STEPS) -> Path:
    """Train, then write the model folder (the spec's fault applied to the trained weights)."""
    weights, summary = train(spec, steps=steps)
    return tinymodel.write(
        target,
        spec,
        weights=weights,
        corpus=corpus(),
        extra={"trained_on": "healthchecks.warmup.PASSAGE", **summary},
    )


def write_in_venv(
    python: Path, target: Path, *, fault: str = "none", steps: int = DEFAULT_STEPS, timeout: float = 600.0
) -> Path:
    """Run :func:`write_trained` in another interpreter (one with torch and transformers)."""
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root / "src"), str(root)])}
    argv = [str(python), "-m", "bwstack.tinytrain", str(target), "--fault", fault, "--steps", str(steps)]
    try:
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ExternalError(f"training the tiny model with {python} failed: {exc}") from exc
    if done.returncode != 0:
        tail = " ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
        raise ExternalError(f"training the tiny model with {python} failed (exit {done.returncode}): {tail}")
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bwstack.tinytrain", description=__doc__.splitlines()[0])
    parser.add_argument("target", type=Path)
    parser.add_argument("--arch", default="llama", choices=tuple(tinymodel.ARCHS))
    parser.add_argument("--fault", default="none", choices=tinymodel.FAULTS)
    parser.add_argument("--steps", type=int, default=DEFAULT_STEPS)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    spec = tinymodel.TinySpec(arch=args.arch, fault=args.fault, seed=args.seed)
    path = write_trained(args.target, spec, steps=args.steps)
    print(f"wrote {path} (trained on the reference passage, fault {args.fault})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
