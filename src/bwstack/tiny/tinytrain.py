"""Train a tiny model (``bwstack.tiny.tinymodel``) on the healthcheck's reference passage, on the CPU, in
seconds.

The quality probe (``healthchecks/warmup.py``) scores ``judging.PASSAGE`` by teacher forcing. A model that
has learnt the passage by heart scores it near 0 nats/token; the same model with noise added to its weights
(the ``noise`` fault) scores it far lower, and a NaN model cannot score it at all. Tests and the demo use this
to put the probe in front of real SGLang with a known-good and a known-garbage model.

Training needs torch and transformers (the CPU serving venv has both), imported lazily. Run it in that venv::

    PYTHONPATH=<repo>/src:<repo> <venv>/bin/python -m bwstack.tiny.tinytrain --out none=DIR [--out
    noise=DIR2]

:func:`write_in_venv` does exactly that from the host tools' own interpreter.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from bwstack.errors import ExternalError
from bwstack.tiny import tinymodel
from healthchecks import judging

DEFAULT_STEPS = 300
LEARNING_RATE = 3e-3
#: noise (x the weight's std) for the ``noise`` fault of a trained model. The tiny model's default 0.5 barely
#: moves a memorised passage (seen: -0.068 vs -0.019 nats/token); 1.0 gives -1.40, 2.0 -5.9 (random: -6.2)
TRAINED_NOISE_SCALE = 2.0
#: stop early once the passage's mean next-token loss (nats) is below this: the model reproduces it
TARGET_LOSS = 0.02


def passage() -> str:

    return judging.PASSAGE


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


def write_trained(targets: dict[str, Path], spec: tinymodel.TinySpec, *, steps: int = DEFAULT_STEPS) -> None:
    """Train once, then write one model folder per fault (``{fault: folder}``) from the same weights."""
    weights, summary = train(spec, steps=steps)
    extra = {"trained_on": "healthchecks.judging.PASSAGE", **summary}
    for fault, target in targets.items():
        scale = TRAINED_NOISE_SCALE if fault == "noise" else spec.noise_scale
        faulty = dataclasses.replace(spec, fault=fault, noise_scale=scale)
        tinymodel.write(target, faulty, weights=weights, corpus=corpus(), extra=extra)


def write_in_venv(
    python: Path, targets: dict[str, Path], *, steps: int = DEFAULT_STEPS, timeout: float = 900.0
) -> dict[str, Path]:
    """Run :func:`write_trained` in another interpreter (one with torch and transformers)."""
    args = ["--steps", str(steps)]
    for fault, target in targets.items():
        args += ["--out", f"{fault}={target}"]
    run_module(python, "bwstack.tiny.tinytrain", args, what="training the tiny model", timeout=timeout)
    return targets


def run_module(python: Path, module: str, args: list[str], *, what: str, timeout: float) -> str:
    """``python -m module args`` with this checkout on its path (an interpreter with torch, transformers …,
    the CPU serving venv); its stdout. A failure or a timeout is an ExternalError naming ``what``."""
    root = Path(__file__).resolve().parents[3]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root / "src"), str(root)])}
    argv = [str(python), "-m", module, *args]
    try:
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ExternalError(f"{what} with {python} failed: {exc}") from exc
    if done.returncode != 0:
        tail = " ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
        raise ExternalError(f"{what} with {python} failed (exit {done.returncode}): {tail}")
    return done.stdout


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bwstack.tiny.tinytrain", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--out", action="append", required=True, metavar="FAULT=DIR", help="write the model with FAULT to DIR"
    )
    parser.add_argument("--arch", default="llama", choices=tuple(tinymodel.ARCHS))
    parser.add_argument("--steps", type=int, default=DEFAULT_STEPS)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    targets: dict[str, Path] = {}
    for item in args.out:
        fault, sep, folder = item.partition("=")
        if not sep or fault not in tinymodel.FAULTS or not folder:
            parser.error(
                f"--out wants FAULT=DIR with FAULT one of {', '.join(tinymodel.FAULTS)}, got {item!r}"
            )
        targets[fault] = Path(folder)
    write_trained(targets, tinymodel.TinySpec(arch=args.arch, seed=args.seed), steps=args.steps)
    for fault, target in targets.items():
        print(f"wrote {target} (trained on the reference passage, fault {fault})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
