"""Deterministic pseudo-generation in SGLang's ``/generate`` and OpenAI response shapes.

No model runs: token ids come from a hash of the prompt (greedy) or of the prompt and a per-request seed
(sampled), the text is a word per token. The shapes are those real SGLang answered on the CPU
(``tests/standin/data/real/<version>/``, held by ``tests/standin/test_contract.py``): ``{"text", "output_ids",
"meta_info": {…}}`` with the version's meta_info keys (:func:`meta_keys`), logprobs as
``[logprob, token_id, token_text|null]`` triples. ``input_token_logprobs`` covers the prompt from
``logprob_start_len`` (default: the last prompt token on 0.5.9, none on 0.5.23); the first prompt position's
logprob is always ``null``. A NaN logprob is written as ``null``, as orjson does.
"""

from __future__ import annotations

import hashlib
import itertools
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

WORDS: tuple[str, ...] = (
    "Paris", "the", "city", "of", "light", "is", "a", "capital", "and", "river", "Seine", "which", "has",
    "many", "museums", "bridges", "old", "streets", "people", "visit", "every", "year", "to", "see", "its",
    "famous", "tower", "built", "in", "for", "an", "exhibition", "that", "still", "stands", "today", "as",
    "symbol", "France", "country", "Europe", "with", "long", "history", "art", "food", "wine", "culture",
    "language", "spoken", "by", "millions", "around", "world", "it", "was", "also", "home", "poets",
    "writers",
    "painters", "scientists", "over", "centuries",
)  # fmt: skip
FIRST_WORD_ID = 1000
NAN_TOKEN_ID = 0  # argmax / sampling over NaN logits lands on index 0
NAN_TOKEN_TEXT = "!"  # noqa: S105 - a vocabulary entry, not a secret
GREEDY_EPS = 1e-6  # SGLang's _SAMPLING_EPS: temperature below it means greedy (top_k = 1)

_SEEDS = itertools.count(1)


class RequestError(ValueError):
    """A request SGLang would answer with 400 ``{"error": {"message": …}}``."""


@dataclass(frozen=True)
class Sampling:
    """The sampling parameters the stand-in honours."""

    max_new_tokens: int = 128
    temperature: float = 1.0
    top_k: int = -1
    seed: int | None = None

    @property
    def greedy(self) -> bool:
        return self.temperature < GREEDY_EPS or self.top_k == 1


@dataclass(frozen=True)
class Request:
    """One prompt of a ``/generate`` call (a batch is several)."""

    prompt_ids: tuple[int, ...]
    sampling: Sampling
    return_logprob: bool = False
    top_logprobs_num: int = 0
    return_text_in_logprobs: bool = False
    rid: str = field(default_factory=lambda: uuid.uuid4().hex)
    #: SGLang's default -1: from the last prompt token (0.5.9) / no prompt logprobs (0.5.23)
    logprob_start_len: int = -1


@dataclass(frozen=True)
class Output:
    """The generated continuation of one request."""

    ids: tuple[int, ...]
    logprobs: tuple[float | None, ...]
    nan: bool


def word_ids(text: str) -> tuple[int, ...]:
    """Pseudo-tokenisation: one id per whitespace-separated word, plus a BOS id."""
    ids = [1]
    for word in text.split():
        digest = hashlib.sha256(word.encode("utf-8")).digest()
        ids.append(FIRST_WORD_ID + 100 + int.from_bytes(digest[:2], "big") % 50000)
    return tuple(ids)


def token_text(token_id: int) -> str:
    if token_id == NAN_TOKEN_ID:
        return NAN_TOKEN_TEXT
    index = token_id - FIRST_WORD_ID
    if 0 <= index < len(WORDS):
        return " " + WORDS[index]
    return " <unk>"


def detokenize(ids: Sequence[int]) -> str:
    return "".join(token_text(i) for i in ids)


def _draw(key: str, modulo: int) -> int:
    return int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:4], "big") % modulo


