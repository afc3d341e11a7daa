"""What a source holds for ``bwstack audit``: the CUDA-bearing files of an image, a site-packages folder or a
wheel (``*.so`` with a ``.nv_fatbin`` section, ``*.cubin``, ``*.fatbin``), each read by ``cuobjdump`` or the
stdlib reader of :mod:`bwstack.know.fatbin`, and the site-relative paths that match a library's globs.
:mod:`bwstack.know.audit` judges an inventory against a target GPU; ``bwstack lock --kernel-facts`` records
one per wheel.
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Literal

from bwstack.errors import ExternalError, UserError
from bwstack.know import backends, fatbin
from bwstack.know.fatbin import CodeTarget, FileScan

Reader = Literal["auto", "python", "cuobjdump"]
READERS: tuple[str, ...] = ("auto", "python", "cuobjdump")
_SITE_DIRS = ("site-packages", "dist-packages")
_WHEEL_DATA = re.compile(r"^[^/]+\.data/(?:purelib|platlib)/")
_CUOBJDUMP_LINE = re.compile(r"^(ELF|PTX) file\s+\d+:\s+\S*\.(sm_\d+[af]?)\.(?:cubin|ptx)\s*$")
DOCKER_TIMEOUT_S = 600


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
def globs_regex(globs: tuple[str, ...]) -> re.Pattern[str]:
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
    wanted = globs_regex(_library_globs())
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
    wanted = globs_regex(_library_globs())
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
    wanted = globs_regex(_library_globs())
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
