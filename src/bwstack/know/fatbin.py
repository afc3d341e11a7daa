"""Which GPU code a CUDA binary carries: a stdlib-only reader for ELF ``.nv_fatbin`` sections and cubins.

``bwstack audit`` asks, for each CUDA library, which SASS (cubin) and PTX targets it embeds and whether any
of them runs on a target GPU. This module answers without NVIDIA tools and without third-party packages, so
that the same file can be piped into ``python3 -`` inside a serving image (``audit --image``) and scan that
image's site-packages where the files are. ``cuobjdump`` is the other reader (see ``bwstack.know.audit``); the
tests check that both agree.

Formats (no NVIDIA specification is public; the layouts below were read from nvcc 12.9/13.0 output and checked
against ``cuobjdump --list-elf --list-ptx`` on the test fixtures and the sglang-kernel 0.3.21/0.4.10 wheels):

* A host shared object keeps its device code in the ELF section ``.nv_fatbin`` (``__nv_relfatbin`` for
  relocatable device code). The section is a run of fatbin containers, each ``<IHHQ``: magic ``0xBA55ED50``,
  version, header size, payload size; containers are 8-byte aligned and may be separated by zero padding.
* Each container holds entries with a 64-byte (or longer) header: ``<HHIQ`` kind (1 = PTX, 2 = ELF/cubin),
  version, header size, payload size; at +28 the SM number (``90`` for sm_90a), at +40 a 64-bit flag word:
  ``0x100000`` architecture-specific ("a"), ``0x200000`` family-specific ("f"), ``0x2000`` / ``0x8000``
  compressed payload (LZ4 / ZSTD).
* A standalone cubin is an ELF file with ``e_machine == EM_CUDA (190)``. ``e_flags`` hold the SM number in
  the low byte for ABI version 7 (``EF_CUDA_SM``, "a" = ``EF_CUDA_ACCELERATORS_V1`` 0x800) and in bits 8..15
  for ABI version 8 ("a" = ``EF_CUDA_ACCELERATORS`` 0x8); constant names from LLVM's
  llvm/include/llvm/BinaryFormat/ELF.h.
  ptxas 13.0 leaves that bit clear for sm_120a and marks "a" instead in the ``.nv.compat`` attribute list
  (attribute 9 non-zero), which is read too. A cubin does not record "f": ``-code=sm_120f`` and ``sm_120``
  produce the same cubin, and cuobjdump lists both as sm_120; the fatbin entry flag is the only trace.

Compatibility rules (``runs_on``), from NVIDIA's documentation:

* SASS for sm_XY runs on devices of the same major version X with minor version >= Y ("binary compatibility",
  CUDA C++ Programming Guide, https://docs.nvidia.com/cuda/cuda-c-programming-guide/#binary-compatibility).
* Architecture-specific code (suffix "a", SASS or PTX) runs only on exactly that compute capability: sm_100a
  does not run on 12.0, sm_120a runs on 12.0 but not on 12.1 (CUDA Programming Guide, "Feature Availability":
  https://docs.nvidia.com/cuda/cuda-programming-guide/05-appendices/compute-capabilities.html#feature-availability).
* Family-specific code (suffix "f") runs on devices of the same major version with minor version >= its own
  (sm_100f on 10.0 and 10.3, sm_120f on 12.0 and 12.1; same page, and NVIDIA's blog "NVIDIA Blackwell and
  NVIDIA CUDA 12.9 Introduce Family-Specific Architecture Features").
* Plain PTX for compute_XY is JIT-compiled by the driver for any device with compute capability >= X.Y
  ("PTX compatibility", CUDA C++ Programming Guide,
  https://docs.nvidia.com/cuda/cuda-c-programming-guide/#application-compatibility).

Run as a script: ``python3 fatbin.py [--keep GLOB ...] [ROOT ...]`` prints one JSON document (schema
``bwstack.cuda-scan/1``); without ROOT it scans the running interpreter's site-packages folders.
"""

from __future__ import annotations

import io
import json
import os
import re
import site
import struct
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Literal

SCAN_SCHEMA = "bwstack.cuda-scan/1"

