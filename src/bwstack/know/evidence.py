"""Shipped evidence: what the bundles merged into the repository's ``evidence/`` folder saw of each profile.

``evidence/merged.json`` is a ``bwstack report merge`` output (:mod:`bwstack.sweep.reportmerge`) kept next to
the profiles files, with the bundles it was merged from. This room reads it for a stack: the cells of one
profile (its name, its image variant, its arch; the ``cpu`` section for a CPU stack, ``gpu`` otherwise: CPU
rows never speak for a GPU profile, stand-in rows were never merged), the words ``list``, ``up --dry-run`` and
the next-profile hint print ("seen healthy on 3 hosts (sm120, driver 580.x), nan on 1 (…)"), and the
contradictions ``validate`` warns about, each with the profiles.yaml change the evidence supports and the
bundles it rests on.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from bwstack.record import MERGED_FILE, read
from bwstack.record.types import Cell, Merged
from bwstack.stack.schema import Stack
from bwstack.textlayout import printable
from healthchecks import untrusted

EVIDENCE_DIR = "evidence"
#: what evidence/merged.json may be (read by list, validate and up --dry-run on every host)
EVIDENCE_LIMITS = untrusted.Limits(max_bytes=16 << 20)


def load(root: Path) -> Merged | None:
    """``<root>/evidence/merged.json`` through the record's one reader of merged matrices, its strings made
    printable; None when the folder has none."""
    path = root / EVIDENCE_DIR / MERGED_FILE
    if not path.is_file():
        return None
    doc = read.load_merged(path, "the shipped evidence", EVIDENCE_LIMITS)
    return cast(Merged, dict(printable_strings(doc)))


def printable_strings(value: Any) -> Any:
    """A JSON value with every string (keys too) made printable (:func:`bwstack.textlayout.printable`): the
    evidence is printed by list, validate and up --dry-run, and escapes in it must not reach the terminal."""
    if isinstance(value, dict):
        return {printable(str(k)): printable_strings(v) for k, v in value.items()}
    if isinstance(value, list):
        return [printable_strings(v) for v in value]
    return printable(value) if isinstance(value, str) else value


def section_for(stack: Stack) -> str:
    """The merged section that speaks for a stack's profiles: ``cpu`` or ``gpu``."""
    return "cpu" if stack.is_cpu else "gpu"


def cells_for(stack: Stack, name: str, merged: Merged | None) -> list[Cell]:
    """The merged cells of one profile as this stack runs it (name, variant, section, arch)."""
    if merged is None:
        return []
    section = section_for(stack)
    arch = "cpu" if stack.is_cpu else stack.arch_for(name)
    variant = stack.variant_name_for(name)
    return [
        c
        for c in merged["cells"]
        if isinstance(c, dict)
        and c.get("profile") == name
        and c.get("variant") == variant
        and c.get("section") == section
        and c.get("arch") == arch
    ]


def _branch(driver: str) -> str:
    head = driver.split(".", 1)[0]
    return f"{head}.x" if head.isdigit() else driver


def _details(section: str, seen: list[dict[str, Any]]) -> str:
    if section == "cpu":
        words = ["CPU"]
    else:
        words = sorted({str(e.get("arch") or "?") for e in seen})
        drivers = sorted({_branch(str(e["driver"])) for e in seen if e.get("driver")})
        if drivers:
            words.append("driver " + "/".join(drivers))
    versions = sorted({str(e["sglang"]) for e in seen if e.get("sglang")})
    if versions:
        words.append("SGLang " + "/".join(versions))
    digests = sorted({str(e["image_digest"])[7:19] for e in seen if e.get("image_digest")})
    if digests:
        words.append("image " + "/".join(digests))
    return ", ".join(words)


def seen_words(cells: list[Cell]) -> str | None:
    """``seen healthy on 3 hosts (sm120, driver 580.x, …), nan on 1 (…)``; CPU evidence says so."""
    runs = [dict(e, arch=c.get("arch")) for c in cells for e in c.get("seen") or [] if isinstance(e, dict)]
    if not runs:
        return None
    section = str(cells[0].get("section"))
    parts = []
    counts: dict[str, int] = {}
    for e in runs:
        counts[str(e.get("verdict"))] = counts.get(str(e.get("verdict")), 0) + 1
    for verdict in sorted(counts, key=lambda v: (-counts[v], v)):
        group = [e for e in runs if e.get("verdict") == verdict]
        hosts = len({e.get("host") for e in group})
        parts.append(f"{verdict} on {hosts} host{'s' if hosts != 1 else ''} ({_details(section, group)})")
    label = "seen on the CPU by the project's own bundles: " if section == "cpu" else "seen "
    return label + ", ".join(parts)


def bundle_files(cells: list[Cell], merged: Merged) -> list[str]:
    """The shipped bundle files (relative to the repository) behind ``cells``."""
    ids = sorted({str(e.get("bundle")) for c in cells for e in c.get("seen") or [] if isinstance(e, dict)})
    bundles = merged.get("bundles") or {}
    return [f"{EVIDENCE_DIR}/{(bundles.get(i) or {}).get('file') or i}" for i in ids]


def profile_words(stack: Stack, name: str, merged: Merged | None = None) -> str | None:
    """``expect healthy — seen healthy on 2 hosts (…)`` for one profile; None without evidence."""
    merged = merged if merged is not None else load(stack.root)
    words = seen_words(cells_for(stack, name, merged))
    return None if words is None else f"expect {stack.profile(name).expect} — {words}"


@dataclass(frozen=True)
class Contradiction:
    """An ``expect`` that recorded evidence contradicts, the change it supports (None: hosts disagree)."""

    profile: str
    expect: str
    supported: str | None
    words: str
    bundles: list[str]
    where: str

    def warning(self) -> str:
        """One warning line (validate prints it after ``bwstack: warning:``)."""
        text = f"{self.where}: profile {self.profile}: expect: {self.expect}, but {self.words}"
        if self.supported is None:
            text += "; the runs disagree, so no single expect fits: see the merged matrix"
        return text + f" (bundles: {', '.join(self.bundles)})"

    def change(self) -> list[str]:
        """The profiles.yaml lines the evidence supports (empty when the runs disagree)."""
        if self.supported is None:
            return []
        return [
            "profiles:",
            f"  {self.profile}:",
            f"    expect: {self.supported}   # was {self.expect}; evidence: {', '.join(self.bundles)}",
        ]


def contradictions(stack: Stack) -> list[Contradiction]:
    """Every profile whose ``expect`` differs from a verdict the shipped evidence recorded for it."""
    merged = load(stack.root)
    if merged is None:
        return []
    out = []
    for name, profile in stack.profiles.items():
        cells = cells_for(stack, name, merged)
        verdicts = {str(v) for c in cells for v in (c.get("verdicts") or {})}
        if not verdicts or verdicts == {profile.expect}:
            continue
        line = stack.line_of("profiles", name, "expect")
        out.append(
            Contradiction(
                profile=name,
                expect=profile.expect,
                supported=next(iter(verdicts)) if len(verdicts) == 1 else None,
                words=seen_words(cells) or "",
                bundles=bundle_files(cells, merged),
                where=f"{stack.path}:{line}" if line else str(stack.path),
            )
        )
    return out


def dry_run_line(stack: Stack, name: str) -> str:
    """``bwstack up --dry-run``'s line on a profile's recorded evidence."""
    words = profile_words(stack, name)
    if words is None:
        return f"evidence: nothing recorded for {name} in {EVIDENCE_DIR}/ (send a bundle: docs/evidence.md)"
    return f"evidence: {words}"
