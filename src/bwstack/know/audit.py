"""``bwstack audit``: which GPU archs the CUDA libraries of an image, a site-packages folder or a wheel carry.

The audit reads every CUDA-bearing file of the source (``*.so`` with a ``.nv_fatbin`` section,
``*.cubin``, ``*.fatbin``), lists its SASS targets (cubins, e.g. sm_90a, sm_100f, sm_120a) and PTX targets
(JIT-able by the driver), maps each backend of :mod:`bwstack.know.backends` to the libraries it runs on and
says which backends have no kernel for the target GPU (rules: :meth:`bwstack.know.fatbin.CodeTarget.runs_on`).

Verdicts, best first: ``native`` (SASS that runs on the target), ``ptx`` (only PTX, JIT-compiled by the driver
at first use), ``jit`` (the library compiles its kernels at run time and ships sources for the target's
family), ``missing`` (installed, but nothing for the target), ``absent`` (not installed in this source).

Exit status of :func:`run_audit`: 0 when every backend whose libraries are installed in the source has a
kernel for the target (native, PTX or JIT); 1 when at least one has none; bad input raises ``UserError``
(exit 2).

Readers: ``cuobjdump`` (PyPI ``nvidia-cuda-cuobjdump``, or on PATH) lists host shared objects and fatbins;
the stdlib reader of :mod:`bwstack.know.fatbin` is used where cuobjdump is missing, for standalone cubins
(one ELF header each; FlashInfer ships thousands), and inside images (``--image`` pipes ``fatbin.py`` into
the image's ``python3``; an image without python3 is exported with ``docker export`` and read on the host).
Nothing is pulled. Reading a source is :mod:`bwstack.know.inventory`; this module judges and prints.
"""

from __future__ import annotations

import io
import json
import re
import shutil
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from bwstack.errors import UserError
from bwstack.know import backends, fatbin
from bwstack.know.backends import BackendUse, Library
from bwstack.know.fatbin import FileScan
from bwstack.know.inventory import Inventory, Reader, collect, globs_regex

if TYPE_CHECKING:
    from rich.table import Table

AUDIT_SCHEMA = "bwstack.audit/1"
EXIT_OK = 0
EXIT_MISSING = 1

Verdict = Literal["native", "ptx", "jit", "missing", "absent"]
_RANK = {"native": 3, "ptx": 2, "jit": 1, "missing": 0}
VERDICT_TEXT = {
    "native": "native",
    "ptx": "PTX JIT only",
    "jit": "JIT (sources)",
    "missing": "MISSING",
    "absent": "not installed",
}

# Compute capabilities a target may name (nvcc 13.0 --list-gpu-code, plus the arch-specific-only 10.3 / 12.1).
VALID_TARGETS: tuple[tuple[int, int], ...] = (
    (7, 5), (8, 0), (8, 6), (8, 7), (8, 8), (8, 9), (9, 0), (10, 0), (10, 3), (11, 0), (12, 0), (12, 1),
)  # fmt: skip


# --- target -------------------------------------------------------------------------------------------------


def target_name(device: tuple[int, int]) -> str:
    """``sm_120`` for (12, 0)."""
    return f"sm_{device[0]}{device[1]}"


def parse_target(text: str) -> tuple[int, int]:
    """The compute capability a target names: ``sm_120``, ``sm120`` or ``12.0``; UserError otherwise."""
    spelled = text.strip().lower()
    dotted = re.fullmatch(r"(\d{1,2})\.(\d)", spelled)
    named = re.fullmatch(r"sm_?(\d{1,2})(\d)([af]?)", spelled)
    valid = ", ".join(target_name(t) for t in VALID_TARGETS)
    if named is not None and named.group(3):
        raise UserError(
            f"{text!r} is a build target; name the GPU instead, e.g. sm_{named.group(1)}{named.group(2)} "
            f"(valid: {valid})",
            field="--arch",
        )
    match = dotted or named
    device = (int(match.group(1)), int(match.group(2))) if match else None
    if device not in VALID_TARGETS or device is None:
        raise UserError(f"unknown arch {text!r} (valid: {valid}; also written sm120 or 12.0)", field="--arch")
    return device


# --- report ----------------------------------------------------------------------------------------------


@dataclass
class LibraryResult:
    """One library's verdict for the target, with the files and JIT sources it rests on."""

    library: Library
    verdict: Verdict
    reason: str
    files: list[FileScan]
    jit_sources: list[str]

    def to_json(self) -> dict[str, object]:
        return {
            "key": self.library.key,
            "title": self.library.title,
            "verdict": self.verdict,
            "reason": self.reason,
            "files": [f.path for f in self.files],
            "sass": _names(self.files, "sass"),
            "ptx": _names(self.files, "ptx"),
            "jit_sources": self.jit_sources,
            "source": self.library.source,
        }