def run(request: Request, *, nan: bool) -> Output:
    """Generate ``max_new_tokens`` tokens; ``nan``: every logit NaN, so id 0 and NaN logprobs every time."""
    count = max(request.sampling.max_new_tokens, 0)
    if nan:
        return Output(ids=(NAN_TOKEN_ID,) * count, logprobs=(None,) * count, nan=True)
    seed = "greedy" if request.sampling.greedy else f"seed{request.sampling.seed or next(_SEEDS)}"
    prompt_key = ",".join(str(i) for i in request.prompt_ids)
    ids = []
    logprobs = []
    for position in range(count):
        key = f"{seed}|{prompt_key}|{position}"
        ids.append(FIRST_WORD_ID + _draw(key, len(WORDS)))
        scale = 0.5 if request.sampling.greedy else 3.0
        logprobs.append(-round(0.01 + scale * _draw(key + "lp", 1000) / 1000, 6))
    return Output(ids=tuple(ids), logprobs=tuple(logprobs), nan=False)


def _triple(logprob: float | None, token_id: int, with_text: bool) -> list[Any]:
    return [logprob, token_id, token_text(token_id) if with_text else None]


def _top(logprob: float | None, token_id: int, n: int, with_text: bool) -> list[list[Any]]:
    entries = [_triple(logprob, token_id, with_text)]
    for rank in range(1, n):
        other = FIRST_WORD_ID + (token_id + rank * 7) % len(WORDS)
        entries.append(
            _triple(None if logprob is None else round(logprob - rank * 0.75, 6), other, with_text)
        )
    return entries


LOGPROBS = "<logprobs>"  # where the logprob fields go among the meta_info keys

#: 0.5.9's meta_info keys (``total_retractions``; no per-device cache details)
LEGACY_META_KEYS: tuple[str, ...] = (
    "id", "finish_reason", "prompt_tokens", "weight_version", "total_retractions", LOGPROBS,
    "completion_tokens", "cached_tokens", "cached_tokens_details", "e2e_latency",
    "response_sent_to_client_ts",
)  # fmt: skip
#: 0.5.23's: ``num_retractions``, reasoning tokens, weight_versions spans, cache details per device, dp_rank
MODERN_META_KEYS: tuple[str, ...] = (
    "id", "finish_reason", "prompt_tokens", "weight_version", "num_retractions", LOGPROBS,
    "reasoning_tokens", "completion_tokens", "cached_tokens", "weight_versions", "cached_tokens_details",
    "dp_rank", "e2e_latency", "response_sent_to_client_ts",
)  # fmt: skip


def meta_keys(version: tuple[int, ...]) -> tuple[str, ...]:
    """The ``meta_info`` keys of a non-streaming ``/generate``, in the version's order.

    As real SGLang 0.5.9 and 0.5.23 answered on the CPU (tests/standin/data/real/<version>/healthy.json).
    """
    return MODERN_META_KEYS if version >= (0, 5, 23) else LEGACY_META_KEYS


def generate_response(
    request: Request,
    output: Output,
    started: float,
    weight_version: str,
    version: tuple[int, ...] = (0, 5, 23),
) -> dict[str, Any]:
    """SGLang's non-streaming ``/generate`` body for one prompt."""
    now = time.time()
    modern = version >= (0, 5, 23)
    cached = cached_tokens(request)
    values: dict[str, Any] = {
        "id": request.rid,
        "finish_reason": {"type": "length", "length": len(output.ids)},
        "prompt_tokens": len(request.prompt_ids),
        "weight_version": weight_version,
        "total_retractions": 0,
        "num_retractions": 0,
        "reasoning_tokens": 0,
        "completion_tokens": len(output.ids),
        "cached_tokens": cached,
        "weight_versions": [{"version": weight_version, "start": 0, "end": len(output.ids)}],
        "cached_tokens_details": {"device": cached, "host": 0} if modern and cached else None,
        "dp_rank": None,
        "e2e_latency": round(now - started, 6),
        "response_sent_to_client_ts": now,
    }
    meta: dict[str, Any] = {}
    for key in meta_keys(version):
        if key == LOGPROBS:
            if request.return_logprob:
                meta.update(_logprob_fields(request, output, version))
        else:
            meta[key] = values[key]
    return {"text": detokenize(output.ids), "output_ids": list(output.ids), "meta_info": meta}


