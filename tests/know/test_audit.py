"""bwstack audit without a CUDA compiler: arch rules, the fatbin/cubin reader on synthetic binaries, verdicts,
the JSON/text report, bad input, and (marked docker) the --image path on an imported image.

Synthetic binaries follow the layouts documented in ``bwstack.know.fatbin``; ``test_audit_nvcc.py`` checks the same
reader on nvcc output and against cuobjdump.
"""

from __future__ import annotations

import io
import json
import shutil
import struct
import subprocess
import tarfile
import uuid
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from bwstack.cli import main
from bwstack.errors import UserError
from bwstack.know import audit, fatbin
from bwstack.know import inventory as sources
from bwstack.know.fatbin import CodeTarget, FileScan

# --- synthetic binaries -------------------------------------------------------------------------------------

FLAGS_BASE = 0x11  # 64-bit, linux
A, F, ZSTD = fatbin.FLAG_ARCH_SPECIFIC, fatbin.FLAG_FAMILY_SPECIFIC, fatbin.FLAG_COMPRESSED_ZSTD


def elf64(sections: list[tuple[str, bytes]], *, machine: int = 62, abi: int = 0, eflags: int = 0) -> bytes:
    """A minimal little-endian ELF64 file with the given sections (header, data, names, section table)."""
    names = bytearray(b"\0")
    offsets = []
    body = bytearray()
    for name, data in sections:
        offsets.append((len(names), 64 + len(body), len(data)))
        names += name.encode() + b"\0"
        body += data
    shstr_name = len(names)
    names += b".shstrtab\0"
    shstr_off = 64 + len(body)
    body += names
    body += bytes(-len(body) % 8)
    shoff = 64 + len(body)
    table = bytes(64)  # SHT_NULL
    for name_off, off, size in offsets:
        table += struct.pack("<IIQQQQIIQQ", name_off, 1, 0, 0, off, size, 0, 0, 1, 0)
    table += struct.pack("<IIQQQQIIQQ", shstr_name, 3, 0, 0, shstr_off, len(names), 0, 0, 1, 0)
    ident = b"\x7fELF" + bytes([2, 1, 1, 0x41 if abi >= 8 else 0x33, abi]) + bytes(7)
    header = ident + struct.pack(
        "<HHIQQQIHHHHHH",
        3,
        machine,
        1,
        0,
        0,
        shoff,
        eflags,
        64,
        0,
        0,
        64,
        len(sections) + 2,
        len(sections) + 1,
    )
    return header + bytes(body) + table


def cubin(sm: int, *, abi: int = 8, accel: bool = False, compat_a: int | None = None) -> bytes:
    """A cubin header: SM in e_flags (ABI 7: low byte, ABI 8: bits 8..15), optional .nv.compat attribute 9."""
    if abi >= 8:
        eflags = 0x06000002 | (sm << 8) | (fatbin.EF_CUDA_ACCELERATORS if accel else 0)
    else:
        eflags = 0x00050500 | sm | (fatbin.EF_CUDA_ACCELERATORS_V1 if accel else 0)
    sections = [(".text._Z7add_onePfi", bytes(16))]
    if compat_a is not None:
        sections.append((".nv.compat", bytes([2, 2, 1, 0, 2, 9, compat_a, 0, 4, 11, 8, 0]) + bytes(8)))
    return elf64(sections, machine=fatbin.EM_CUDA, abi=abi, eflags=eflags)


def entry(kind: int, sm: int, flags: int = 0, payload: bytes = b"") -> bytes:
    """One fatbin entry: 64-byte header (kind, version, header size, payload size, arch at +28, flags at +40)."""
    payload = payload or bytes(32)
    header = struct.pack("<HHIQIIHHIIIQQQ", kind, 0x101, 64, len(payload), 0, 0, 8, 1, sm, 0, 0,
                         FLAGS_BASE | flags, 0, 0)  # fmt: skip
    assert len(header) == 64
    return header + payload


def container(*entries: bytes) -> bytes:
    body = b"".join(entries)
    return struct.pack("<IHHQ", fatbin.FATBIN_MAGIC, 1, 16, len(body)) + body