@dataclass
class BackendResult:
    """One backend's verdict: the worst of its needed library groups (best library within a group)."""

    use: BackendUse
    verdict: Verdict
    libraries: list[str]
    reason: str

    def to_json(self) -> dict[str, object]:
        return {
            "field": self.use.field,
            "value": self.use.value,
            "verdict": self.verdict,
            "libraries": self.libraries,
            "reason": self.reason,
            "source": self.use.source,
        }


@dataclass
class AuditReport:
    """Everything the audit found for one source and one target."""

    inventory: Inventory
    device: tuple[int, int]
    libraries: list[LibraryResult]
    backends: list[BackendResult]

    @property
    def failing(self) -> list[BackendResult]:
        """Installed backends with no kernel for the target."""
        return [b for b in self.backends if b.verdict == "missing"]

    @property
    def exit_status(self) -> int:
        return EXIT_MISSING if self.failing else EXIT_OK

    def to_json(self) -> dict[str, object]:
        inv = self.inventory
        owner = {id(f): r.library.key for r in self.libraries for f in r.files}
        return {
            "schema": AUDIT_SCHEMA,
            "source": {"kind": inv.kind, "ref": inv.ref, "reader": inv.reader, "roots": inv.roots},
            "target": {"arch": target_name(self.device), "compute_capability": "{}.{}".format(*self.device)},
            "exit_status": self.exit_status,
            "missing": [f"{b.use.field}={b.use.value}" for b in self.failing],
            "backends": [b.to_json() for b in self.backends],
            "libraries": [r.to_json() for r in self.libraries],
            "files": [
                {**f.to_json(), "library": owner.get(id(f)), "verdict": f.verdict(self.device)}
                for f in sorted(inv.files, key=lambda f: f.path)
            ],
        }


def _names(files: Iterable[FileScan], kind: str) -> list[str]:
    return [t.name for t in sorted({t for f in files for t in f.targets if t.kind == kind})]


def judge_library(lib: Library, inv: Inventory, device: tuple[int, int]) -> LibraryResult:
    """The library's verdict: best over its files and its JIT sources for the target's family."""
    binaries, present = globs_regex(lib.binaries), globs_regex(lib.present)
    jit_regex = globs_regex(lib.jit_globs(backends.family_of(device)))
    files = [f for f in inv.files if binaries.match(f.path)]
    installed = bool(files) or any(present.match(p) for p in inv.paths)
    jit = sorted(p for p in inv.paths if jit_regex.match(p))
    if not installed:
        return LibraryResult(lib, "absent", "not installed in this source", [], [])
    verdicts: list[Verdict] = [f.verdict(device) for f in files]
    if jit:
        verdicts.append("jit")
    best: Verdict = max(verdicts, key=lambda v: _RANK[v], default="missing")
    return LibraryResult(lib, best, _library_reason(lib, best, files, jit, device), files, jit)


def _library_reason(
    lib: Library, verdict: Verdict, files: list[FileScan], jit: list[str], device: tuple[int, int]
) -> str:
    target = target_name(device)
    carried = ", ".join(_names(files, "sass") + _names(files, "ptx")) or "no GPU code"
    if verdict == "native":
        return f"SASS for {target}: " + ", ".join(t for t in _names(files, "sass") if _runs(t, device))
    if verdict == "ptx":
        return f"no SASS for {target}; PTX the driver can JIT: " + ", ".join(
            t for t in _names(files, "ptx") if _runs(t, device)
        )
    if verdict == "jit":
        return f"compiled at run time from {len(jit)} source file(s) ({jit[0]}{', ...' * (len(jit) > 1)})"
    if lib.is_jit and not files:
        return f"no JIT source for {backends.family_of(device)} in this version"
    return f"no kernel for {target}; carries {carried}"


def _runs(name: str, device: tuple[int, int]) -> bool:
    return fatbin.parse_arch_name(name).runs_on(device)


def judge_backend(use: BackendUse, results: dict[str, LibraryResult]) -> BackendResult:
    """Worst group verdict; a group takes its best installed library; any group not installed → absent."""
    chosen: list[LibraryResult] = []
    for group in use.needs:
        installed = [results[key] for key in group if results[key].verdict != "absent"]
        if not installed:
            names = " or ".join(group)
            return BackendResult(use, "absent", list(group), f"{names} not installed in this source")
        chosen.append(max(installed, key=lambda r: _RANK[r.verdict]))
    worst = min(chosen, key=lambda r: _RANK[r.verdict])
    decisive = [r for r in chosen if r.verdict == worst.verdict]
    reason = "; ".join(f"{r.library.key}: {r.reason}" if len(chosen) > 1 else r.reason for r in decisive)
    return BackendResult(use, worst.verdict, [r.library.key for r in chosen], reason)


def build_report(inv: Inventory, device: tuple[int, int]) -> AuditReport:
    """Judge every library and backend of the table against the inventory."""
    results = {lib.key: judge_library(lib, inv, device) for lib in backends.LIBRARIES}
    judged = [judge_backend(use, results) for use in backends.BACKENDS]
    return AuditReport(inv, device, list(results.values()), judged)


