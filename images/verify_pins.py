"""Build-time check that the image really contains what images/<variant>/pins.toml pins (stdlib only).

Run by the Dockerfile after the overrides and source builds are installed. Reads the build args from the
environment: SGLANG_VERSION, PYTHON_PINS ("name==version ..."), SOURCES (for the distributions a source build
replaces). Exits 1 with one line per mismatch; a local version suffix (2.14.1+cu130) matches its public part.
A replaced name may stay installed when the source build itself provides it (DeepGEMM's source wheel is the
distribution ``deep_gemm``): pip records the wheelhouse file it came from in ``direct_url.json`` (PEP 610).
"""

from __future__ import annotations

import os
import sys
from importlib import metadata

#: where the Dockerfile puts the source-built wheels before installing them (images/build-sources.sh output)
WHEELHOUSE = "/tmp/bwstack-wheelhouse/"  # noqa: S108 - a fixed path inside the build container


def installed(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def from_wheelhouse(name: str) -> bool:
    """True when ``name`` was installed from a wheel of the source builds (its PEP 610 direct_url.json)."""
    try:
        text = metadata.distribution(name).read_text("direct_url.json") or ""
    except metadata.PackageNotFoundError:
        return False
    return f"file://{os.environ.get('BWSTACK_WHEELHOUSE', WHEELHOUSE)}" in text


def public(version: str) -> str:
    return version.split("+", 1)[0]


def main() -> int:
    wanted: dict[str, str] = {}
    for item in os.environ.get("PYTHON_PINS", "").split():
        name, _, version = item.partition("==")
        wanted[name] = version
    if os.environ.get("SGLANG_VERSION"):
        wanted["sglang"] = os.environ["SGLANG_VERSION"]
    replaced = set()
    for entry in filter(None, os.environ.get("SOURCES", "").split(";")):
        fields = entry.split("|")
        if len(fields) > 3:
            replaced.update(filter(None, fields[3].split(",")))
    problems = []
    for name, version in sorted(wanted.items()):
        have = installed(name)
        if have is None:
            problems.append(f"{name}: pinned {version}, not installed")
        elif public(have) != version and have != version:
            problems.append(f"{name}: pinned {version}, installed {have}")
    for name in sorted(replaced - set(wanted)):
        if installed(name) is not None and not from_wheelhouse(name):
            problems.append(f"{name}: should have been replaced by a source build, still installed")
    for problem in problems:
        print(f"bwstack: pin mismatch: {problem}", file=sys.stderr)
    if problems:
        print(
            "bwstack: the image does not match images/<variant>/pins.toml; fix the pins or the base",
            file=sys.stderr,
        )
        return 1
    print(f"bwstack: {len(wanted)} pins verified")
    return 0


if __name__ == "__main__":
    sys.exit(main())