def cached_tokens(request: Request) -> int:
    """Prompt tokens the radix cache serves: the first one (every prompt starts like the warmup's), but
    never past ``logprob_start_len`` when input logprobs are asked (SGLang's prefix match stops there)."""
    cached = min(1, len(request.prompt_ids) - 1)
    if request.return_logprob and request.logprob_start_len >= 0:
        cached = min(cached, request.logprob_start_len)
    return max(cached, 0)


def _input_positions(request: Request, version: tuple[int, ...]) -> range:
    """The prompt positions ``input_token_logprobs`` covers (SGLang's ``logprob_start_len``)."""
    count = len(request.prompt_ids)
    start = request.logprob_start_len
    if start < 0:
        if version >= (0, 5, 23):
            return range(count, count)
        start = count - 1
    return range(min(start, count), count)


def _logprob_fields(request: Request, output: Output, version: tuple[int, ...]) -> dict[str, Any]:
    with_text = request.return_text_in_logprobs
    positions = _input_positions(request, version)
    prompt: list[tuple[float | None, int]] = []
    for index, position in enumerate(positions):
        token = request.prompt_ids[position]
        # the first position of the range has no logprob (nothing before it was scored); NaN is null
        logprob = None if index == 0 or output.nan else -round(1.0 + (token % 97) / 50, 6)
        prompt.append((logprob, token))
    fields: dict[str, Any] = {
        "input_token_logprobs": [_triple(lp, tid, with_text) for lp, tid in prompt],
        "output_token_logprobs": [
            _triple(lp, tid, with_text) for lp, tid in zip(output.logprobs, output.ids, strict=True)
        ],
    }
    if version >= (0, 5, 23):
        fields["output_token_logprobs_length"] = len(output.ids)
    if request.top_logprobs_num > 0:
        n = request.top_logprobs_num
        fields["input_top_logprobs"] = [_top(lp, tid, n, with_text) for lp, tid in prompt]
        fields["output_top_logprobs"] = [
            _top(lp, tid, n, with_text) for lp, tid in zip(output.logprobs, output.ids, strict=True)
        ]
    return fields


# --- request parsing ----------------------------------------------------------------------------------------


def parse_sampling(raw: Any) -> Sampling:
    if raw is None:
        return Sampling()
    if not isinstance(raw, Mapping):
        raise RequestError("sampling_params must be an object")
    try:
        max_new = raw.get("max_new_tokens")
        temperature = raw.get("temperature")
        top_k = raw.get("top_k")
        seed = raw.get("sampling_seed")
        return Sampling(
            max_new_tokens=128 if max_new is None else int(max_new),
            temperature=1.0 if temperature is None else float(temperature),
            top_k=-1 if top_k is None else int(top_k),
            seed=None if seed is None else int(seed),
        )
    except (TypeError, ValueError) as exc:
        raise RequestError(f"invalid sampling_params: {exc}") from None


def parse_generate(body: Mapping[str, Any]) -> tuple[list[Request], bool]:
    """The prompts of a ``/generate`` body and whether it was a batch."""
    prompts, batch = _prompts(body)
    count = len(prompts)
    sampling = _per_item(body.get("sampling_params"), count)
    logprob = _per_item(body.get("return_logprob", False), count)
    top_n = _per_item(body.get("top_logprobs_num", 0), count)
    rids = _per_item(body.get("rid"), count)
    starts = _per_item(body.get("logprob_start_len", -1), count)
    requests = [
        Request(
            prompt_ids=prompts[i],
            sampling=parse_sampling(sampling[i]),
            return_logprob=bool(logprob[i]),
            top_logprobs_num=int(top_n[i] or 0),
            return_text_in_logprobs=bool(body.get("return_text_in_logprobs", False)),
            rid=str(rids[i]) if rids[i] is not None else uuid.uuid4().hex,
            logprob_start_len=_start_len(starts[i]),
        )
        for i in range(count)
    ]
    return requests, batch