FATBIN_MAGIC = 0xBA55ED50
EM_CUDA = 190
ELF_MAGIC = b"\x7fELF"
FATBIN_SECTIONS = (".nv_fatbin", "__nv_relfatbin")

KIND_PTX = 1
KIND_ELF = 2
FLAG_COMPRESSED_LZ4 = 0x2000
FLAG_COMPRESSED_ZSTD = 0x8000
FLAG_ARCH_SPECIFIC = 0x100000
FLAG_FAMILY_SPECIFIC = 0x200000

EF_CUDA_ACCELERATORS_V1 = 0x800  # ELF ABI version 7: "a" target
EF_CUDA_ACCELERATORS = 0x8  # ELF ABI version 8: "a" target
NV_COMPAT_ARCH_SPECIFIC = 9  # .nv.compat attribute set to 1 by ptxas 13.0 for "a" targets (observed)

CANDIDATE_SUFFIXES = (".so", ".cubin", ".fatbin")
_SO_VERSIONED = re.compile(r"\.so(\.\d+)+$")
_PTX_TARGET = re.compile(rb"\.target\s+sm_(\d+)([af]?)")

Kind = Literal["sass", "ptx"]
Verdict = Literal["native", "ptx", "missing"]


@dataclass(frozen=True)
class CodeTarget:
    """One kind of GPU code in a binary: SASS (cubin) or PTX, for one SM number and suffix."""

    kind: Kind
    sm: int
    suffix: Literal["", "a", "f"] = ""

    @property
    def major_minor(self) -> tuple[int, int]:
        """Compute capability of the target, e.g. (12, 0) for sm_120a."""
        return divmod(self.sm, 10)

    @property
    def name(self) -> str:
        """``sm_120a`` for SASS, ``compute_120a`` for PTX (nvcc's spelling of a virtual architecture)."""
        prefix = "sm" if self.kind == "sass" else "compute"
        return f"{prefix}_{self.sm}{self.suffix}"

    def __lt__(self, other: CodeTarget) -> bool:
        """SASS before PTX, then by SM number and suffix (the order listings use)."""
        return self._key() < other._key()

    def _key(self) -> tuple[int, int, str]:
        return (0 if self.kind == "sass" else 1, self.sm, self.suffix)

    def runs_on(self, device: tuple[int, int]) -> bool:
        """Whether this code runs on a device of compute capability ``device`` (rules: module docstring)."""
        major, minor = self.major_minor
        if self.suffix == "a":
            return (major, minor) == device
        if self.kind == "sass" or self.suffix == "f":
            return major == device[0] and minor <= device[1]
        return (major, minor) <= device


@dataclass
class FileScan:
    """The GPU code found in one file: distinct targets, how many entries, how many compressed."""

    path: str
    targets: tuple[CodeTarget, ...] = ()
    entries: int = 0
    compressed: int = 0
    error: str | None = None

    def verdict(self, device: tuple[int, int]) -> Verdict:
        """``native``: SASS runs on the device; ``ptx``: only PTX JIT-compiles for it; else ``missing``."""
        if any(t.kind == "sass" and t.runs_on(device) for t in self.targets):
            return "native"
        if any(t.kind == "ptx" and t.runs_on(device) for t in self.targets):
            return "ptx"
        return "missing"

    def to_json(self) -> dict[str, object]:
        return {
            "path": self.path,
            "sass": [t.name for t in self.targets if t.kind == "sass"],
            "ptx": [t.name for t in self.targets if t.kind == "ptx"],
            "entries": self.entries,
            "compressed": self.compressed,
            "error": self.error,
        }


@dataclass
class _Collector:
    """Accumulates entries while a file is read."""

    targets: set[CodeTarget] = field(default_factory=set)
    entries: int = 0
    compressed: int = 0

    def add(self, target: CodeTarget, compressed: bool) -> None:
        self.targets.add(target)
        self.entries += 1
        self.compressed += int(compressed)

    def result(self, path: str) -> FileScan:
        return FileScan(path, tuple(sorted(self.targets)), self.entries, self.compressed)


