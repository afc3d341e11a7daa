"""``bwstack compare``: the seeded prompt set through two running servers over HTTP, teacher-forced, and the
report (KL divergence, top-1 agreement, the worst prompts, retrieval accuracy by length, the verdict against
the documented thresholds). The math is in :mod:`divergence`, the prompts in :mod:`prompts` and
:mod:`retrieval`.

Each prompt goes to SGLang's native ``/generate`` as ``input_ids`` with ``return_logprob``,
``logprob_start_len`` (the continuation's first position, less one) and ``top_logprobs_num``: one prefill,
the same tokens scored on both sides. Read from SGLang 0.5.9 and 0.5.23 (``meta_info.input_token_logprobs``:
``[logprob, id, text]`` per position from ``logprob_start_len``, the first ``null``;
``meta_info.input_top_logprobs``: ``null`` or a list of ``[logprob, id, text]`` per position).
"""

from __future__ import annotations

import json
import math
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bwstack.errors import ExternalError
from bwstack.quality import divergence, prompts, recorded, retrieval
from healthchecks import untrusted

#: top-k logprobs asked per position (SGLang returns at most this many)
TOP_K = 20
TIMEOUT = 300.0
#: the worst prompts the report names
WORST = 3
#: the documented gate (docs/compare.md): past any of these, ``bwstack compare`` exits 1
MAX_MEAN_KL = 0.01
MAX_P99_KL = 0.1
MIN_TOP1 = 0.98
_LIMITS = untrusted.Limits(max_bytes=64 * untrusted.MIB, max_values=4_000_000, allow_nan=True)


@dataclass(frozen=True)
class Side:
    """One running server: its label (the profile, or profile@variant), base URL, API key (or None)."""

    label: str
    url: str
    api_key: str | None = None


@dataclass(frozen=True)
class Thresholds:
    max_mean_kl: float = MAX_MEAN_KL
    max_p99_kl: float = MAX_P99_KL
    min_top1: float = MIN_TOP1


@dataclass
class Report:
    a: dict[str, Any]
    b: dict[str, Any]
    top_k: int
    prompts: list[divergence.PromptStats]
    summary: divergence.Summary
    thresholds: Thresholds
    #: the needle task's accuracy by length, per side (``a``, ``b``)
    retrieval: dict[str, list[retrieval.Accuracy]] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def failures(self) -> list[str]:
        s, t = self.summary, self.thresholds
        out = []
        if s.mean_kl > t.max_mean_kl:
            out.append(f"mean KL {s.mean_kl:.4g} > {t.max_mean_kl:g}")
        if s.p99_kl > t.max_p99_kl:
            out.append(f"p99 KL {s.p99_kl:.4g} > {t.max_p99_kl:g}")
        if s.top1 < t.min_top1:
            out.append(f"top-1 agreement {s.top1:.2%} < {t.min_top1:.0%}")
        return out

    def worst(self, count: int = WORST) -> list[divergence.PromptStats]:
        ranked = sorted(self.prompts, key=lambda p: (-p.mean_kl, p.id))
        return [p for p in ranked[:count] if p.mean_kl > 0]


def _call(side: Side, path: str, body: dict[str, Any] | None, timeout: float) -> Any:
    """GET (body None) or POST JSON to the side's server; its JSON answer, or ExternalError (one line)."""
    headers = {"Content-Type": "application/json"}
    if side.api_key:
        headers["Authorization"] = f"Bearer {side.api_key}"
    data = json.dumps(body).encode() if body is not None else None
    url = side.url.rstrip("/") + path  # http(s) only: the command checks --url-a/--url-b
    request = urllib.request.Request(url, data=data, headers=headers)  # noqa: S310
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
            return untrusted.loads(response.read(_LIMITS.max_bytes + 1), _LIMITS)
    except urllib.error.HTTPError as exc:
        raise ExternalError(f"{side.label}: {path} answered HTTP {exc.code}") from None
    except (OSError, untrusted.Refused) as exc:
        raise ExternalError(f"{side.label}: {path} failed: {exc} (is the server up at that URL?)") from None