def host_so(*containers: bytes) -> bytes:
    """A host shared object whose .nv_fatbin holds the containers (zero padding between them)."""
    blob = b"".join(c + bytes(-len(c) % 8) + bytes(8) for c in containers)
    return elf64([(".text", b"\xc3" * 8), (".nv_fatbin", blob)])


def sass(sm: int, flags: int = 0) -> bytes:
    return entry(fatbin.KIND_ELF, sm, flags)


def ptx(sm: int, flags: int = 0) -> bytes:
    return entry(fatbin.KIND_PTX, sm, flags)


def names(scan: FileScan | None) -> list[str]:
    assert scan is not None
    return [t.name for t in scan.targets]


def scan_bytes(data: bytes, name: str = "x.so") -> FileScan | None:
    return fatbin.scan_stream(io.BytesIO(data), name)


# --- arch rules ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "device", "runs"),
    [
        ("sm_120a", (12, 0), True),
        ("sm_120a", (12, 1), False),  # arch-specific: exactly 12.0
        ("sm_120", (12, 0), True),
        ("sm_120", (12, 1), True),  # same major, higher minor
        ("sm_121", (12, 0), False),  # not backwards
        ("sm_120f", (12, 1), True),  # family: 12.x
        ("sm_100a", (12, 0), False),
        ("sm_100", (12, 0), False),  # SASS never crosses a major version
        ("sm_100f", (10, 3), True),
        ("sm_100f", (12, 0), False),
        ("sm_103a", (10, 0), False),
        ("sm_90a", (9, 0), True),
        ("sm_90", (12, 0), False),
        ("compute_80", (12, 0), True),  # PTX JITs forward
        ("compute_80", (7, 5), False),
        ("compute_90a", (9, 0), True),
        ("compute_90a", (10, 0), False),  # arch-specific PTX does not
        ("compute_90a", (12, 0), False),
        ("compute_120f", (12, 1), True),
        ("compute_100f", (12, 0), False),
        ("compute_120", (12, 1), True),
    ],
)
def test_runs_on(target: str, device: tuple[int, int], runs: bool) -> None:
    assert fatbin.parse_arch_name(target).runs_on(device) is runs


def test_file_verdicts() -> None:
    native = FileScan("a", (CodeTarget("sass", 120, "a"), CodeTarget("ptx", 80)))
    ptx_only = FileScan("b", (CodeTarget("sass", 90, "a"), CodeTarget("ptx", 80)))
    missing = FileScan("c", (CodeTarget("sass", 100, "a"), CodeTarget("ptx", 90, "a")))
    assert [s.verdict((12, 0)) for s in (native, ptx_only, missing)] == ["native", "ptx", "missing"]


@pytest.mark.parametrize(("text", "device"), [("sm_120", (12, 0)), ("SM120", (12, 0)), ("12.1", (12, 1)),
                                               ("sm_90", (9, 0)), ("sm100", (10, 0)), (" sm_103 ", (10, 3))])  # fmt: skip
def test_parse_target(text: str, device: tuple[int, int]) -> None:
    assert audit.parse_target(text) == device


@pytest.mark.parametrize("text", ["sm_999", "foo", "12", "sm_120a", "sm_100f", "13.0", ""])
def test_parse_target_rejects_and_lists_valid(text: str) -> None:
    with pytest.raises(UserError) as err:
        audit.parse_target(text)
    assert err.value.field == "--arch"
    assert "sm_75" in err.value.message and "sm_121" in err.value.message


# --- reader: synthetic binaries -----------------------------------------------------------------------------


def test_fatbin_entries_flags_and_padding() -> None:
    data = host_so(
        container(sass(90, A), sass(100, F), ptx(80, ZSTD)),
        container(sass(120, A | ZSTD), ptx(90, A)),
    )
    scan = scan_bytes(data)
    assert names(scan) == ["sm_90a", "sm_100f", "sm_120a", "compute_80", "compute_90a"]
    assert scan is not None and (scan.entries, scan.compressed, scan.error) == (5, 2, None)