def parse_arch_name(name: str) -> CodeTarget:
    """``sm_90a`` → SASS target, ``compute_80`` → PTX target; ValueError for anything else."""
    match = re.fullmatch(r"(sm|compute)_(\d{2,3})([af]?)", name)
    if match is None:
        raise ValueError(f"not a CUDA arch name: {name!r}")
    kind: Kind = "sass" if match.group(1) == "sm" else "ptx"
    return CodeTarget(kind, int(match.group(2)), _suffix(match.group(3)))


def _suffix(text: str) -> Literal["", "a", "f"]:
    if text == "a":
        return "a"
    if text == "f":
        return "f"
    return ""


# --- ELF ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ElfSection:
    """Name, file offset and size of one section of a little-endian ELF64 file."""

    name: str
    offset: int
    size: int


def _read_exact(fh: BinaryIO, offset: int, size: int) -> bytes:
    fh.seek(offset)
    data = fh.read(size)
    if len(data) != size:
        raise ValueError(f"truncated file: wanted {size} bytes at offset {offset}")
    return data


def elf_sections(fh: BinaryIO) -> list[ElfSection]:
    """The sections of an ELF64 little-endian file; ValueError if it is not one."""
    ident = _read_exact(fh, 0, 64)
    if ident[:4] != ELF_MAGIC or ident[4] != 2 or ident[5] != 1:
        raise ValueError("not a little-endian ELF64 file")
    (shoff,) = struct.unpack_from("<Q", ident, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", ident, 0x3A)
    if shoff == 0 or shnum == 0:
        return []
    if shentsize < 64:
        raise ValueError(f"bad ELF section header size {shentsize}")
    table = _read_exact(fh, shoff, shentsize * shnum)
    raw = [struct.unpack_from("<IIQQQQ", table, i * shentsize) for i in range(shnum)]
    if shstrndx >= shnum:
        raise ValueError("bad ELF section name table index")
    _, _, _, _, str_off, str_size = raw[shstrndx]
    names = _read_exact(fh, str_off, str_size)
    sections = []
    for name_off, sh_type, _flags, _addr, offset, size in raw:
        end = names.find(b"\0", name_off)
        name = names[name_off : end if end >= 0 else None].decode("latin-1")
        if sh_type != 8:  # SHT_NOBITS has no bytes in the file
            sections.append(ElfSection(name, offset, size))
    return sections


def _elf_machine(header: bytes) -> int:
    return int(struct.unpack_from("<H", header, 18)[0])


def cubin_target(data: bytes) -> CodeTarget:
    """The SASS target of a standalone cubin (an ELF file for EM_CUDA); ValueError if it is not one."""
    if len(data) < 64 or data[:4] != ELF_MAGIC or _elf_machine(data) != EM_CUDA:
        raise ValueError("not a CUDA cubin")
    sm, accel = _cubin_flags(data)
    if not accel:
        accel = _nv_compat_arch_specific(data)
    return CodeTarget("sass", sm, "a" if accel else "")


def _cubin_flags(header: bytes) -> tuple[int, bool]:
    """SM number and the "a" bit from a cubin's ``e_flags`` (ELF64 at 0x30, ELF32 at 0x24)."""
    abi_version = header[8]
    offset = 0x30 if header[4] == 2 else 0x24
    flags = int(struct.unpack_from("<I", header, offset)[0])
    if abi_version >= 8:
        return (flags >> 8) & 0xFF, bool(flags & EF_CUDA_ACCELERATORS)
    return flags & 0xFF, bool(flags & EF_CUDA_ACCELERATORS_V1)


def _nv_compat_arch_specific(data: bytes) -> bool:
    """True when the cubin's ``.nv.compat`` attribute list marks an architecture-specific target."""
    try:
        sections = elf_sections(io.BytesIO(data))
    except (ValueError, struct.error):
        return False
    for section in sections:
        if section.name == ".nv.compat":
            return _compat_attribute(data[section.offset : section.offset + section.size]) > 0
    return False


def _compat_attribute(blob: bytes) -> int:
    """Attribute 9 of a ``.nv.compat`` list of (format, attribute, u16, [data]) records; 0 if absent."""
    pos = 0
    while pos + 4 <= len(blob):
        fmt, attr, value = struct.unpack_from("<BBH", blob, pos)
        if fmt == 0:
            break
        if attr == NV_COMPAT_ARCH_SPECIFIC and fmt in (2, 3):
            return int(value)
        pos += 4 + (value if fmt == 4 else 0)
    return 0


# --- fatbin -------------------------------------------------------------------------------------------------


def read_fatbin(fh: BinaryIO, offset: int, size: int, out: _Collector) -> None:
    """Read every container of a fatbin region (a ``.nv_fatbin`` section or a whole ``.fatbin`` file)."""
    pos, end = offset, offset + size
    while pos + 16 <= end:
        magic, _version, header_size, payload_size = struct.unpack("<IHHQ", _read_exact(fh, pos, 16))
        if magic != FATBIN_MAGIC:
            if magic == 0:
                pos += 8  # padding between containers
                continue
            raise ValueError(f"bad fatbin magic {magic:#x} at offset {pos}")
        if header_size < 16:  # a container header holds at least its own 16 bytes: else no progress, ever
            raise ValueError(f"bad fatbin header size {header_size} at offset {pos}")
        body = pos + header_size
        _read_entries(fh, body, min(body + payload_size, end), out)
        pos = body + payload_size
        pos += -(pos - offset) % 8  # containers are 8-byte aligned within the region


def _read_entries(fh: BinaryIO, pos: int, end: int, out: _Collector) -> None:
    while pos + 64 <= end:
        header = _read_exact(fh, pos, 64)
        kind, _version, header_size, payload_size = struct.unpack_from("<HHIQ", header, 0)
        if header_size < 64:
            raise ValueError(f"bad fatbin entry header size {header_size} at offset {pos}")
        (sm,) = struct.unpack_from("<I", header, 28)
        (flags,) = struct.unpack_from("<Q", header, 40)
        payload = pos + header_size
        if kind in (KIND_PTX, KIND_ELF):
            suffix = _entry_suffix(fh, kind, flags, (payload, payload_size))
            out.add(CodeTarget("ptx" if kind == KIND_PTX else "sass", sm, suffix), _compressed(flags))
        pos = payload + payload_size


def _compressed(flags: int) -> bool:
    return bool(flags & (FLAG_COMPRESSED_LZ4 | FLAG_COMPRESSED_ZSTD))


def _entry_suffix(fh: BinaryIO, kind: int, flags: int, payload: tuple[int, int]) -> Literal["", "a", "f"]:
    """The "a"/"f" suffix from the entry flags, else from an uncompressed cubin or PTX ``.target`` line."""
    offset, size = payload
    if flags & FLAG_ARCH_SPECIFIC:
        return "a"
    if flags & FLAG_FAMILY_SPECIFIC:
        return "f"
    if _compressed(flags) or size < 64:
        return ""
    head = _read_exact(fh, offset, min(size, 4096))
    if kind == KIND_ELF and head[:4] == ELF_MAGIC:
        return "a" if _cubin_flags(head)[1] else ""
    match = _PTX_TARGET.search(head) if kind == KIND_PTX else None
    return _suffix(match.group(2).decode()) if match else ""


# --- files and trees ----------------------------------------------------------------------------------------


def is_candidate(name: str) -> bool:
    """Whether a file name may hold GPU code: ``*.so``, ``*.so.N``, ``*.cubin``, ``*.fatbin``."""
    return name.endswith(CANDIDATE_SUFFIXES) or _SO_VERSIONED.search(name) is not None


def scan_stream(fh: BinaryIO, path: str) -> FileScan | None:
    """Scan one open binary file; None without GPU code, a FileScan with ``error`` when unreadable."""
    out = _Collector()
    try:
        head = fh.read(64)
        if len(head) >= 4 and struct.unpack_from("<I", head)[0] == FATBIN_MAGIC:
            read_fatbin(fh, 0, fh.seek(0, os.SEEK_END), out)
        elif head[:4] == ELF_MAGIC and len(head) >= 20 and _elf_machine(head) == EM_CUDA:
            fh.seek(0)
            out.add(cubin_target(fh.read()), False)
        elif head[:4] == ELF_MAGIC:
            for section in elf_sections(fh):
                if section.name in FATBIN_SECTIONS:
                    read_fatbin(fh, section.offset, section.size, out)
        else:
            return None
    except (ValueError, struct.error, OSError) as exc:
        scan = out.result(path)
        scan.error = str(exc)
        return scan
    return out.result(path) if out.entries else None


def scan_file(path: Path, rel: str | None = None) -> FileScan | None:
    """Scan one file on disk (see :func:`scan_stream`)."""
    name = rel if rel is not None else str(path)
    try:
        with path.open("rb") as fh:
            return scan_stream(fh, name)
    except OSError as exc:
        return FileScan(name, error=str(exc))


def iter_files(root: Path) -> Iterator[tuple[Path, str]]:
    """Every regular file under ``root`` (symlinks skipped), with its POSIX path relative to ``root``."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        base = Path(dirpath)
        for name in sorted(filenames):
            full = base / name
            if not full.is_symlink() and full.is_file():
                yield full, full.relative_to(root).as_posix()


def glob_regex(pattern: str) -> re.Pattern[str]:
    """Compile a path glob: ``*`` and ``?`` stay within one folder, ``**/`` spans any number of folders."""
    out = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


def scan_tree(root: Path, keep: Sequence[str] = ()) -> tuple[list[FileScan], list[str]]:
    """GPU code in every candidate file under ``root``, and the relative paths matching any ``keep`` glob."""
    regexes = [glob_regex(p) for p in keep]
    scans: list[FileScan] = []
    kept: list[str] = []
    for full, rel in iter_files(root):
        if any(r.match(rel) for r in regexes):
            kept.append(rel)
        if is_candidate(full.name):
            scan = scan_file(full, rel)
            if scan is not None:
                scans.append(scan)
    return scans, kept


def default_roots() -> list[Path]:
    """The running interpreter's site-packages / dist-packages folders that exist, without duplicates."""
    candidates: list[str] = [*site.getsitepackages(), site.getusersitepackages(), *sys.path]
    roots: list[Path] = []
    for entry in candidates:
        path = Path(entry)
        if path.name in ("site-packages", "dist-packages") and path.is_dir():
            resolved = path.resolve()
            if resolved not in roots:
                roots.append(resolved)
    return roots


def scan_roots(roots: Iterable[Path], keep: Sequence[str] = ()) -> dict[str, object]:
    """The JSON document printed by the script: roots, per-file GPU code, kept paths."""
    root_list = list(roots)
    files: list[dict[str, object]] = []
    kept: list[dict[str, object]] = []
    for index, root in enumerate(root_list):
        scans, paths = scan_tree(root, keep)
        files.extend({"root": index, **s.to_json()} for s in scans)
        kept.extend({"root": index, "path": p} for p in paths)
    return {"schema": SCAN_SCHEMA, "roots": [str(r) for r in root_list], "files": files, "kept": kept}


def file_scan_from_json(item: dict[str, object]) -> FileScan:
    """Inverse of :meth:`FileScan.to_json` (used on the output of the in-image run)."""
    sass = item.get("sass", [])
    ptx = item.get("ptx", [])
    names = [*(sass if isinstance(sass, list) else []), *(ptx if isinstance(ptx, list) else [])]
    entries = item.get("entries", 0)
    compressed = item.get("compressed", 0)
    error = item.get("error")
    return FileScan(
        path=str(item["path"]),
        targets=tuple(sorted(parse_arch_name(str(n)) for n in names)),
        entries=entries if isinstance(entries, int) else 0,
        compressed=compressed if isinstance(compressed, int) else 0,
        error=error if isinstance(error, str) else None,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """``python3 fatbin.py [--keep GLOB ...] [ROOT ...]``: print the scan as JSON on stdout."""
    args = list(sys.argv[1:] if argv is None else argv)
    keep: list[str] = []
    roots: list[Path] = []
    while args:
        arg = args.pop(0)
        if arg == "--keep" and args:
            keep.append(args.pop(0))
        elif arg.startswith("-"):
            print(f"usage: fatbin.py [--keep GLOB ...] [ROOT ...] (unknown option {arg})", file=sys.stderr)
            return 2
        else:
            roots.append(Path(arg))
    json.dump(scan_roots(roots or default_roots(), keep), sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
