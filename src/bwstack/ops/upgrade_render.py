"""The Markdown form of a ``bwstack upgrade`` report (:class:`bwstack.ops.upgrade.Report`): a verdict table
per profile and arch, then per profile what changes on its command line and in SGLang's resolution, then the
defaults that changed for flags the stack leaves unset.
"""

from __future__ import annotations

from typing import Any

from bwstack.know.rules import KERNEL_FACTS_FILE, Prediction
from bwstack.ops.upgrade import ArchChange, ProfileUpgrade, Report

#: how many unrelated changed defaults the Markdown lists (all of them are in --json)
DEFAULTS_SHOWN = 15


def render_markdown(report: Report) -> str:
    old, new = report.old, report.new
    lines = [
        f"# bwstack upgrade: {old.label} -> {new.label}",
        "",
        "Each version's own parser and backend resolution (run on the CPU by `bwstack explain`), then "
        "bwstack's rules and kernel facts; a prediction, not a run.",
        *[f"- note: {note}" for note in report.notes],
        "",
        f"| profile | arch | sglang {old.version} | sglang {new.version} | change |",
        "|---|---|---|---|---|",
    ]
    for prof in report.profiles:
        for arch in prof.archs:
            kind = (arch.kind or "same").upper() if arch.kind == "regression" else (arch.kind or "same")
            lines.append(
                f"| {prof.profile} | {arch.arch} | {_verdict(arch.old)} | {_verdict(arch.new)} | {kind} |"
            )
    lines += ["", f"{report.regressions} regression(s) predicted.", ""]
    if report.measured is not None:
        lines += measured_lines(report.measured)
    for prof in report.profiles:
        lines += _profile(prof)
    if report.defaults:
        lines += [f"## Defaults that changed ({len(report.defaults)} flag(s) the stack leaves unset)", ""]
        lines += [
            f"- `{d['flag']}`: {_show(d['old'])} -> {_show(d['new'])}"
            for d in report.defaults[:DEFAULTS_SHOWN]
        ]
        if len(report.defaults) > DEFAULTS_SHOWN:
            lines.append(f"- ... and {len(report.defaults) - DEFAULTS_SHOWN} more (--json)")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def measured_lines(measured: dict[str, Any]) -> list[str]:
    """``--measure``'s section: the profile, the two CPU variants and ``bwstack compare``'s report."""
    return [
        f"## Measured divergence (--measure): {measured['profile']} on {measured['variants'][0]} and "
        f"{measured['variants'][1]}, real SGLang on the CPU",
        "",
        "```",
        *measured["lines"],
        "```",
        "",
    ]


def _profile(prof: ProfileUpgrade) -> list[str]:
    lines = [f"## {prof.profile}", ""]
    for f in prof.flags:
        to = f" -> `{f.new}`" if f.new else ""
        fix = " (--apply rewrites it)" if f.rewrite else ""
        lines.append(f"- {f.kind.replace('_', ' ')}: `{f.old}`{to} at {f.where}: {f.detail}{fix}")
    for arch in prof.archs:
        lines += _arch(arch)
    lines.append("")
    return lines


def _arch(arch: ArchChange) -> list[str]:
    head = f"- {arch.arch}: {arch.old.verdict} -> {arch.new.verdict}"
    if arch.kind:
        head += f" ({arch.kind.upper() if arch.kind == 'regression' else arch.kind}): {arch.reason}"
    lines = [head]
    if arch.kind and arch.old.verdict != "healthy":
        lines.append(f"  - was: {arch.old.decision.reason}")
    effective = ", ".join(f"{n} {a or '-'} -> {b or '-'}" for n, (a, b) in arch.effective_changes.items())
    if effective:
        lines.append(f"  - effective: {effective}")
    if arch.rules_started:
        lines.append(f"  - rules that start applying: {', '.join(arch.rules_started)}")
    if arch.rules_stopped:
        lines.append(f"  - rules that stop applying: {', '.join(arch.rules_stopped)}")
    lines += [f"  - risk that starts: {note}" for note in arch.risks_started]
    lines += [f"  - risk that stops: {note}" for note in arch.risks_stopped]
    return lines


def _verdict(pred: Prediction) -> str:
    """The verdict, marked where healthy only because the side has no kernel facts to check."""
    unchecked = any(note.startswith(f"no {KERNEL_FACTS_FILE} ") for note in pred.notes)
    return (
        f"{pred.verdict} (kernels not checked)" if unchecked and pred.verdict == "healthy" else pred.verdict
    )


def _show(value: Any) -> str:
    return "-" if value is None else f"`{value}`"
