"""``bwstack lock --kernel-facts``: the committed kernel facts, generated with the audit on the real wheels
of a variant's pins (downloaded into a cache), and checked against the pins.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion

from bwstack.errors import ExternalError, UserError
from bwstack.files import atomic_write, sha256_file
from bwstack.know import audit, backends, fatbin
from bwstack.know import inventory as sources
from bwstack.know.rules.book import ARCHES, version_or_none
from bwstack.know.rules.inputs import package_versions
from bwstack.know.rules.kernels import KERNEL_FACTS_FILE, KERNEL_FACTS_SCHEMA, load_kernel_facts
from bwstack.stack import pins, snapshots
from healthchecks import vocabulary

#: packages whose wheels carry the kernels of bwstack.know.backends (torch, triton, tilelang are not audited
# here)
KERNEL_PACKAGES = (
    "sglang",
    "sglang-kernel",
    "sgl-kernel",
    "sgl-flash-mla",
    "sgl-deep-gemm",
    "flashinfer-python",
    "flashinfer-cubin",
)
_KERNEL_PACKAGE_KEYS = frozenset(canonicalize_name(p) for p in KERNEL_PACKAGES)
#: kernel packages that, when not installed, are fetched at run time (so their absence proves nothing)
RUNTIME_DOWNLOADED = {
    "flashinfer-cubin": "flashinfer-cubin is not pinned: FlashInfer downloads these cubins at first use, so "
    "they cannot be audited from wheels (bwstack audit --image on a warmed image can)",
}
#: kernel packages whose pinned release is not on PyPI from this version on (PyPI's flashinfer-cubin ends at
#: 0.6.13; the 0.7 series is served by flashinfer.ai/whl only, which SGLang's Dockerfile installs from)
NOT_ON_PYPI_FROM = {"flashinfer-cubin": "0.7"}
_WHEEL_PLATFORMS = ("manylinux_2_34_x86_64", "manylinux_2_28_x86_64", "manylinux2014_x86_64")


def _not_on_pypi(package: str, version: str) -> bool:
    from packaging.version import InvalidVersion, Version

    floor = NOT_ON_PYPI_FROM.get(package)
    try:
        return floor is not None and Version(version) >= Version(floor)
    except InvalidVersion:
        return False


def kernel_packages(
    variant: pins.Variant, snapshot: snapshots.Snapshot | None
) -> tuple[list[tuple[str, str]], dict[str, str]]:
    """The (package, version) wheels to audit for a variant, and the kernel packages that cannot be (why)."""
    versions = package_versions(variant, snapshot)
    replaced = {pins.normalize_package(p): src.name for src in variant.sources.values() for p in src.replaces}
    wanted: list[tuple[str, str]] = []
    skipped: dict[str, str] = {}
    for package in KERNEL_PACKAGES:
        key = pins.normalize_package(package)
        if key in replaced:
            skipped[package] = f"built from source ([sources.{replaced[key]}]); audit the built image instead"
        elif key in versions and _not_on_pypi(package, versions[key]):
            skipped[package] = (
                f"{package} {versions[key]} is not on PyPI (flashinfer.ai/whl only); audit the built image"
            )
        elif key in versions:
            wanted.append((package, versions[key]))
    return wanted, skipped


def generate_kernel_facts(
    images_dir: Path,
    variant_name: str,
    *,
    wheel_dir: Path | None = None,
    progress: Callable[[str], object] | None = None,
) -> dict[str, Any]:
    """Audit the wheels of a variant's kernel pins (downloaded with pip when missing) for every arch."""
    variant = pins.load_variant(images_dir, variant_name)
    snapshot = _snapshot_or_none(variant)
    wanted, skipped = kernel_packages(variant, snapshot)
    if not wanted:
        raise UserError(
            f"variant {variant_name} pins no kernel package wheel to audit", file=variant.pins_path
        )
    cache = wheel_dir or default_wheel_dir()
    inventory = sources.Inventory("wheels", variant_name, "python")
    wheels: list[dict[str, str]] = []
    for package, version in wanted:
        path = fetch_wheel(package, version, cache)
        if progress is not None:
            progress(f"auditing {path.name}")
        part = sources.inventory_wheel(path, "python")
        inventory.files.extend(part.files)
        inventory.paths |= part.paths
        wheels.append({"package": package, "version": version, "file": path.name, "sha256": _sha256(path)})
    return _facts_document(variant, snapshot, inventory, wheels, skipped)