def server_facts(side: Side, timeout: float = 30.0) -> dict[str, Any]:
    """The side's SGLang version, model path and the longest prompt it takes (``max_model_len``, capped by
    ``--max-total-tokens``; None when not answered)."""
    out: dict[str, Any] = {"label": side.label, "sglang": None, "model_path": None, "context": None}
    models = _call(side, "/v1/models", None, timeout)
    cards = models.get("data") if isinstance(models, dict) else None
    if isinstance(cards, list) and cards and isinstance(cards[0], dict):
        context = cards[0].get("max_model_len")
        out["context"] = context if isinstance(context, int) and context > 0 else None
        out["model_path"] = cards[0].get("id") if isinstance(cards[0].get("id"), str) else None
    try:
        info = _call(side, "/get_server_info", None, timeout)
        out["sglang"] = info.get("version") if isinstance(info, dict) else None
        pool = info.get("max_total_tokens") if isinstance(info, dict) else None
        if isinstance(pool, int) and pool > 0:  # --max-total-tokens: a longer prompt is refused (HTTP 400)
            out["context"] = min(out["context"] or pool, pool)
    except ExternalError:
        pass
    return out


def _entry(value: Any, what: str) -> tuple[int, float] | None:
    """(id, logprob) of a ``[logprob, id, text]`` entry; None for ``null`` or a ``null`` logprob;
    ExternalError when malformed or not finite (a broken server's NaN is the fault, not a number to
    average)."""
    if value is None or (isinstance(value, list) and value and value[0] is None):
        return None  # the first position of the range: nothing precedes it
    if not (isinstance(value, list) and len(value) >= 2 and isinstance(value[1], int)):
        raise ExternalError(f"{what}: malformed logprob entry {str(value)[:80]}")
    if not isinstance(value[0], (int, float)) or not math.isfinite(value[0]):
        raise ExternalError(f"{what}: non-finite logprob {value[0]!r} for token {value[1]}")
    return value[1], float(value[0])


def teacher_forced(
    side: Side, prompt: prompts.Prompt, top_k: int = TOP_K, timeout: float = TIMEOUT
) -> list[tuple[int, float, dict[int, float]]]:
    """The continuation's positions: (position, the token's logprob, top-k {id: logprob}) from one prefill."""
    first = prompt.start - 1
    body: dict[str, Any] = (
        {"text": prompt.text} if prompt.text is not None else {"input_ids": list(prompt.ids)}
    )
    body |= {
        "sampling_params": {"temperature": 0.0, "max_new_tokens": 1},
        "return_logprob": True,
        "logprob_start_len": first,
        "top_logprobs_num": top_k,
    }
    meta = _call(side, "/generate", body, timeout)
    meta = meta.get("meta_info") if isinstance(meta, dict) else None
    tokens = meta.get("input_token_logprobs") if isinstance(meta, dict) else None
    tops = meta.get("input_top_logprobs") if isinstance(meta, dict) else None
    if not isinstance(tokens, list) or not isinstance(tops, list):
        raise ExternalError(f"{side.label}: {prompt.id}: no prompt logprobs in the answer")
    out: list[tuple[int, float, dict[int, float]]] = []
    for i, (token, top) in enumerate(zip(tokens, tops, strict=False)):
        pos = first + i
        what = f"{side.label}: {prompt.id} position {pos}"
        scored = _entry(token, what)
        if pos < prompt.start or scored is None or not isinstance(top, list):
            continue
        listed = dict(e for e in (_entry(x, what) for x in top) if e is not None)
        out.append((pos, scored[1], listed))
    if not out:
        raise ExternalError(f"{side.label}: {prompt.id}: the answer scored none of the continuation")
    return out


def next_token(side: Side, ids: tuple[int, ...], timeout: float = TIMEOUT) -> int | None:
    """The greedy next token after ``ids`` (one prefill, one token)."""
    body = {
        "input_ids": list(ids),
        "sampling_params": {"temperature": 0.0, "max_new_tokens": 1},
        "return_logprob": True,
        "logprob_start_len": len(ids) - 1,
    }
    answer = _call(side, "/generate", body, timeout)
    meta = answer.get("meta_info") if isinstance(answer, dict) else None
    out = meta.get("output_token_logprobs") if isinstance(meta, dict) else None
    if isinstance(out, list) and out and isinstance(out[0], list) and len(out[0]) >= 2:
        return out[0][1] if isinstance(out[0][1], int) else None
    return None


