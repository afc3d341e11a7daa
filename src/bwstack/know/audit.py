"""``bwstack audit``: which GPU archs the CUDA libraries of an image, a site-packages folder or a wheel carry.

The audit reads every CUDA-bearing file of the source (``*.so`` with a ``.nv_fatbin`` section,
``*.cubin``, ``*.fatbin``), lists its SASS targets (cubins, e.g. sm_90a, sm_100f, sm_120a) and PTX targets
(JIT-able by the driver), maps each backend of :mod:`bwstack.know.backends` to the libraries it runs on and
says
which backends have no kernel for the target GPU (rules: :meth:`bwstack.know.fatbin.CodeTarget.runs_on`).

Verdicts, best first: ``native`` (SASS that runs on the target), ``ptx`` (only PTX, JIT-compiled by the driver
at first use), ``jit`` (the library compiles its kernels at run time and ships sources for the target's
family), ``missing`` (installed, but nothing for the target), ``absent`` (not installed in this source).

Exit status of :func:`run_audit`: 0 when every backend whose libraries are installed in the source has a
kernel for the target (native, PTX or JIT); 1 when at least one has none; bad input raises ``UserError``
(exit 2).

Readers: ``cuobjdump`` (PyPI ``nvidia-cuda-cuobjdump``, or on PATH) lists host shared objects and fatbins;
the stdlib reader of :mod:`bwstack.know.fatbin` is used where cuobjdump is missing, for standalone cubins
(one ELF
header each; FlashInfer ships thousands), and inside images (``--image`` pipes ``fatbin.py`` into the image's
``python3``; an image without python3 is exported with ``docker export`` and read here). Nothing is pulled.
"""

from __future__ import annotations

import functools
import importlib.util
import io
import json
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import zipfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Literal

from bwstack.errors import ExternalError, UserError
from bwstack.know import backends, fatbin
from bwstack.know.backends import BackendUse, Library
from bwstack.know.fatbin import CodeTarget, FileScan

if TYPE_CHECKING:
    from rich.table import Table

AUDIT_SCHEMA = "bwstack.audit/1"
EXIT_OK = 0
EXIT_MISSING = 1

Reader = Literal["auto", "python", "cuobjdump"]
READERS: tuple[str, ...] = ("auto", "python", "cuobjdump")
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
_SITE_DIRS = ("site-packages", "dist-packages")
_WHEEL_DATA = re.compile(r"^[^/]+\.data/(?:purelib|platlib)/")
_CUOBJDUMP_LINE = re.compile(r"^(ELF|PTX) file\s+\d+:\s+\S*\.(sm_\d+[af]?)\.(?:cubin|ptx)\s*$")
DOCKER_TIMEOUT_S = 600


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


# --- inventory: what a source holds ----------------------------------------------------------------------


@dataclass
class Inventory:
    """The CUDA files of a source and the site-relative paths that match a library glob."""

    kind: str
    ref: str
    reader: str
    files: list[FileScan] = field(default_factory=list)
    paths: set[str] = field(default_factory=set)
    roots: list[str] = field(default_factory=list)


def site_relative(path: str) -> str:
    """A path relative to site-packages: drops a wheel's ``*.data/platlib/`` or all up to site-packages/."""
    path = _WHEEL_DATA.sub("", path.lstrip("/"))
    parts = path.split("/")
    cut = max((i for i, part in enumerate(parts) if part in _SITE_DIRS), default=-1)
    return "/".join(parts[cut + 1 :])


def _library_globs() -> tuple[str, ...]:
    return tuple(glob for lib in backends.LIBRARIES for glob in lib.all_globs())


@functools.cache
def _glob(pattern: str) -> re.Pattern[str]:
    return fatbin.glob_regex(pattern)


@functools.cache
def _globs_regex(globs: tuple[str, ...]) -> re.Pattern[str]:
    """One regex for several globs; matches nothing for an empty tuple."""
    if not globs:
        return re.compile(r"(?!)")
    return re.compile("|".join(f"(?:{_glob(g).pattern})" for g in globs))