def _facts_document(
    variant: pins.Variant,
    snapshot: snapshots.Snapshot | None,
    inventory: sources.Inventory,
    wheels: list[dict[str, str]],
    skipped: dict[str, str],
) -> dict[str, Any]:
    reports = {arch: audit.build_report(inventory, vocabulary.ARCH_CAPABILITY[arch]) for arch in ARCHES}
    by_arch = {arch: {r.library.key: r for r in rep.libraries} for arch, rep in reports.items()}
    audited = {pins.normalize_package(w["package"]): f"{w['package']} {w['version']}" for w in wheels}
    libraries: dict[str, Any] = {}
    absent: dict[str, str] = {}
    not_audited: dict[str, str] = {}
    for lib in backends.LIBRARIES:
        results = {arch: by_arch[arch][lib.key] for arch in ARCHES}
        if all(r.verdict == "absent" for r in results.values()):
            _file_absent(lib, audited, absent, not_audited)
            continue
        first = next(iter(results.values()))
        targets = first.to_json()
        libraries[lib.key] = {
            "sass": targets["sass"],
            "ptx": targets["ptx"],
            "files": len(first.files),
            "verdicts": {arch: r.verdict for arch, r in results.items()},
            "reasons": {arch: r.reason for arch, r in results.items()},
        }
    return {
        "schema": KERNEL_FACTS_SCHEMA,
        "variant": variant.name,
        "sglang_version": variant.sglang_version or (snapshot.sglang_version if snapshot else ""),
        "generated_by": f"bwstack lock --kernel-facts --variant {variant.name}",
        "reader": "python (bwstack.know.fatbin)",
        "note": "PyPI wheels of the variant's pins; the base image may carry other builds of the same "
        "versions (check with bwstack audit --image)",
        "arches": list(ARCHES),
        "wheels": wheels,
        "skipped": skipped,
        "libraries": libraries,
        "absent": absent,
        "not_audited": not_audited,
    }


def _file_absent(
    lib: backends.Library, audited: Mapping[str, str], absent: dict[str, str], not_audited: dict[str, str]
) -> None:
    """Say why a library has no files in the audited wheels: not installed, or installed but not audited."""
    packages = [pins.normalize_package(p) for p in lib.packages]
    carriers = [audited[p] for p in packages if p in audited]
    downloaded = [RUNTIME_DOWNLOADED[p] for p in packages if p in RUNTIME_DOWNLOADED]
    if carriers:
        absent[lib.key] = "not in " + ", ".join(carriers)
    elif downloaded:
        not_audited[lib.key] = downloaded[0]
    elif any(p in _KERNEL_PACKAGE_KEYS for p in packages):
        absent[lib.key] = f"the variant pins no {' / '.join(lib.packages)}"
    else:
        not_audited[lib.key] = (
            f"{' / '.join(lib.packages)} (in the base image) is not among the audited wheels"
        )


def write_kernel_facts(path: Path, doc: Mapping[str, Any]) -> None:
    """Write a kernel facts document atomically."""

    atomic_write(path, json.dumps(doc, indent=2, sort_keys=False) + "\n")


def run_kernel_facts(
    images_dir: Path,
    variants: Sequence[str],
    *,
    check: bool,
    wheel_dir: Path | None = None,
    echo: Callable[[str], object] = print,
) -> int:
    """Regenerate (or with ``check`` compare) ``images/<v>/kernel-archs.json``; 0 ok, 1 drift."""
    status = 0
    for name in variants:
        doc = generate_kernel_facts(images_dir, name, wheel_dir=wheel_dir, progress=echo)
        path = images_dir / name / KERNEL_FACTS_FILE
        if not check:
            write_kernel_facts(path, doc)
            echo(f"wrote {path}")
            continue
        committed = load_kernel_facts(images_dir / name)
        if committed is None or dict(committed.doc) != doc:
            echo(
                f"{path}: differs from a fresh audit of the wheels; "
                f"run 'bwstack lock --kernel-facts --variant {name}'"
            )
            status = 1
        else:
            echo(f"{path}: ok")
    return status


