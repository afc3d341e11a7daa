"""The sweep's quality step (``--compare-to PROFILE``, ``--retrieval``): while a healthy profile's server is
still up, its answers on the comparison's seeded prompts are recorded (:mod:`bwstack.quality.compare`) to
``quality/<profile>.json`` in the report folder, its needle retrieval accuracy by length goes into the row,
and, with ``--compare-to``, the row is scored against the reference profile's recorded answers. The sweep
runs one profile at a time, so the reference runs first and its file stands in for its server.

A failed measurement never costs the verdict: the row's ``quality`` then holds a ``note``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bwstack.errors import ExternalError, UserError
from bwstack.quality import compare, recorded
from bwstack.quality.retrieval import Accuracy
from bwstack.record.types import Comparison, Quality, RetrievalAt
from bwstack.stack import modelconfig
from bwstack.stack.schema import Stack

#: the report folder's sub-folder of recorded answers
FOLDER = "quality"


def ordered(names: Sequence[str], compare_to: str | None) -> list[str]:
    """The profiles to run, the reference first (its answers are what every other row is scored against)."""
    return sorted(names, key=lambda name: name != compare_to) if compare_to else list(names)


def retrieval_rows(found: Sequence[Accuracy]) -> list[RetrievalAt]:
    return [
        {"length": r.length, "right": r.right, "asked": r.asked, "accuracy": round(r.accuracy, 4)}
        for r in found
    ]


def comparison(report: compare.Report, to: str) -> Comparison:
    s = report.summary
    return {
        "to": to,
        "positions": s.positions,
        "mean_kl": round(s.mean_kl, 6),
        "p99_kl": round(s.p99_kl, 6),
        "max_kl": round(s.max_kl, 6),
        "top1_agreement": round(s.top1, 6),
        "passed": not report.failures,
        "failures": report.failures,
        "worst": [p.id for p in report.worst()],
    }


@dataclass(frozen=True)
class Step:
    """The quality step of one sweep: the stack, the report folder, the reference profile (or None)."""

    stack: Stack
    out: Path
    compare_to: str | None

    def answers_path(self, name: str) -> Path:
        return self.out / FOLDER / f"{name}.json"

    def measure(self, name: str, url: str, api_key: str | None) -> Quality:
        """Record ``name``'s answers from its running server at ``url`` and score them (see the module)."""
        window = modelconfig.sparse_window(self.stack)
        row: Quality = {"window": window, "retrieval": [], "answers": None}
        try:
            answers = compare.record(compare.Side(name, url, api_key), window=window)
            path = self.answers_path(name)
            path.parent.mkdir(parents=True, exist_ok=True)
            recorded.save(path, answers)
        except (ExternalError, OSError) as exc:
            row["note"] = f"not measured: {' '.join(str(exc).split())[:300]}"
            return row
        row["retrieval"] = retrieval_rows(answers.retrieval)
        row["answers"] = f"{FOLDER}/{name}.json"
        if name == self.compare_to:
            row["reference"] = True
        if self.compare_to is None or name == self.compare_to:
            return row
        reference = self.answers_path(self.compare_to)
        if not reference.is_file():
            row["compare"] = None
            row["note"] = (
                f"no comparison: the reference {self.compare_to} has no recorded answers (not healthy)"
            )
            return row
        try:
            report = compare.score(recorded.load(reference, option="--compare-to"), answers)
        except UserError as exc:
            row["compare"] = None
            row["note"] = f"no comparison: {exc.render()}"
            return row
        row["compare"] = comparison(report, self.compare_to)
        return row


def words(quality: Quality) -> str:
    """One line for the sweep's display: retrieval by length and the comparison's verdict."""
    found = " ".join(f"{r['right']}/{r['asked']}@{r['length']}" for r in quality.get("retrieval") or [])
    out = f"retrieval {found}" if found else "no retrieval"
    vs = quality.get("compare")
    if quality.get("reference"):
        out += "; the reference"
    if vs:
        verdict = "within" if vs["passed"] else "DIVERGES"
        out += (f"; vs {vs['to']}: mean KL {vs['mean_kl']:.4g}, p99 {vs['p99_kl']:.4g}, top-1 "
                f"{vs['top1_agreement']:.1%}, {verdict}")  # fmt: skip
    note = quality.get("note")
    return out + (f" ({note})" if note else "")