# --- output ----------------------------------------------------------------------------------------------


def render_text(report: AuditReport, width: int | None = None) -> str:
    """The human-readable report: libraries, other CUDA files, backends, and the exit status explained."""
    from rich.console import Console

    buf = io.StringIO()
    columns = width or max(100, shutil.get_terminal_size((120, 24)).columns)
    console = Console(file=buf, width=columns, color_system=None, highlight=False, emoji=False)
    inv = report.inventory
    console.print(
        f"audit of {inv.kind} {inv.ref} (reader: {inv.reader}); target {target_name(report.device)}"
    )
    if any(r.verdict != "absent" for r in report.libraries):
        console.print(_libraries_table(report))
    absent = [r.library.key for r in report.libraries if r.verdict == "absent"]
    if absent:
        console.print("not installed: " + ", ".join(absent))
    others = _other_rows(report)
    if others:
        console.print(_table("Other CUDA files", ("path", "SASS", "PTX", _verdict_col(report)), others))
    if any(b.verdict != "absent" for b in report.backends):
        console.print(_backends_table(report))
    console.print(_summary(report))
    return buf.getvalue()


def _verdict_col(report: AuditReport) -> str:
    return f"verdict on {target_name(report.device)}"


def _table(title: str, columns: Iterable[str], rows: Iterable[Iterable[str]]) -> Table:
    from rich import box
    from rich.table import Table

    table = Table(title=title, box=box.SIMPLE, title_justify="left")
    for col in columns:
        table.add_column(col, overflow="fold")
    for row in rows:
        table.add_row(*row)
    return table


def _libraries_table(report: AuditReport) -> Table:
    rows = [
        (
            res.library.key,
            str(len(res.files)),
            " ".join(_names(res.files, "sass")) or "-",
            " ".join(_names(res.files, "ptx")) or "-",
            VERDICT_TEXT[res.verdict],
        )
        for res in report.libraries
        if res.verdict != "absent"
    ]
    return _table("Kernel libraries", ("library", "files", "SASS", "PTX", _verdict_col(report)), rows)


def _backends_table(report: AuditReport) -> Table:
    rows = [
        (res.use.field, res.use.value, ", ".join(res.libraries), VERDICT_TEXT[res.verdict], res.reason)
        for res in report.backends
        if res.verdict != "absent"
    ]
    return _table("Backends", ("field", "value", "runs on", _verdict_col(report), "why"), rows)


def _other_rows(report: AuditReport) -> list[tuple[str, str, str, str]]:
    """CUDA files no library claims; cubins are grouped per folder (a cubin collection can hold thousands)."""
    claimed = {id(f) for r in report.libraries for f in r.files}
    groups: dict[str, list[FileScan]] = {}
    for scan in sorted(report.inventory.files, key=lambda f: f.path):
        if id(scan) in claimed:
            continue
        key = scan.path.rsplit("/", 1)[0] + "/*.cubin" if scan.path.endswith(".cubin") else scan.path
        groups.setdefault(key, []).append(scan)
    rows = []
    for key, scans in groups.items():
        verdict: Verdict = max((s.verdict(report.device) for s in scans), key=lambda v: _RANK[v])
        label = f"{key} ({len(scans)} files)" if len(scans) > 1 else key
        errors = [s.error for s in scans if s.error]
        text = VERDICT_TEXT[verdict] + (f" (unreadable: {errors[0]})" if errors else "")
        rows.append(
            (label, " ".join(_names(scans, "sass")) or "-", " ".join(_names(scans, "ptx")) or "-", text)
        )
    return rows


def _summary(report: AuditReport) -> str:
    target = target_name(report.device)
    if report.failing:
        names = ", ".join(f"{b.use.field}={b.use.value}" for b in report.failing)
        return f"exit 1: {len(report.failing)} installed backend(s) have no kernel for {target}: {names}"
    installed = sum(1 for b in report.backends if b.verdict != "absent")
    if installed == 0:
        return "exit 0: no kernel library of the backend table is installed in this source"
    return f"exit 0: all {installed} installed backend(s) have a kernel for {target} (native, PTX or JIT)"


# --- entry point -----------------------------------------------------------------------------------------


def run_audit(
    *,
    image: str | None,
    site: Path | None,
    wheel: Path | None,
    arch: str,
    as_json: bool,
    echo: Callable[[str], object],
    reader: Reader = "auto",
) -> int:
    """Audit one source for one target arch, print the report, return the exit status (0 ok, 1 missing)."""
    device = parse_target(arch)
    report = build_report(collect(image=image, site=site, wheel=wheel, reader=reader), device)
    echo(json.dumps(report.to_json(), indent=2) if as_json else render_text(report).rstrip("\n"))
    return report.exit_status


def iter_failing(report: AuditReport) -> Iterator[tuple[str, str]]:
    """(field, value) of every installed backend without a kernel for the target (for ``rules``)."""
    for res in report.failing:
        yield res.use.field, res.use.value
