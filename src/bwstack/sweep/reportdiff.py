"""``bwstack report diff OLD NEW``: what changed between two sweeps (e.g. an image upgrade), as a CI gate.

Profiles are matched by name. A profile is listed when its verdict changed, when OLD decided it and NEW did
not, or when only NEW has it. Each change is one of:

- ``regression``: the verdict got worse: from ``healthy`` to anything else, or from one failure class to one
  of a higher tier of :data:`healthchecks.signatures.SEVERITY` (refuses to start < crashes, hangs or runs
  other backends < serves wrong output); also a profile healthy in OLD that NEW did not decide;
- ``improvement``: to a lower tier (e.g. ``unsupported_arch`` -> ``healthy``);
- ``changed``: another class of the same tier (e.g. ``assertion`` -> ``crash``), or a failing profile NEW did
  not decide;
- ``added``: only in NEW.

Exit status: 1 when there is at least one regression, 0 otherwise, 2 for unreadable input.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bwstack import record, textlayout
from bwstack.errors import UserError
from bwstack.record import read
from bwstack.record.types import Row
from bwstack.sweep import report
from healthchecks import signatures

#: the tier of a class missing from the catalog (a newer report): treated as a crash
_UNKNOWN_TIER = 2


def severity(verdict: str | None) -> int:
    """The tier of a verdict (0 healthy .. 3 wrong output)."""
    return signatures.SEVERITY.get(str(verdict), _UNKNOWN_TIER)


def load(path: Path) -> report.Document:
    """A results.json, or the report folder holding one; UserError (exit 2) when there is none."""

    file = path / record.RESULTS_FILE if path.is_dir() else path
    if not file.is_file():
        raise UserError(f"no sweep results here (expected a {record.RESULTS_FILE} or its folder)", file=file)
    return read.load(file)


def change_kind(old: str | None, new: str | None) -> str | None:
    """How a verdict change ranks (module docstring): regression, improvement, changed, added, or None."""
    if old is None:
        return "added"
    if new is None:
        return "regression" if old == "healthy" else "changed"
    if old == new:
        return None
    if severity(new) > severity(old):
        return "regression"
    if severity(new) < severity(old):
        return "improvement"
    return "changed"


def diff(old: report.Document, new: report.Document) -> dict[str, Any]:
    """The changes, in the order of NEW's plan (then what only OLD planned)."""
    names = list(dict.fromkeys([*new["plan"], *old["plan"]]))
    changes = []
    for name in names:
        before = old["results"].get(name)
        after = new["results"].get(name)
        if before is None and after is None:
            continue
        kind = change_kind(_verdict(before), _verdict(after))
        if kind is None:
            continue
        changes.append(
            {
                "profile": name,
                "kind": kind,
                "old": _side(before),
                "new": _side(after),
            }
        )
    regressions = sum(1 for c in changes if c["kind"] == "regression")
    return {
        "old": _about(old),
        "new": _about(new),
        "changes": changes,
        "regressions": regressions,
        "unchanged": sum(
            1
            for n in names
            if n in old["results"]
            and n in new["results"]
            and _verdict(old["results"][n]) == _verdict(new["results"][n])
        ),
    }


def _verdict(row: Row | None) -> str | None:
    return None if row is None else str(row.get("verdict"))


def _side(row: Row | None) -> dict[str, Any]:
    if row is None:
        return {"verdict": None, "reason": "not decided", "variant": None}
    return {"verdict": row.get("verdict"), "reason": row.get("reason"), "variant": row.get("variant")}


def _about(doc: report.Document) -> dict[str, Any]:
    versions = {}
    for name, manifest in doc["variants"].items():
        sglang = manifest.get("sglang") if isinstance(manifest, dict) else None
        sglang = sglang if isinstance(sglang, dict) else {}
        versions[name] = sglang.get("version") or sglang.get("commit")
    return {"started_at": doc.get("started_at"), "variants": versions}


def render_text(result: dict[str, Any], width: int) -> list[str]:
    """One line per changed profile (name whole), each side's reason wrapped below it, then the tally."""

    lines = []
    rows = []
    shown = textlayout.printable  # names, verdicts and reasons come from the files: no control character
    for change in result["changes"]:
        old, new = shown(change["old"]["verdict"] or "-"), shown(change["new"]["verdict"] or "-")
        kind = change["kind"].upper() if change["kind"] == "regression" else change["kind"]
        rows.append([kind, shown(change["profile"]), f"{old} -> {new}"])
    table = textlayout.table(rows, width)
    for line, change in zip(table, result["changes"], strict=True):
        lines.append(line)
        for side in ("old", "new"):
            reason = shown(change[side]["reason"] or "")
            variant = f" [{shown(change[side]['variant'])}]" if change[side]["variant"] else ""
            wrapped = textlayout.wrap(f"{side}{variant}: {reason}", width - 2, textlayout.INDENT)
            lines.extend([wrapped[0], *("  " + line for line in wrapped[1:])])
    count = len(result["changes"])
    lines.append(
        f"{count} profile(s) changed, {result['regressions']} regression(s), {result['unchanged']} unchanged"
    )
    return lines