def test_suffix_from_uncompressed_payloads() -> None:
    """Without fatbin flags, "a" comes from the embedded cubin's e_flags or the PTX ``.target`` line."""
    data = host_so(
        container(
            entry(fatbin.KIND_ELF, 90, payload=cubin(90, abi=7, accel=True)),
            entry(fatbin.KIND_ELF, 120, payload=cubin(120, abi=8, accel=True)),
            entry(fatbin.KIND_ELF, 89, payload=cubin(89, abi=7)),
            entry(fatbin.KIND_PTX, 100, payload=b"//\n.version 8.7\n.target sm_100f\n" + bytes(40)),
            entry(fatbin.KIND_PTX, 90, ZSTD, payload=b".target sm_90a" + bytes(60)),  # compressed: not read
        )
    )
    assert names(scan_bytes(data)) == ["sm_89", "sm_90a", "sm_120a", "compute_90", "compute_100f"]


@pytest.mark.parametrize(
    ("blob", "expected"),
    [
        (cubin(90, abi=7), "sm_90"),
        (cubin(90, abi=7, accel=True), "sm_90a"),
        (cubin(100, abi=8, accel=True), "sm_100a"),
        (cubin(120, abi=8), "sm_120"),
        (cubin(120, abi=8, compat_a=1), "sm_120a"),  # ptxas 13.0 marks "a" only in .nv.compat
        (cubin(120, abi=8, compat_a=0), "sm_120"),
    ],
)
def test_standalone_cubin(blob: bytes, expected: str) -> None:
    assert names(scan_bytes(blob, "k.cubin")) == [expected]


def test_standalone_fatbin_file() -> None:
    assert names(scan_bytes(container(sass(120, A), ptx(120, F)), "k.fatbin")) == ["sm_120a", "compute_120f"]


def test_files_without_gpu_code() -> None:
    assert scan_bytes(elf64([(".text", b"\xc3")])) is None
    assert scan_bytes(b"#!/bin/sh\necho not an elf\n") is None
    assert scan_bytes(b"") is None


def test_broken_fatbin_is_reported_not_raised() -> None:
    bad = elf64([(".nv_fatbin", container(sass(90)) + struct.pack("<IHHQ", 0xDEADBEEF, 1, 16, 0))])
    scan = scan_bytes(bad)
    assert scan is not None and scan.error and "bad fatbin magic" in scan.error
    assert names(scan) == ["sm_90"]  # what was read before the damage is kept
    truncated = host_so(container(sass(90)))[:-200]
    result = scan_bytes(truncated)
    assert result is not None and result.error


def test_is_candidate_and_globs() -> None:
    assert all(
        fatbin.is_candidate(n) for n in ("a.so", "libcudart.so.13", "libx.so.1.2", "k.cubin", "k.fatbin")
    )
    assert not any(fatbin.is_candidate(n) for n in ("a.py", "a.so.txt", "cubin"))
    rx = fatbin.glob_regex("flashinfer_cubin/cubins/**/fmha/trtllm-gen/*.cubin")
    assert rx.match("flashinfer_cubin/cubins/abc/fmha/trtllm-gen/k.cubin")
    assert rx.match("flashinfer_cubin/cubins/fmha/trtllm-gen/k.cubin")
    assert not rx.match("flashinfer_cubin/cubins/abc/fmha/trtllm-gen/sub/k.cubin")
    assert fatbin.glob_regex("sgl_kernel/flash_ops*.so").match("sgl_kernel/flash_ops.abi3.so")
    assert not fatbin.glob_regex("sgl_kernel/flash_ops*.so").match("sgl_kernel/flash_ops.abi3.so.bak")


@pytest.mark.parametrize(
    ("path", "rel"),
    [
        ("usr/lib/python3.12/site-packages/sgl_kernel/a.so", "sgl_kernel/a.so"),
        ("/opt/venv/lib/python3.11/dist-packages/x/site-packages/y.so", "y.so"),
        ("pkg-1.0.data/platlib/flash_mla/cuda.abi3.so", "flash_mla/cuda.abi3.so"),
        ("sgl_kernel/a.so", "sgl_kernel/a.so"),
    ],
)
def test_site_relative(path: str, rel: str) -> None:
    assert sources.site_relative(path) == rel