class _Scanner:
    """Reads one file with the chosen reader (cuobjdump for host objects where available, else Python)."""

    def __init__(self, reader: Reader) -> None:
        self.cuobjdump = _resolve_cuobjdump(reader)
        self.name = "cuobjdump" if self.cuobjdump else "python"

    def scan(self, path: Path, rel: str) -> FileScan | None:
        scan = fatbin.scan_file(path, rel)
        if scan is None or self.cuobjdump is None or path.name.endswith(".cubin"):
            return scan
        listed = cuobjdump_scan(self.cuobjdump, path, rel)
        if listed.error is not None:
            scan.error = f"{listed.error}; listed by the python reader instead"
            return scan
        listed.compressed = scan.compressed
        return listed


def _resolve_cuobjdump(reader: Reader) -> Path | None:
    if reader == "python":
        return None
    found = find_cuobjdump()
    if found is None and reader == "cuobjdump":
        raise UserError(
            "cuobjdump not found: pip install nvidia-cuda-cuobjdump, put it on PATH or set BWSTACK_CUOBJDUMP",
            field="--reader",
        )
    return found


def find_cuobjdump() -> Path | None:
    """``$BWSTACK_CUOBJDUMP``, ``cuobjdump`` on PATH, the nvidia-cuda-cuobjdump wheel's binary, or CUDA's."""
    env = os.environ.get("BWSTACK_CUOBJDUMP")
    if env:
        return Path(env) if Path(env).is_file() else None
    on_path = shutil.which("cuobjdump")
    if on_path:
        return Path(on_path)
    spec = importlib.util.find_spec("nvidia")
    for location in (spec.submodule_search_locations or []) if spec else []:
        for candidate in sorted(Path(location).glob("*/bin/cuobjdump")):
            if os.access(candidate, os.X_OK):
                return candidate
    cuda = Path("/usr/local/cuda/bin/cuobjdump")
    return cuda if cuda.is_file() else None


