"""Sweep bundles built in tests from the real bundle the project ships (``evidence/bundles/*.tar.gz``: a real
CPU sweep): its parts, a manifest that lists them truthfully, tar members of any kind, packed as a bundle."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile

from bwstack.sweep import bundleread
from support.stack import ROOT

#: the host facts of an sm120 GPU host (doctor's fields), for a bundle whose rows claim GPU truth
GPU_HOST = {
    "gpu_count": 8,
    "gpus": [{"name": "NVIDIA RTX PRO 6000 Blackwell Server Edition"}] * 8,
    "gpu_model": "NVIDIA RTX PRO 6000 Blackwell Server Edition",
    "gpu_arch": "sm120",
    "driver": "580.82.07",
}
SHIPPED = sorted((ROOT / "evidence" / "bundles").glob("*.tar.gz"))
MIB = 1024 * 1024


def base_parts() -> dict[str, bytes]:
    assert SHIPPED, "evidence/bundles/ holds no bundle"
    return dict(bundleread.read_bundle(SHIPPED[0]).parts)


def manifest_for(parts: dict[str, bytes]) -> bytes:
    manifest = json.loads(base_parts()[bundleread.MANIFEST])
    manifest["parts"] = [
        {"name": n, "sha256": hashlib.sha256(d).hexdigest(), "bytes": len(d)}
        for n, d in parts.items()
        if n != bundleread.MANIFEST
    ]
    return json.dumps(manifest).encode()


Member = tuple[tarfile.TarInfo, bytes]


def regular(name: str, data: bytes) -> Member:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


def special(name: str, kind: bytes, target: str = "") -> Member:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = target
    return info, b""


def pack(members: list[Member]) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if info.isreg() else None)
    return gzip.compress(raw.getvalue(), mtime=0)


def bundle_of(parts: dict[str, bytes], *extra: Member, manifest: bool = True) -> bytes:
    """The parts with a manifest that lists them truthfully, then ``extra`` members (not in the manifest)."""
    members = [regular(bundleread.MANIFEST, manifest_for(parts))] if manifest else []
    members += [regular(n, d) for n, d in parts.items() if n != bundleread.MANIFEST]
    return pack(members + list(extra))


def with_part(name: str, data: bytes) -> bytes:
    parts = base_parts()
    parts[name] = data
    return bundle_of(parts)
