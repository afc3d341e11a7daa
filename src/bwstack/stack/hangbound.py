"""The serving hang bound of one profile, derived from what its server may legitimately spend without a token.

A server with requests in flight moves SGLang's token counters at every forward pass: each decode step, and
each prefill chunk (0.5.9 and 0.5.23 report ``sglang:realtime_tokens_total`` per prefill batch, and a chunked
prefill is one batch per chunk). The longest legitimate gap is therefore one prefill pass of the longest
admissible chunk: ``min(context length, chunked-prefill size)`` tokens at the model's prefill speed. The bound
is that gap times :data:`MARGIN`, plus :data:`BASE_S` (scheduling, a scrape interval), clamped to
[:data:`FLOOR_S`, :data:`CEILING_S`] and rounded up to whole seconds.

Where each input comes from, first match wins (the reason names it):

- context length: ``--context-length`` in the profile's or model's extra args, ``model.context_length``, a
  ``tiny_models`` entry's ``context_length``, the model config's ``max_position_embeddings``;
- chunked-prefill size: ``--chunked-prefill-size`` in the extra args (``-1`` or ``0``: no chunking), else
  SGLang's own default for the GPU's memory bracket (:data:`DEFAULT_CHUNK`), else the whole context;
- prefill speed: the one ``bwstack calibrate`` measured on this model (``prefill_tok_s`` in baselines.json),
  else the device's documented default (:data:`DEFAULT_PREFILL_TOK_S`).

``launch`` renders the bound into the container's environment (``BWSTACK_HC_HANG_AFTER``); the serve
wrapper's watchdog, the healthcheck and the soak read it from there; ``bwstack explain`` prints the reason.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bwstack.errors import UserError
from bwstack.stack import modelconfig
from healthchecks import vocabulary

if TYPE_CHECKING:
    from bwstack.stack.schema import Stack

#: the bound never goes below this: a healthy server emits a token (or a prefill chunk) well within it
FLOOR_S = 30
#: nor above this: a gap longer than ten minutes is never a legitimate prefill pass
CEILING_S = 600
#: the longest legitimate gap is multiplied by this (the last chunk of a long prompt attends to the whole
#: context, so it is slower than the prompt's average speed)
MARGIN = 2.0
#: seconds added for scheduling and the watchdog's own 1 s scrape
BASE_S = 10.0
#: prefill tokens per second where nothing was measured. gpu: the slowest single-stream prefill published for
#: GLM-5(.2) NVFP4 on 8x RTX PRO 6000, 418 tok/s at 244k context (Triton dense MLA, SGLang 0.5.15.post1;
#: InferenceX PR #2335); cpu: a tiny bwstack model on 2 shared cores, half of the slowest measured there
#: (the 2304-token long probe in 31 ms on an idle run, docs/benchmarks.md health_under_load (a); an earlier
#: run with both cores loaded took 506 ms for 2040 tokens: about 4,000 tok/s)
DEFAULT_PREFILL_TOK_S = {"gpu": 418.0, "cpu": 2000.0}
#: SGLang's chunked-prefill default by the GPU's memory bracket (0.5.9 ``_handle_gpu_memory_settings``): the
#: datacenter Blackwell parts (compute capability 10.x: B200, B300) have 160 GB or more -> 16384; RTX PRO 6000
#: (96 GB), H200 (141 GB) and the rest are under 160 GB -> 8192
CHUNK_OVER_160_GB, CHUNK_UNDER_160_GB = 16384, 8192


@dataclass(frozen=True)
class HangBound:
    """The bound in seconds and the arithmetic that gave it."""

    seconds: int
    context: int | None
    chunk: int | None
    prefill_tok_s: float
    why: str

    def line(self) -> str:
        return f"hang bound {self.seconds} s: {self.why}"


def _flag(argv: list[str], flag: str) -> str | None:
    """The last value of ``flag`` (``--x V`` or ``--x=V``) in an argv."""
    found = None
    for i, arg in enumerate(argv):
        if arg == flag and i + 1 < len(argv):
            found = argv[i + 1]
        elif arg.startswith(flag + "="):
            found = arg.split("=", 1)[1]
    return found


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def _context(stack: Stack, profile: str, argv: list[str]) -> tuple[int | None, str]:
    flagged = _int(_flag(argv, "--context-length"))
    if flagged and flagged > 0:
        return flagged, "--context-length"
    if stack.model.context_length:
        return stack.model.context_length, "model.context_length"
    tiny = stack.tiny_models.get(stack.model_path_for(profile))
    if tiny is not None:
        return tiny.context, "the tiny model's context"
    if stack.model.config:
        try:
            config = modelconfig.load(stack.model.config, base=stack.root)
        except UserError:
            return None, "unknown (model config unreadable)"
        value = config.get("max_position_embeddings")
        if isinstance(value, int) and value > 0:
            return value, f"max_position_embeddings of {stack.model.config}"
    return None, "unknown"


def _chunk(stack: Stack, profile: str, argv: list[str]) -> tuple[int | None, str]:
    flagged = _int(_flag(argv, "--chunked-prefill-size"))
    if flagged is not None:
        return (flagged, "--chunked-prefill-size") if flagged > 0 else (None, "chunked prefill off")
    if stack.device_for(profile) == "gpu":
        arch = stack.arch_for(profile)
        capability = vocabulary.ARCH_CAPABILITY.get(arch)
        if capability is not None:
            chunk = CHUNK_OVER_160_GB if capability[0] == 10 else CHUNK_UNDER_160_GB
            return chunk, f"SGLang's default chunk on {arch}"
    return None, "no chunk size known: the whole context"


def derive(stack: Stack, profile: str, argv: list[str], prefill_tok_s: float | None = None) -> HangBound:
    """The hang bound of ``profile`` whose server runs ``argv``; ``prefill_tok_s``: a measured speed."""
    device = stack.device_for(profile)
    context, context_from = _context(stack, profile, argv)
    chunk, chunk_from = _chunk(stack, profile, argv)
    if prefill_tok_s and prefill_tok_s > 0 and math.isfinite(prefill_tok_s):
        speed, speed_from = prefill_tok_s, "measured by bwstack calibrate"
    else:
        speed, speed_from = DEFAULT_PREFILL_TOK_S[device], f"the {device} default"
    sizes = [n for n in (context, chunk) if n]
    if not sizes:
        return HangBound(
            CEILING_S, None, chunk, speed, f"the ceiling {CEILING_S} s (context length {context_from})"
        )
    gap_tokens = min(sizes)
    gap_s = gap_tokens / speed
    raw = MARGIN * gap_s + BASE_S
    seconds = int(min(CEILING_S, max(FLOOR_S, math.ceil(raw))))
    limit = ""
    if raw < FLOOR_S:
        limit = f" -> the floor {FLOOR_S} s"
    elif raw > CEILING_S:
        limit = f" -> the ceiling {CEILING_S} s"
    why = (
        f"longest prefill pass {gap_tokens} tokens (context {context or '?'} from {context_from}; chunk "
        f"{chunk or '-'}: {chunk_from}) at {speed:g} tok/s ({speed_from}) = {gap_s:.1f} s; "
        f"x{MARGIN:g} + {BASE_S:g} s = {raw:.1f} s{limit}"
    )
    return HangBound(seconds, context, chunk, speed, why)