def cuobjdump_scan(tool: Path, path: Path, rel: str) -> FileScan:
    """SASS/PTX targets of one file as ``cuobjdump --list-elf --list-ptx`` lists them."""
    proc = subprocess.run(
        [str(tool), "--list-elf", "--list-ptx", str(path)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if proc.returncode != 0:
        if "does not contain device code" in proc.stderr:
            return FileScan(rel)
        return FileScan(rel, error=f"cuobjdump exit {proc.returncode}: {' '.join(proc.stderr.split())[:200]}")
    return parse_cuobjdump(proc.stdout, rel)


def parse_cuobjdump(text: str, rel: str) -> FileScan:
    """Parse ``ELF file 1: x.1.sm_90a.cubin`` / ``PTX file 1: x.1.sm_80.ptx`` lines into a FileScan."""
    targets: set[CodeTarget] = set()
    entries = 0
    for line in text.splitlines():
        match = _CUOBJDUMP_LINE.match(line.strip())
        if match is None:
            continue
        sass = fatbin.parse_arch_name(match.group(2))
        targets.add(sass if match.group(1) == "ELF" else CodeTarget("ptx", sass.sm, sass.suffix))
        entries += 1
    return FileScan(rel, tuple(sorted(targets)), entries)


def inventory_site(site: Path, reader: Reader) -> Inventory:
    """Scan a site-packages folder on this machine."""
    if not site.is_dir():
        raise UserError(f"not a folder: {site}", field="--path")
    scanner = _Scanner(reader)
    inv = Inventory("path", str(site), scanner.name, roots=[str(site)])
    wanted = _globs_regex(_library_globs())
    for full, rel_path in fatbin.iter_files(site):
        rel = site_relative(rel_path)
        if wanted.match(rel):
            inv.paths.add(rel)
        if fatbin.is_candidate(full.name):
            scan = scanner.scan(full, rel)
            if scan is not None:
                inv.files.append(scan)
    return inv


def inventory_wheel(wheel: Path, reader: Reader) -> Inventory:
    """Scan a wheel without installing it: cubins are read in memory, shared objects through a temp file."""
    if not wheel.is_file():
        raise UserError(f"no such file: {wheel}", field="--wheel")
    if not zipfile.is_zipfile(wheel):
        raise UserError(f"not a wheel (not a zip archive): {wheel}", field="--wheel")
    scanner = _Scanner(reader)
    inv = Inventory("wheel", str(wheel), scanner.name)
    wanted = _globs_regex(_library_globs())
    with zipfile.ZipFile(wheel) as archive, tempfile.TemporaryDirectory(prefix="bwstack-audit-") as tmp:
        infos = [i for i in archive.infolist() if not i.is_dir()]
        if not any(re.fullmatch(r"[^/]+\.dist-info/WHEEL", i.filename) for i in infos):
            raise UserError(f"not a wheel (no *.dist-info/WHEEL): {wheel}", field="--wheel")
        for info in infos:
            rel = site_relative(info.filename)
            if wanted.match(rel):
                inv.paths.add(rel)
            if fatbin.is_candidate(rel.rsplit("/", 1)[-1]):
                with archive.open(info) as member:
                    scan = _scan_member(member, rel, Path(tmp), scanner)
                if scan is not None:
                    inv.files.append(scan)
    return inv


#: the most an archive member may inflate to: a cubin in memory, a shared object through a temp file
MAX_CUBIN_BYTES, MAX_MEMBER_BYTES = 256 << 20, 8 << 30


def _scan_member(member: IO[bytes], rel: str, tmp: Path, scanner: _Scanner) -> FileScan | None:
    """Scan one archive member (a cubin in memory, else via a temp file), inflated only up to its bound."""
    limit = MAX_CUBIN_BYTES if rel.endswith(".cubin") else MAX_MEMBER_BYTES
    too_large = FileScan(rel, error=f"inflates to more than {limit >> 20} MiB: not scanned (zip bomb?)")
    if rel.endswith(".cubin"):
        data = member.read(limit + 1)
        return too_large if len(data) > limit else fatbin.scan_stream(io.BytesIO(data), rel)
    head = member.read(4)
    if head not in (fatbin.ELF_MAGIC, (fatbin.FATBIN_MAGIC).to_bytes(4, "little")):
        return None
    target = tmp / "member.bin"
    try:
        with target.open("wb") as out:
            out.write(head)
            while piece := member.read(1 << 20):
                if out.tell() + len(piece) > limit:
                    return too_large
                out.write(piece)
        return scanner.scan(target, rel)
    finally:
        target.unlink(missing_ok=True)


def inventory_image(image: str, reader: Reader) -> Inventory:
    """Scan a local image: fatbin.py runs in the image's python3; without python3 the image is exported."""
    docker = shutil.which("docker")
    if docker is None:
        raise ExternalError("docker not found on PATH (needed for --image)")
    _check_image(docker, image)
    if reader != "cuobjdump":
        inv = _inventory_in_image(docker, image)
        if inv is not None:
            return inv
    return _inventory_export(docker, image, reader)


def _check_image(docker: str, image: str) -> None:
    proc = _docker(docker, ["image", "inspect", "--format", "{{.Id}}", image])
    if proc.returncode != 0:
        if "no such image" in proc.stderr.lower():
            raise UserError(
                f"image {image} not found locally (audit never pulls; docker pull or build it first)",
                field="--image",
            )
        raise ExternalError(f"docker image inspect {image} failed: {proc.stderr.strip()}")


def _docker(docker: str, args: list[str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            [docker, *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=DOCKER_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise ExternalError(f"docker {args[0]} timed out after {DOCKER_TIMEOUT_S}s") from exc


def _inventory_in_image(docker: str, image: str) -> Inventory | None:
    """Pipe fatbin.py into ``python3 -`` inside the image; None when the image has no python3."""
    keep = [arg for glob in _library_globs() for arg in ("--keep", glob)]
    script = Path(fatbin.__file__).read_text(encoding="utf-8")
    args = [
        "run",
        "--rm",
        "-i",
        "--pull",
        "never",
        "--network",
        "none",
        "--entrypoint",
        "python3",
        image,
        "-",
        *keep,
    ]
    proc = _docker(docker, args, stdin=script)
    if proc.returncode in (126, 127) or "executable file not found" in proc.stderr:
        return None
    if proc.returncode != 0:
        raise ExternalError(
            f"reading {image} with its python3 failed: {' '.join(proc.stderr.split())[-300:]}"
        )
    try:
        doc = json.loads(proc.stdout)
    except json.JSONDecodeError as exc:
        raise ExternalError(f"unreadable scan output from {image}: {exc}") from exc
    roots = [str(r) for r in doc.get("roots", [])]
    inv = Inventory("image", image, "python (in image)", roots=roots)
    inv.files = [fatbin.file_scan_from_json(item) for item in doc.get("files", [])]
    inv.paths = {str(item["path"]) for item in doc.get("kept", [])}
    return inv


def _inventory_export(docker: str, image: str, reader: Reader) -> Inventory:
    """Stream ``docker export`` of a created (never started) container and read its site-packages files."""
    created = _docker(docker, ["create", "--pull", "never", image, "bwstack-audit"])
    if created.returncode != 0:
        raise ExternalError(f"docker create {image} failed: {created.stderr.strip()}")
    container = created.stdout.strip()
    scanner = _Scanner(reader)
    inv = Inventory("image", image, f"{scanner.name} (docker export)")
    try:
        with subprocess.Popen([docker, "export", container], stdout=subprocess.PIPE) as proc:
            assert proc.stdout is not None
            _read_export(proc.stdout, inv, scanner)
            proc.stdout.close()
            if proc.wait(timeout=DOCKER_TIMEOUT_S) != 0:
                raise ExternalError(f"docker export of {image} failed")
    finally:
        _docker(docker, ["rm", "-f", container])
    return inv


def _read_export(stream: IO[bytes], inv: Inventory, scanner: _Scanner) -> None:
    wanted = _globs_regex(_library_globs())
    roots: set[str] = set()
    with (
        tarfile.open(fileobj=stream, mode="r|") as tar,
        tempfile.TemporaryDirectory(prefix="bwstack-audit-") as tmp,
    ):
        for member in tar:
            if not member.isfile() or not any(f"{d}/" in member.name for d in _SITE_DIRS):
                continue
            rel = site_relative(member.name)
            roots.add("/" + member.name[: len(member.name) - len(rel)].strip("/"))
            if wanted.match(rel):
                inv.paths.add(rel)
            if fatbin.is_candidate(rel.rsplit("/", 1)[-1]):
                extracted = tar.extractfile(member)
                if extracted is not None:
                    scan = _scan_member(extracted, rel, Path(tmp), scanner)
                    if scan is not None:
                        inv.files.append(scan)
    inv.roots = sorted(roots)


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
    binaries, present = _globs_regex(lib.binaries), _globs_regex(lib.present)
    jit_regex = _globs_regex(lib.jit_globs(backends.family_of(device)))
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


def checked_reader(name: str) -> Reader:
    """A reader name as the typed literal; UserError for anything else."""
    for reader in ("auto", "python", "cuobjdump"):
        if name == reader:
            return reader
    raise UserError(f"unknown reader {name!r} (valid: {', '.join(READERS)})", field="--reader")


def collect(*, image: str | None, site: Path | None, wheel: Path | None, reader: Reader) -> Inventory:
    """The inventory of exactly one source."""
    given = [name for name, value in (("--image", image), ("--path", site), ("--wheel", wheel)) if value]
    if len(given) != 1:
        raise UserError(
            "give exactly one of --image, --path, --wheel" + (f" (got {', '.join(given)})" * bool(given))
        )
    checked_reader(reader)
    if image:
        return inventory_image(image, reader)
    if site is not None:
        return inventory_site(site, reader)
    assert wheel is not None
    return inventory_wheel(wheel, reader)


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
