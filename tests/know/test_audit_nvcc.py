"""bwstack audit on CUDA libraries compiled here by nvcc for known arch sets; both readers must agree.

Needs ``nvcc`` (CUDA >= 12.9 for family targets; PyPI ``nvidia-cuda-nvcc`` + ``nvidia-cuda-crt`` +
``nvidia-nvvm`` + ``nvidia-cuda-cccl`` + ``nvidia-cuda-runtime``, or Debian/NVIDIA ``cuda-nvcc-13-0``) and
``cuobjdump`` (PyPI ``nvidia-cuda-cuobjdump``). Missing tools skip these tests, or fail them when CI is set.
The libraries are compiled once per session into a temporary folder; nothing binary is committed.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from bwstack.know import audit, fatbin
from bwstack.know import inventory as sources
from bwstack.know.fatbin import CodeTarget, FileScan
from support.stack import TESTS

SOURCE = TESTS / "fixtures" / "cuda" / "add_one.cu"

# name -> (nvcc mode, -gencode values)
BUILDS: dict[str, tuple[str, tuple[str, ...]]] = {
    "hopper.so": ("so", ("arch=compute_90a,code=sm_90a",)),
    "blackwell.so": ("so", ("arch=compute_100a,code=sm_100a", "arch=compute_120a,code=sm_120a")),
    "ptx80.so": ("so", ("arch=compute_80,code=compute_80",)),
    "ptx90a.so": ("so", ("arch=compute_90a,code=compute_90a",)),
    "family.so": ("so", ("arch=compute_120f,code=sm_120f", "arch=compute_120f,code=compute_120f")),
    "mixed.fatbin": ("fatbin", ("arch=compute_90,code=sm_90", "arch=compute_80,code=compute_80")),
    "k120a.cubin": ("cubin", ("arch=compute_120a,code=sm_120a",)),
    "k90.cubin": ("cubin", ("arch=compute_90,code=sm_90",)),
}

EXPECTED = {
    "hopper.so": ["sm_90a"],
    "blackwell.so": ["sm_100a", "sm_120a"],
    "ptx80.so": ["compute_80"],
    "ptx90a.so": ["compute_90a"],
    "family.so": ["sm_120f", "compute_120f"],
    "mixed.fatbin": ["sm_90", "compute_80"],
    "k120a.cubin": ["sm_120a"],
    "k90.cubin": ["sm_90"],
}


def _tool_or_skip(name: str, finder: Callable[[], Path | None]) -> Path:
    found = finder()
    if found is None:
        message = f"{name} is not installed"
        if os.environ.get("CI"):
            pytest.fail(f"{message} (required under CI)")
        pytest.skip(message)
    assert found is not None
    return found


def _find_nvcc() -> Path | None:
    """``$BWSTACK_NVCC``, nvcc on PATH, the PyPI nvidia-cuda-nvcc wheel's ``nvidia/cu13/bin/nvcc``, or CUDA's."""
    found = os.environ.get("BWSTACK_NVCC") or shutil.which("nvcc")
    if found:
        return Path(found)
    spec = importlib.util.find_spec("nvidia")
    for location in (spec.submodule_search_locations or []) if spec else []:
        for candidate in sorted(Path(location).glob("*/bin/nvcc")):
            return candidate
    cuda = Path("/usr/local/cuda/bin/nvcc")
    return cuda if cuda.is_file() else None


def _compile(nvcc: Path, out: Path, mode: str, gencodes: tuple[str, ...]) -> None:
    args = [str(nvcc), "-o", str(out)]
    args += {
        "so": ["-shared", "-Xcompiler", "-fPIC", "-cudart", "none"],
        "fatbin": ["-fatbin"],
        "cubin": ["-cubin"],
    }[mode]
    for gencode in gencodes:
        args += ["-gencode", gencode]
    proc = subprocess.run([*args, str(SOURCE)], capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, f"{' '.join(args)}\n{proc.stderr}"


@pytest.fixture(scope="session")
def cuda_builds(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every BUILDS entry compiled once (two at a time) into a session temp folder."""
    nvcc = _tool_or_skip("nvcc", _find_nvcc)
    out = tmp_path_factory.mktemp("cuda-fixtures")
    with ThreadPoolExecutor(max_workers=2) as pool:
        jobs = [pool.submit(_compile, nvcc, out / name, *spec) for name, spec in BUILDS.items()]
        for job in jobs:
            job.result()
    return {name: out / name for name in BUILDS}


@pytest.fixture(scope="session")
def cuobjdump() -> Path:
    return _tool_or_skip("cuobjdump", sources.find_cuobjdump)


def _names(scan: FileScan | None) -> list[str]:
    assert scan is not None, "no GPU code found"
    assert scan.error is None, scan.error
    return [t.name for t in scan.targets]