def test_parse_cuobjdump_output() -> None:
    text = (
        "ELF file    1: flashmla_ops.1.sm_90a.cubin\nELF file    2: flashmla_ops.2.sm_100.cubin\n"
        "ELF file    3: flashmla_ops.3.sm_90a.cubin\nPTX file    1: flashmla_ops.1.sm_80.ptx\n"
        "PTX file    2: x.2.sm_120f.ptx\ncuobjdump info    : something else\n"
    )
    scan = sources.parse_cuobjdump(text, "f.so")
    assert names(scan) == ["sm_90a", "sm_100", "compute_80", "compute_120f"] and scan.entries == 5


def test_scan_json_round_trip() -> None:
    scan = FileScan("a/b.so", (CodeTarget("sass", 120, "a"), CodeTarget("ptx", 80)), 3, 1)
    assert fatbin.file_scan_from_json(scan.to_json()) == scan


def test_script_main_prints_scan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "k.so").write_bytes(host_so(container(sass(120, A))))
    (tmp_path / "pkg" / "__init__.py").write_text("")
    assert fatbin.main(["--keep", "pkg/*.py", str(tmp_path)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == fatbin.SCAN_SCHEMA
    assert [(f["path"], f["sass"]) for f in doc["files"]] == [("pkg/k.so", ["sm_120a"])]
    assert doc["kept"] == [{"root": 0, "path": "pkg/__init__.py"}]
    assert fatbin.main(["--bogus"]) == 2


# --- whole audit on a synthetic site-packages ---------------------------------------------------------------

SITE_FILES = {
    # the arch sets of sglang-kernel 0.4.10 (cuobjdump, sm120-backends.md §8)
    "sgl_kernel/sm100/common_ops.abi3.so": [
        sass(80),
        sass(89),
        sass(90),
        sass(90, A),
        sass(100, F),
        sass(120, A),
    ],
    "sgl_kernel/flashmla_ops.abi3.so": [sass(90, A), sass(100, F), sass(103, A)],
    "sgl_kernel/flash_ops.abi3.so": [sass(80), sass(86), sass(90, A), ptx(80)],
    "sgl_kernel/__init__.py": [],
    "deep_gemm/__init__.py": [],
    "deep_gemm/include/deep_gemm/impls/sm90_fp8_paged_mqa_logits.cuh": [],
    "deep_gemm/include/deep_gemm/impls/sm90_fp8_gemm_1d2d.cuh": [],
    "vendor/lib/libextra.so": [sass(120)],
    "vendor/cubins/one.cubin": [],
}


def make_site(root: Path) -> Path:
    for rel, entries in SITE_FILES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if rel.endswith(".cubin"):
            path.write_bytes(cubin(90, abi=7, accel=True))
        else:
            path.write_bytes(host_so(container(*entries)) if entries else b"")
    (root / "plain.so").write_bytes(elf64([(".text", b"\xc3")]))
    return root


def run_json(**kwargs: object) -> tuple[int, dict[str, Any]]:
    out: list[str] = []
    args: dict[str, Any] = {
        "image": None,
        "site": None,
        "wheel": None,
        "arch": "sm_120",
        "reader": "python",
    }
    args.update(kwargs)
    status = audit.run_audit(as_json=True, echo=out.append, **args)
    return status, json.loads(out[0])


def verdicts(doc: dict[str, Any], kind: str) -> dict[str, str]:
    items = doc[kind]
    assert isinstance(items, list)
    if kind == "backends":
        return {f"{b['field']}={b['value']}": b["verdict"] for b in items}
    return {item["key"]: item["verdict"] for item in items}


def test_site_audit_sm120(tmp_path: Path) -> None:
    status, doc = run_json(site=make_site(tmp_path))
    assert status == 1 and doc["exit_status"] == 1 and doc["schema"] == audit.AUDIT_SCHEMA
    libs = verdicts(doc, "libraries")
    assert libs["sgl_kernel.common_ops"] == "native"
    assert libs["sgl_kernel.flashmla_ops"] == "missing"
    assert libs["sgl_kernel.flash_ops"] == "ptx"
    assert libs["deep_gemm.mqa_logits"] == "missing"  # no sm120 JIT sources
    assert libs["torch"] == libs["flash_mla"] == "absent"
    backends_ = verdicts(doc, "backends")
    assert backends_["dsa_decode_backend=flashmla_kv"] == "missing"
    assert backends_["attention_backend=fa3"] == "ptx"
    assert backends_["attention_backend=dsa"] == "missing"
    assert backends_["dsa_decode_backend=trtllm"] == "absent"
    assert set(doc["missing"]) == {k for k, v in backends_.items() if v == "missing"}
    files = {f["path"]: f for f in doc["files"]}
    assert set(files) == {p for p in SITE_FILES if p.endswith((".so", ".cubin"))}
    assert files["vendor/lib/libextra.so"]["library"] is None
    assert files["sgl_kernel/flashmla_ops.abi3.so"]["sass"] == ["sm_90a", "sm_100f", "sm_103a"]


def test_site_audit_hopper_passes(tmp_path: Path) -> None:
    status, doc = run_json(site=make_site(tmp_path), arch="sm_90")
    assert status == 0 and doc["missing"] == []
    assert verdicts(doc, "libraries")["deep_gemm.mqa_logits"] == "jit"
    assert verdicts(doc, "backends")["dsa_decode_backend=flashmla_kv"] == "native"


def test_text_report(tmp_path: Path) -> None:
    out: list[str] = []
    status = audit.run_audit(
        image=None, site=make_site(tmp_path), wheel=None, arch="sm_120", as_json=False, echo=out.append,
        reader="python",
    )  # fmt: skip
    text = out[0]
    assert status == 1
    for needle in ("Kernel libraries", "Backends", "Other CUDA files", "MISSING", "PTX JIT only", "exit 1:",
                   "vendor/lib/libextra.so", "dsa_decode_backend=flashmla_kv", "sm_90a sm_100f sm_103a"):  # fmt: skip
        assert needle in text, needle


def test_wheel_audit_matches_site_audit(tmp_path: Path) -> None:
    site = make_site(tmp_path / "site")
    wheel = tmp_path / "fake-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for path in sorted(site.rglob("*")):
            if path.is_file():
                rel = path.relative_to(site).as_posix()
                zf.write(path, ("fake-1.0.data/platlib/" + rel) if rel.startswith("vendor/") else rel)
        zf.writestr("fake-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\n")
    wheel_status, wheel_doc = run_json(wheel=wheel)
    site_status, site_doc = run_json(site=site)
    assert wheel_status == site_status == 1
    for kind in ("libraries", "backends"):
        assert verdicts(wheel_doc, kind) == verdicts(site_doc, kind)
    assert [f["path"] for f in wheel_doc["files"]] == [f["path"] for f in site_doc["files"]]


def test_bad_input(tmp_path: Path) -> None:
    def call(**kwargs: object) -> UserError:
        args: dict[str, Any] = {
            "image": None,
            "site": None,
            "wheel": None,
            "arch": "sm_120",
            "reader": "python",
        }
        args.update(kwargs)
        with pytest.raises(UserError) as err:
            audit.run_audit(as_json=True, echo=print, **args)
        return err.value

    assert "exactly one" in call().message
    assert "exactly one" in call(site=tmp_path, wheel=tmp_path / "x.whl").message
    assert call(site=tmp_path / "missing").field == "--path"
    assert call(wheel=tmp_path / "missing.whl").field == "--wheel"
    (tmp_path / "text.whl").write_text("not a zip")
    assert "not a wheel" in call(wheel=tmp_path / "text.whl").message
    with zipfile.ZipFile(tmp_path / "nowheel.whl", "w") as zf:
        zf.writestr("a.py", "")
    assert "dist-info/WHEEL" in call(wheel=tmp_path / "nowheel.whl").message
    assert call(site=tmp_path, arch="sm_120a").field == "--arch"
    assert call(site=tmp_path, reader="objdump").field == "--reader"


def test_cuobjdump_reader_required_but_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BWSTACK_CUOBJDUMP", str(tmp_path / "no-such-tool"))
    with pytest.raises(UserError) as err:
        audit.run_audit(image=None, site=tmp_path, wheel=None, arch="sm_120", as_json=True, echo=print,
                        reader="cuobjdump")  # fmt: skip
    assert "nvidia-cuda-cuobjdump" in err.value.message


def test_cli_exit_codes(tmp_path: Path) -> None:
    runner = CliRunner()
    site = make_site(tmp_path)
    result = runner.invoke(main, ["audit", "--path", str(site), "--reader", "python", "--json"])
    assert result.exit_code == 1, result.output
    assert json.loads(result.stdout)["target"] == {"arch": "sm_120", "compute_capability": "12.0"}
    ok = runner.invoke(main, ["audit", "--path", str(site), "--reader", "python", "--arch", "sm_90"])
    assert ok.exit_code == 0 and "exit 0:" in ok.stdout
    bad = runner.invoke(main, ["audit", "--path", str(site), "--arch", "sm_999"])
    assert bad.exit_code == 2
    assert bad.stderr.count("\n") == 1 and bad.stderr.startswith("bwstack: --arch: unknown arch 'sm_999'")
    assert "Traceback" not in bad.output


# --- --image (docker) ---------------------------------------------------------------------------------------


def _docker() -> str:
    docker = shutil.which("docker")
    assert docker is not None
    return docker


@pytest.fixture
def imported_image(docker_engine: None, tmp_path: Path) -> Iterator[str]:
    """An image made by ``docker import`` (no base image, no python3) holding a synthetic site-packages."""
    docker = _docker()
    site = make_site(tmp_path / "site")
    archive = tmp_path / "rootfs.tar"
    with tarfile.open(archive, "w") as tar:
        tar.add(site, arcname="usr/lib/python3/dist-packages")
    tag = f"bwstack-audit-test:{uuid.uuid4().hex[:12]}"
    subprocess.run([docker, "import", str(archive), tag], check=True, capture_output=True)
    try:
        yield tag
    finally:
        subprocess.run([docker, "rmi", "-f", tag], check=False, capture_output=True)


def _containers_of(docker: str, image: str) -> str:
    proc = subprocess.run([docker, "ps", "-a", "-q", "--filter", f"ancestor={image}"], capture_output=True,
                          text=True, check=False)  # fmt: skip
    return proc.stdout.strip()


@pytest.mark.docker
def test_image_without_python_is_exported(imported_image: str, tmp_path: Path) -> None:
    status, doc = run_json(image=imported_image, reader="auto")
    assert status == 1
    assert doc["source"]["kind"] == "image" and "docker export" in doc["source"]["reader"]
    assert doc["source"]["roots"] == ["/usr/lib/python3/dist-packages"]
    _, site_doc = run_json(site=make_site(tmp_path / "again"))
    for kind in ("libraries", "backends"):
        assert verdicts(doc, kind) == verdicts(site_doc, kind)
    assert _containers_of(_docker(), imported_image) == ""  # removed again


@pytest.mark.docker
def test_missing_image_is_user_error(docker_engine: None) -> None:
    with pytest.raises(UserError) as err:
        run_json(image=f"bwstack-audit-absent:{uuid.uuid4().hex[:12]}")
    assert err.value.field == "--image" and "never pulls" in err.value.message


@pytest.mark.docker
def test_image_with_python_runs_the_reader_inside(python_image: str, tmp_path: Path) -> None:
    """fatbin.py piped into the image's python3 scans its site-packages in place."""
    docker = _docker()
    base = python_image
    make_site(tmp_path / "ctx" / "site")
    (tmp_path / "ctx" / "Dockerfile").write_text(
        f"FROM {base}\nCOPY site/ /tmp/site/\n"
        'RUN python3 -c "import shutil, site; '
        "shutil.copytree('/tmp/site', site.getsitepackages()[0], dirs_exist_ok=True)\" && rm -rf /tmp/site\n"
    )
    tag = f"bwstack-audit-test:{uuid.uuid4().hex[:12]}"
    build = subprocess.run([docker, "build", "-q", "-t", tag, str(tmp_path / "ctx")], capture_output=True,
                           text=True, check=False)  # fmt: skip
    try:
        assert build.returncode == 0, build.stderr
        status, doc = run_json(image=tag, reader="auto")
        assert status == 1 and doc["source"]["reader"] == "python (in image)"
        _, site_doc = run_json(site=make_site(tmp_path / "again"))
        for kind in ("libraries", "backends"):
            assert verdicts(doc, kind) == verdicts(site_doc, kind)
    finally:
        subprocess.run([docker, "rmi", "-f", tag], check=False, capture_output=True)
