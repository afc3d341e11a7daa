"""``bwstack compare``'s output: the report as text lines and as JSON (``--json``). No I/O."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bwstack.quality.compare import Report
from bwstack.quality.divergence import PromptStats
from bwstack.quality.recorded import Answers
from bwstack.quality.retrieval import Accuracy


def _side(facts: dict[str, Any]) -> str:
    return f"{facts['label']} (SGLang {facts['sglang'] or '?'})"


def _prompt(p: PromptStats, limit: float) -> dict[str, Any]:
    return {
        "id": p.id,
        "length": p.length,
        "distance": p.distance,
        "positions": len(p.kls),
        "mean_kl": round(p.mean_kl, 6),
        "max_kl": round(max(p.kls, default=0.0), 6),
        "top1_agreement": round(p.top1, 6),
        "score_a": round(p.score_a, 4),
        "score_b": round(p.score_b, 4),
        "first_position_over_p99_threshold": p.first_over(limit),
    }


def _accuracy(r: Accuracy) -> dict[str, Any]:
    return {"length": r.length, "right": r.right, "asked": r.asked, "accuracy": round(r.accuracy, 4)}


def to_json(report: Report) -> dict[str, Any]:
    s, t = report.summary, report.thresholds
    limit = t.max_p99_kl
    return {
        "a": report.a,
        "b": report.b,
        "top_k": report.top_k,
        "positions": s.positions,
        "mean_kl": round(s.mean_kl, 6),
        "p99_kl": round(s.p99_kl, 6),
        "max_kl": round(s.max_kl, 6),
        "top1_agreement": round(s.top1, 6),
        "thresholds": {"max_mean_kl": t.max_mean_kl, "max_p99_kl": t.max_p99_kl, "min_top1": t.min_top1},
        "passed": not report.failures,
        "failures": report.failures,
        "prompts": [_prompt(p, limit) for p in report.prompts],
        "worst": [p.id for p in report.worst()],
        "retrieval": {key: [_accuracy(r) for r in rows] for key, rows in report.retrieval.items()},
        "seconds": round(report.seconds, 1),
    }


def lines(report: Report) -> list[str]:
    s, t = report.summary, report.thresholds
    out = [
        f"compare A = {_side(report.a)}, B = {_side(report.b)}: {len(report.prompts)} prompts, {s.positions} "
        f"teacher-forced positions, top-{report.top_k} logprobs",
        f"KL(A||B) mean {s.mean_kl:.4g}, p99 {s.p99_kl:.4g}, max {s.max_kl:.4g} nats; top-1 agreement "
        f"{s.top1:.2%}",
        f"{'prompt':<14} {'tokens':>6} {'copy from':>9} {'mean KL':>9} {'max KL':>9} {'top-1':>7} "
        f"{'score A':>8} {'score B':>8}",
    ]
    for p in report.prompts:
        out.append(
            f"{p.id:<14} {p.length:>6} {p.distance:>9} {p.mean_kl:>9.4g} {max(p.kls, default=0.0):>9.4g} "
            f"{p.top1:>7.1%} {p.score_a:>8.3f} {p.score_b:>8.3f}"
        )
    worst = report.worst()
    if worst:
        where = [f"{p.id} ({p.mean_kl:.4g}" + (f", from position {pos}" if (pos := p.first_over(
            t.max_p99_kl)) is not None else "") + ")" for p in worst]  # fmt: skip
        out.append("worst prompts: " + ", ".join(where))
    if report.retrieval:
        lengths = [r.length for r in next(iter(report.retrieval.values()))]
        out.append("needle retrieval accuracy by length: " + " ".join(f"{n:>7}" for n in lengths))
        for key, facts in (("a", report.a), ("b", report.b)):
            rows = report.retrieval.get(key, [])
            cells = " ".join(f"{r.right:>3}/{r.asked:<3}" for r in rows)
            out.append(f"  {key.upper()} {facts['label']:<30.30} {cells}")
    thresholds = (f"thresholds: mean KL <= {t.max_mean_kl:g}, p99 KL <= {t.max_p99_kl:g}, top-1 >= "
                  f"{t.min_top1:.0%}")  # fmt: skip
    failures = report.failures
    out.append(f"{'DIVERGES' if failures else 'within'} ({thresholds}" + (f": {'; '.join(failures)})"
               if failures else ")") + f" in {report.seconds:.0f} s")  # fmt: skip
    return out


def recorded_line(answers: Answers, path: Path) -> str:
    """What ``compare A --save-a FILE`` prints: what it kept, and where."""
    positions = sum(len(p.positions) for p in answers.prompts)
    found = ", ".join(f"{r.right}/{r.asked} at {r.length}" for r in answers.retrieval) or "not asked"
    return (f"recorded A = {_side(answers.facts)}: {len(answers.prompts)} prompts, {positions} positions, "
            f"top-{answers.top_k} logprobs; needle retrieval {found}; in {path}")  # fmt: skip