@pytest.mark.parametrize("name", list(BUILDS))
def test_python_reader_finds_the_compiled_archs(cuda_builds: dict[str, Path], name: str) -> None:
    assert _names(fatbin.scan_file(cuda_builds[name], name)) == EXPECTED[name]


def _cuobjdump_view(targets: tuple[CodeTarget, ...]) -> set[str]:
    """What cuobjdump can show: it prints family-specific SASS (sm_120f) as plain sm_120."""
    return {
        CodeTarget(t.kind, t.sm, "" if t.kind == "sass" and t.suffix == "f" else t.suffix).name
        for t in targets
    }


@pytest.mark.parametrize("name", list(BUILDS))
def test_readers_agree(cuda_builds: dict[str, Path], cuobjdump: Path, name: str) -> None:
    ours = fatbin.scan_file(cuda_builds[name], name)
    theirs = sources.cuobjdump_scan(cuobjdump, cuda_builds[name], name)
    assert ours is not None and theirs.error is None, theirs.error
    assert _cuobjdump_view(ours.targets) == {t.name for t in theirs.targets}
    assert ours.entries == theirs.entries


@pytest.mark.parametrize(
    ("name", "device", "verdict"),
    [
        ("hopper.so", (12, 0), "missing"),  # sm_90a runs on 9.0 only
        ("hopper.so", (9, 0), "native"),
        ("blackwell.so", (12, 0), "native"),
        ("blackwell.so", (12, 1), "missing"),  # sm_120a is 12.0 only
        ("blackwell.so", (10, 3), "missing"),  # sm_100a is 10.0 only
        ("ptx80.so", (12, 0), "ptx"),
        ("ptx80.so", (7, 5), "missing"),
        ("ptx90a.so", (9, 0), "ptx"),
        ("ptx90a.so", (12, 0), "missing"),  # arch-specific PTX does not JIT forward
        ("family.so", (12, 1), "native"),
        ("family.so", (10, 0), "missing"),
        ("mixed.fatbin", (12, 0), "ptx"),
        ("mixed.fatbin", (9, 0), "native"),
        ("k120a.cubin", (12, 0), "native"),
        ("k90.cubin", (12, 0), "missing"),
    ],
)
def test_verdicts(cuda_builds: dict[str, Path], name: str, device: tuple[int, int], verdict: str) -> None:
    scan = fatbin.scan_file(cuda_builds[name], name)
    assert scan is not None and scan.verdict(device) == verdict


@pytest.fixture
def site(cuda_builds: dict[str, Path], tmp_path: Path) -> Path:
    """A site-packages laid out like sglang-kernel, with the compiled libraries in the library files' places."""
    layout = {
        "sgl_kernel/sm100/common_ops.abi3.so": "blackwell.so",
        "sgl_kernel/flashmla_ops.abi3.so": "hopper.so",
        "sgl_kernel/flash_ops.abi3.so": "ptx80.so",
        "flash_mla/cuda.abi3.so": "family.so",
        "flashinfer_cubin/cubins/abc/fmha/trtllm-gen/fmhaSm90Kernel.cubin": "k90.cubin",
        "other/k.fatbin": "mixed.fatbin",
    }
    for rel, name in layout.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(cuda_builds[name], tmp_path / rel)
    return tmp_path


@pytest.mark.parametrize("reader", ["python", "cuobjdump"])
def test_site_audit(site: Path, cuobjdump: Path, reader: sources.Reader) -> None:
    out: list[str] = []
    status = audit.run_audit(image=None, site=site, wheel=None, arch="sm_120", as_json=True, echo=out.append,
                             reader=reader)  # fmt: skip
    doc = json.loads(out[0])
    assert status == 1 and doc["source"]["reader"] == reader
    libs = {lib["key"]: lib["verdict"] for lib in doc["libraries"]}
    assert libs["sgl_kernel.common_ops"] == "native"
    assert libs["sgl_kernel.flashmla_ops"] == "missing"
    assert libs["sgl_kernel.flash_ops"] == "ptx"
    assert libs["flash_mla"] == "native"  # sm_120f
    assert libs["flashinfer.trtllm_gen_fmha"] == "missing"
    backends_ = {f"{b['field']}={b['value']}": b["verdict"] for b in doc["backends"]}
    # flashmla_* accept either FlashMLA build; the family build in flash_mla carries 12.x SASS
    assert backends_["dsa_decode_backend=flashmla_kv"] == "native"
    assert backends_["dsa_decode_backend=trtllm"] == "missing"
    assert backends_["attention_backend=fa3"] == "ptx"
    assert sorted(doc["missing"]) == sorted(
        ["attention_backend=trtllm_mla", "attention_backend=trtllm_mha", "dsa_prefill_backend=trtllm",
         "dsa_decode_backend=trtllm"]
    )  # fmt: skip