def check_kernel_facts(images_dir: Path, variant_name: str) -> list[str]:
    """Form and pin checks of a committed kernel facts file, offline; an empty list when all is well."""
    variant = pins.load_variant(images_dir, variant_name)
    facts = load_kernel_facts(variant.dir)
    if facts is None:
        return [f"{variant.dir / KERNEL_FACTS_FILE}: missing"]
    doc = facts.doc
    problems: list[str] = []
    if doc.get("variant") != variant_name:
        problems.append(f"variant is {doc.get('variant')!r}, expected {variant_name!r}")
    wanted, _ = kernel_packages(variant, _snapshot_or_none(variant))
    recorded = [(w.get("package"), w.get("version")) for w in doc.get("wheels", [])]
    if recorded != wanted:
        problems.append(f"audited wheels {recorded} do not match the variant's pins {wanted}; regenerate")
    for wheel in doc.get("wheels", []):
        if not re.fullmatch(r"[0-9a-f]{64}", str(wheel.get("sha256", ""))):
            problems.append(f"{wheel.get('file')}: no sha256")
    problems += _check_libraries(doc)
    return [f"{facts.path}: {p}" for p in problems]


def _check_libraries(doc: Mapping[str, Any]) -> list[str]:
    known = {lib.key: lib for lib in backends.LIBRARIES}
    problems: list[str] = []
    listed = set(doc.get("libraries", {})) | set(doc.get("absent", {})) | set(doc.get("not_audited", {}))
    if listed != set(known):
        problems.append(
            f"libraries listed {sorted(listed)} differ from bwstack.know.backends {sorted(known)}"
        )
    for key, entry in doc.get("libraries", {}).items():
        lib = known.get(key)
        verdicts = entry.get("verdicts", {})
        if lib is None or set(verdicts) != set(ARCHES):
            problems.append(f"{key}: unknown library or verdicts not given for every arch")
            continue
        if lib.is_jit:
            bad = [a for a, v in verdicts.items() if v not in ("jit", "missing")]
        else:
            bad = [a for a, v in verdicts.items() if v != _binary_verdict(entry, a)]
        if bad:
            problems.append(f"{key}: verdicts for {', '.join(bad)} do not follow from its SASS/PTX targets")
    return problems


def _binary_verdict(entry: Mapping[str, Any], arch: str) -> str:

    device = vocabulary.ARCH_CAPABILITY[arch]
    if any(fatbin.parse_arch_name(t).runs_on(device) for t in entry.get("sass", [])):
        return "native"
    if any(fatbin.parse_arch_name(t).runs_on(device) for t in entry.get("ptx", [])):
        return "ptx"
    return "missing"


def default_wheel_dir() -> Path:
    """``$BWSTACK_WHEEL_CACHE`` or ``~/.cache/bwstack/wheels`` (outside any repository)."""
    configured = os.environ.get("BWSTACK_WHEEL_CACHE")
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "bwstack" / "wheels"


def fetch_wheel(package: str, version: str, cache: Path) -> Path:
    """The Linux x86-64 wheel of ``package==version`` in ``cache``, downloaded with pip when missing."""
    found = find_wheel(cache, package, version)
    if found is not None:
        return found
    cache.mkdir(parents=True, exist_ok=True)
    platforms = [arg for p in _WHEEL_PLATFORMS for arg in ("--platform", p)]
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        *platforms,
        "--python-version",
        "3.11",
        "--implementation",
        "cp",
        f"{package}=={version}",
        "-d",
        str(cache),
    ]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, check=False)
    except subprocess.TimeoutExpired:
        raise ExternalError(f"pip download {package}=={version} timed out") from None
    found = find_wheel(cache, package, version)
    if proc.returncode != 0 or found is None:
        raise ExternalError(
            f"pip download {package}=={version} failed: {' '.join(proc.stderr.split())[-300:]}"
        )
    return found


def find_wheel(cache: Path, package: str, version: str) -> Path | None:
    """A wheel of ``package==version`` for Linux x86-64 (or any platform) already in ``cache``."""
    if not cache.is_dir():
        return None
    want_name, want_version = canonicalize_name(package), version_or_none(version)
    for path in sorted(cache.glob("*.whl")):
        try:
            name, ver, _build, tags = parse_wheel_filename(path.name)
        except (InvalidWheelFilename, InvalidVersion):
            continue
        if name == want_name and ver == want_version and any(_linux_x86(t.platform) for t in tags):
            return path
    return None


def _linux_x86(platform: str) -> bool:
    return platform == "any" or (platform.endswith("x86_64") and "linux" in platform)


def _snapshot_or_none(variant: pins.Variant) -> snapshots.Snapshot | None:
    if not variant.cli_snapshot_path.is_file():
        return None
    return snapshots.load_snapshot(variant.cli_snapshot_path)


def _sha256(path: Path) -> str:

    return sha256_file(path)
