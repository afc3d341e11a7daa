"""One side's answers on the seeded prompt set, kept: what ``compare`` records of a server (its facts, the
teacher-forced top-k logprobs of every prompt, its needle retrieval accuracy) and scores another server
against later. The sweep records its reference profile this way while that profile runs, then scores each
other profile against the file (the sweep runs one profile at a time, never two at once).

The file (``--save-a``, the sweep's ``quality/<profile>.json``) is JSON: ``format`` ``bwstack-answers``,
``format_version`` 1, ``facts``, ``window``, ``top_k``, ``prompts`` (``id``, ``length``, ``distance``,
``positions``: ``[position, logprob, [[id, logprob], ...]]`` each) and ``retrieval`` (``length``, ``right``,
``asked``). It is read as untrusted input (:mod:`healthchecks.untrusted`); a malformed one is a one-line
UserError naming the file and the field.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bwstack.errors import UserError
from bwstack.files import atomic_write, read_json
from bwstack.quality.retrieval import Accuracy
from healthchecks import untrusted

FORMAT = "bwstack-answers"
FORMAT_VERSION = 1
_LIMITS = untrusted.Limits(max_bytes=64 * untrusted.MIB, max_values=8_000_000)

#: one scored position: (position, the token's logprob, top-k {id: logprob})
Scored = tuple[int, float, dict[int, float]]


@dataclass(frozen=True)
class PromptAnswers:
    """One prompt's teacher-forced answers."""

    id: str
    length: int
    distance: int
    positions: list[Scored]


@dataclass
class Answers:
    """One server's answers on the prompt set: its facts (label, SGLang, model path, context), the window the
    prompts were made for, the top-k asked, the prompts' answers and the needle task's accuracy by length."""

    facts: dict[str, Any]
    window: int | None
    top_k: int
    prompts: list[PromptAnswers] = field(default_factory=list)
    retrieval: list[Accuracy] = field(default_factory=list)


def to_json(answers: Answers) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "facts": answers.facts,
        "window": answers.window,
        "top_k": answers.top_k,
        "prompts": [
            {
                "id": p.id,
                "length": p.length,
                "distance": p.distance,
                "positions": [[pos, lp, [[t, v] for t, v in top.items()]] for pos, lp, top in p.positions],
            }
            for p in answers.prompts
        ],
        "retrieval": [{"length": r.length, "right": r.right, "asked": r.asked} for r in answers.retrieval],
    }


def save(path: Path, answers: Answers) -> None:
    """Write the answers (atomically)."""
    atomic_write(path, json.dumps(to_json(answers), separators=(",", ":")) + "\n")


class _Bad(ValueError):
    """A field of the file is not what it must be (its path in the document, what is valid)."""


def _int(value: Any, where: str, low: int = 0) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        raise _Bad(f"{where}: must be an integer >= {low}")
    return value


def _logprob(value: Any, where: str) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        raise _Bad(f"{where}: must be a finite logprob")
    return float(value)


def _list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise _Bad(f"{where}: must be a list")
    return value


def _position(entry: Any, where: str) -> Scored:
    entry = _list(entry, where)
    if len(entry) != 3:
        raise _Bad(f"{where}: must be [position, logprob, [[id, logprob], ...]]")
    top: dict[int, float] = {}
    for k, item in enumerate(_list(entry[2], f"{where}[2]")):
        pair = _list(item, f"{where}[2][{k}]")
        if len(pair) != 2:
            raise _Bad(f"{where}[2][{k}]: must be [id, logprob]")
        top[_int(pair[0], f"{where}[2][{k}][0]")] = _logprob(pair[1], f"{where}[2][{k}][1]")
    return _int(entry[0], f"{where}[0]"), _logprob(entry[1], f"{where}[1]"), top


def from_json(doc: Any) -> Answers:
    """The answers of a parsed file; ``_Bad`` names the first field that is wrong."""
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise _Bad(f"format: must be {FORMAT!r} (a file written by compare --save-a or a sweep)")
    if doc.get("format_version") != FORMAT_VERSION:
        raise _Bad(f"format_version: must be {FORMAT_VERSION}")
    facts = doc.get("facts")
    if not isinstance(facts, dict) or not isinstance(facts.get("label"), str):
        raise _Bad("facts: must be an object with a label")
    window = doc.get("window")
    answers = Answers(
        facts={k: facts.get(k) for k in ("label", "sglang", "model_path", "context")},
        window=None if window is None else _int(window, "window", 1),
        top_k=_int(doc.get("top_k"), "top_k", 1),
    )
    for i, p in enumerate(_list(doc.get("prompts"), "prompts")):
        where = f"prompts[{i}]"
        if not isinstance(p, dict) or not isinstance(p.get("id"), str):
            raise _Bad(f"{where}.id: must be a string")
        positions = [
            _position(e, f"{where}.positions[{j}]")
            for j, e in enumerate(_list(p.get("positions"), f"{where}.positions"))
        ]
        length = _int(p.get("length"), f"{where}.length")
        answers.prompts.append(
            PromptAnswers(p["id"], length, _int(p.get("distance"), f"{where}.distance"), positions)
        )
    for i, r in enumerate(_list(doc.get("retrieval"), "retrieval")):
        where = f"retrieval[{i}]"
        if not isinstance(r, dict):
            raise _Bad(f"{where}: must be an object")
        asked = _int(r.get("asked"), f"{where}.asked")
        right = _int(r.get("right"), f"{where}.right")
        if right > asked:
            raise _Bad(f"{where}.right: must be at most asked ({asked})")
        answers.retrieval.append(Accuracy(_int(r.get("length"), f"{where}.length", 1), right, asked))
    return answers


def load(path: Path, option: str = "--a-from") -> Answers:
    """The answers in ``path``; UserError (exit 2, one line naming the file and the field) when it is missing,
    too large or malformed."""
    try:
        doc = read_json(path, "recorded answers", _LIMITS)
    except FileNotFoundError:
        raise UserError("no such file", file=path, field=option) from None
    try:
        return from_json(doc)
    except _Bad as exc:
        raise UserError(f"not a recording of answers: {exc}", file=path) from None