def _start_len(raw: Any) -> int:
    if raw is None:
        return -1
    if isinstance(raw, bool) or not isinstance(raw, int):
        raise RequestError("logprob_start_len must be an integer")
    return raw


def _prompts(body: Mapping[str, Any]) -> tuple[list[tuple[int, ...]], bool]:
    text = body.get("text")
    input_ids = body.get("input_ids")
    if text is None and input_ids is None:
        # tokenizer_manager / io_struct normalisation message (0.5.9 and 0.5.23 wheels)
        raise RequestError("Either text, input_ids or input_embeds should be provided.")
    if text is not None:
        if isinstance(text, str):
            return [word_ids(text)], False
        if isinstance(text, list) and text and all(isinstance(t, str) for t in text):
            return [word_ids(t) for t in text], True
        raise RequestError("text must be a string or a non-empty list of strings")
    if isinstance(input_ids, list) and input_ids and all(isinstance(i, int) for i in input_ids):
        return [tuple(input_ids)], False
    if isinstance(input_ids, list) and input_ids and all(isinstance(i, list) and i for i in input_ids):
        return [tuple(int(x) for x in ids) for ids in input_ids], True
    raise RequestError("input_ids must be a non-empty list of token ids or of lists of token ids")


def _per_item(value: Any, count: int) -> list[Any]:
    if isinstance(value, list):
        if len(value) != count:
            raise RequestError(f"expected {count} values, got {len(value)}")
        return value
    return [value] * count


# --- OpenAI chat --------------------------------------------------------------------------------------------


def parse_chat(body: Mapping[str, Any]) -> tuple[Request, int, int]:
    """(request, n choices, top_logprobs) for ``/v1/chat/completions``."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise RequestError("messages must be a non-empty list")
    parts = []
    for message in messages:
        content = message.get("content") if isinstance(message, Mapping) else None
        if isinstance(content, list):
            content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
        parts.append(str(content or ""))
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    sampling = parse_sampling(
        {
            "max_new_tokens": max_tokens,
            "temperature": body.get("temperature"),
            "top_k": body.get("top_k"),
            "sampling_seed": body.get("seed"),
        }
    )
    top = int(body.get("top_logprobs") or 0)
    request = Request(
        prompt_ids=word_ids(" ".join(parts)), sampling=sampling, return_logprob=bool(body.get("logprobs"))
    )
    return request, int(body.get("n") or 1), top


def chat_response(
    model: str, request: Request, outputs: Sequence[Output], top: int, weight_version: str
) -> dict[str, Any]:
    """SGLang's ``ChatCompletionResponse`` (entrypoints/openai/protocol.py of the 0.5.9 wheel)."""
    choices = []
    for index, output in enumerate(outputs):
        logprobs = None
        if request.return_logprob:
            logprobs = {
                "content": [
                    _chat_logprob(tid, lp, top) for tid, lp in zip(output.ids, output.logprobs, strict=True)
                ]
            }
        choices.append(
            {
                "index": index,
                "message": {
                    "role": "assistant",
                    "content": detokenize(output.ids),
                    "reasoning_content": None,
                    "tool_calls": None,
                },
                "logprobs": logprobs,
                "finish_reason": "length",
                "matched_stop": None,
            }
        )
    completion = sum(len(o.ids) for o in outputs)
    prompt = len(request.prompt_ids)
    return {
        "id": uuid.uuid4().hex,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": choices,
        "usage": {
            "prompt_tokens": prompt,
            "total_tokens": prompt + completion,
            "completion_tokens": completion,
            "prompt_tokens_details": None,
            "reasoning_tokens": 0,
        },
        "metadata": {"weight_version": weight_version},
    }


def _chat_logprob(token_id: int, logprob: float | None, top: int) -> dict[str, Any]:
    text = token_text(token_id)
    tops = (
        [
            {"token": token_text(t[1]), "bytes": list(token_text(t[1]).encode("utf-8")), "logprob": t[0]}
            for t in _top(logprob, token_id, top, False)
        ]
        if top > 0
        else []
    )
    return {"token": text, "bytes": list(text.encode("utf-8")), "logprob": logprob, "top_logprobs": tops}
