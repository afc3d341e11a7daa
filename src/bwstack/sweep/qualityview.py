"""The matrix's quality table (``sweep --compare-to`` / ``--retrieval``): each measured row's needle
retrieval accuracy by prompt length and its comparison with the reference profile, for matrix.md and
matrix.html. No I/O."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bwstack.record.types import Document


def _figure(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, (int, float)) and not isinstance(value, bool) else "-"


def table(doc: Document) -> dict[str, Any] | None:
    """The table: ``reference`` (or None), ``lengths`` (every length measured), ``rows`` (profile, the
    ``right/asked`` cell per length, the comparison's figures and verdict); None when no row was measured."""
    measured = [
        (name, row["quality"])
        for name, row in doc["results"].items()
        if isinstance(row.get("quality"), Mapping)
    ]
    if not measured:
        return None
    lengths = sorted({r["length"] for _n, q in measured for r in q.get("retrieval") or []})
    rows = []
    for name, q in measured:
        found = {r["length"]: f"{r['right']}/{r['asked']}" for r in q.get("retrieval") or []}
        vs = q.get("compare")
        row: dict[str, Any] = {
            "profile": name,
            "cells": [found.get(length, "-") for length in lengths],
            "reference": q.get("reference") is True,
            "note": q.get("note") or "",
            "compare": None,
        }
        if isinstance(vs, Mapping):
            row["compare"] = {
                "mean_kl": _figure(vs.get("mean_kl")),
                "p99_kl": _figure(vs.get("p99_kl")),
                "top1": f"{vs['top1_agreement']:.2%}" if isinstance(vs.get("top1_agreement"), float) else "-",
                "verdict": "within" if vs.get("passed") else "DIVERGES",
                "failures": "; ".join(vs.get("failures") or []),
            }
        rows.append(row)
    return {"reference": doc["mode"].get("compare_to"), "lengths": lengths, "rows": rows}


def _versus(row: Mapping[str, Any]) -> list[str]:
    vs = row["compare"]
    if row["reference"]:
        return ["reference", "", "", ""]
    if vs is None:
        return ["-", "-", "-", row["note"] or "not compared"]
    return [vs["mean_kl"], vs["p99_kl"], vs["top1"], vs["verdict"]]


def markdown(doc: Document) -> list[str]:
    """matrix.md's section (empty when no row was measured)."""
    shown = table(doc)
    if shown is None:
        return []
    reference = shown["reference"]
    out = ["", "## Quality: retrieval by length" + (f", compared with {reference}" if reference else ""), ""]
    out.append(
        "| profile | " + " | ".join(f"retrieval @{n}" for n in shown["lengths"])
        + " | mean KL | p99 KL | top-1 | verdict |"
    )  # fmt: skip
    out.append("| --- |" + " --- |" * (len(shown["lengths"]) + 4))
    for row in shown["rows"]:
        cells = " | ".join([*row["cells"], *_versus(row)])
        out.append(f"| [{row['profile']}](#evidence-{row['profile']}) | {cells} |")
    return out


def html_rows(doc: Document) -> dict[str, Any] | None:
    """matrix.html's table: :func:`table` with each row's comparison cells as text."""
    shown = table(doc)
    if shown is None:
        return None
    for row in shown["rows"]:
        row["versus"] = _versus(row)
    return shown


def retrieval_words(quality: Any) -> str:
    """A row's retrieval by length in words (``8/8 at 1024, 4/8 at 2048``); empty when not measured."""
    rows = quality.get("retrieval") if isinstance(quality, Mapping) else None
    if not isinstance(rows, list):
        return ""
    return ", ".join(
        f"{r['right']}/{r['asked']} at {r['length']}"
        for r in rows
        if isinstance(r, Mapping) and all(isinstance(r.get(k), int) for k in ("right", "asked", "length"))
    )


def retrieval_falls(quality: Any) -> str | None:
    """The row's retrieval fact: "retrieval falls with length: ..." when the accuracy at its longest length
    is below the accuracy at its shortest (needles past a window the profile cannot see); None when it holds
    or was not measured. ``up``'s choice ranks such a profile after the ones that hold, like the long-context
    fact."""
    rows = quality.get("retrieval") if isinstance(quality, Mapping) else None
    if not isinstance(rows, list):
        return None
    usable = [
        r for r in rows
        if isinstance(r, Mapping) and all(isinstance(r.get(k), int) and not isinstance(r.get(k), bool)
                                          for k in ("right", "asked", "length")) and r["asked"] > 0
    ]  # fmt: skip
    if len(usable) < 2:
        return None
    usable.sort(key=lambda r: r["length"])
    short, long = usable[0], usable[-1]
    if long["right"] / long["asked"] >= short["right"] / short["asked"]:
        return None
    return f"retrieval falls with length: {retrieval_words({'retrieval': usable})}"