def retrieval_accuracy(side: Side, lengths: list[int], timeout: float = TIMEOUT) -> list[retrieval.Accuracy]:
    """The needle task's accuracy at each length."""
    out = []
    for length in lengths:
        answers = [(n, next_token(side, n.ids, timeout)) for n in retrieval.needles(length)]
        out.append(retrieval.score(length, answers))
    return out


def record(
    side: Side,
    *,
    window: int | None,
    context: int | None = None,
    top_k: int = TOP_K,
    with_retrieval: bool = True,
    echo: Callable[[str], None] = lambda _m: None,
    timeout: float = TIMEOUT,
    facts: dict[str, Any] | None = None,
) -> recorded.Answers:
    """One server's answers on the seeded prompt set (and the needle task): what :func:`score` compares.
    ``context`` caps the prompts' lengths (default: the server's own)."""
    facts = facts or server_facts(side)
    context = context or facts["context"]
    answers = recorded.Answers(facts, window, top_k)
    for prompt in prompts.prompt_set(window, context):
        if prompt.text is not None:
            echo(f"{side.label}: {prompt.id}: text, scored from its second token")
        else:
            echo(f"{side.label}: {prompt.id}: {prompt.length} tokens, continuation from {prompt.start}")
        scored = teacher_forced(side, prompt, top_k, timeout)
        length = prompt.length or scored[-1][0] + 1
        answers.prompts.append(recorded.PromptAnswers(prompt.id, length, prompt.distance, scored))
    if with_retrieval:
        lengths = retrieval.lengths_for(window, context)
        echo(f"{side.label}: needle retrieval at {', '.join(map(str, lengths))} tokens")
        answers.retrieval = retrieval_accuracy(side, lengths, timeout)
    return answers


def score(a: recorded.Answers, b: recorded.Answers, thresholds: Thresholds | None = None) -> Report:
    """Compare two sides' answers on the prompts both answered (matched by id: the same seeded tokens)."""
    at_b = {p.id: p for p in b.prompts}
    stats = [
        divergence.compare_prompt(p.id, p.length, p.distance, p.positions, at_b[p.id].positions)
        for p in a.prompts
        if p.id in at_b
    ]
    report = Report(
        a.facts,
        b.facts,
        min(a.top_k, b.top_k),
        stats,
        divergence.summarize(stats),
        thresholds or Thresholds(),
    )
    report.retrieval = {key: side.retrieval for key, side in (("a", a), ("b", b)) if side.retrieval}
    return report


def run(
    a: Side | recorded.Answers,
    b: Side,
    *,
    window: int | None,
    top_k: int = TOP_K,
    thresholds: Thresholds | None = None,
    with_retrieval: bool = True,
    echo: Callable[[str], None] = lambda _m: None,
    timeout: float = TIMEOUT,
    save_a: Callable[[recorded.Answers], None] | None = None,
) -> Report:
    """Compare two running servers on the seeded prompt set (and the needle task on each); or B against A's
    recorded answers (``a`` an :class:`recorded.Answers`, the prompts made for A's window and context)."""
    started = time.monotonic()
    facts_a = a.facts if isinstance(a, recorded.Answers) else server_facts(a)
    facts_b = server_facts(b)
    if isinstance(a, recorded.Answers):
        answers_a = a
        window = a.window
        context = min((c for c in (a.facts.get("context"), facts_b["context"]) if c), default=None)
    else:
        context = min((c for c in (facts_a["context"], facts_b["context"]) if c), default=None)
        answers_a = record(a, window=window, context=context, top_k=top_k, with_retrieval=with_retrieval,
                           echo=echo, timeout=timeout, facts=facts_a)  # fmt: skip
        if save_a is not None:
            save_a(answers_a)
    answers_b = record(b, window=window, context=context, top_k=answers_a.top_k,
                       with_retrieval=with_retrieval, echo=echo, timeout=timeout, facts=facts_b)  # fmt: skip
    report = score(answers_a, answers_b, thresholds)
    report.seconds = time.monotonic() - started
    return report
