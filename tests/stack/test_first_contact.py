"""What a read of the real base images predicts for the first build and start (shared reference first-contact.md),
checked without Docker: the Dockerfile's environment is healthchecks/imagelayout.py, no build arg can be shadowed
by an inherited ENV, verify_pins.py accepts a source build that provides a replaced name, and the pins hold what
the rows ask for. The same code meets real Docker in tests/host/test_selfcheck_image.py.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bwstack.stack import pins
from healthchecks import imagelayout
from support.stack import ROOT

NIGHTLY = "nightly-cu13-20260705-754524d8"
#: environment variables the real bases set (nvidia/cuda sets CUDA_VERSION; first-contact.md row 2.1)
BASE_ENV = ("CUDA_VERSION", "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES", "PATH", "LD_LIBRARY_PATH")


def _dockerfile() -> str:
    return re.sub(r"\\\n\s*", " ", (ROOT / "Dockerfile").read_text(encoding="utf-8"))


def _final_env() -> dict[str, str]:
    """The serve stage's ENV instruction, as name -> value."""
    line = [ln for ln in _dockerfile().splitlines() if ln.startswith("ENV ")][-1]
    return dict(item.split("=", 1) for item in line.split()[1:])


def test_the_dockerfile_env_is_the_image_layout() -> None:
    env = _final_env()
    constant = {k: v for k, v in env.items() if "${" not in v}
    assert constant == imagelayout.image_env()
    assert env["SGLANG_DG_CACHE_DIR"] == env["DG_JIT_CACHE_DIR"]  # SGLang copies the first into the second
    assert env["HOME"] == imagelayout.HOME and env["SGLANG_RUST_BUILD_MODE"] == "never"


def test_every_cache_is_on_the_jit_volume_and_documented() -> None:
    design = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    for name, path in imagelayout.CACHE_ENV.items():
        assert path.startswith(imagelayout.JIT_CACHE + "/"), name
        assert f"`{name}`" in design, f"docs/design.md does not name {name}"


def test_no_build_arg_can_be_shadowed_by_an_inherited_env() -> None:
    """An ENV of the base (or of a bwstack image rebuilt on) beats a build arg of the same name."""
    text = _dockerfile()
    args = set(re.findall(r"^ARG ([A-Z_]+)", text, flags=re.MULTILINE))
    env_set = set(_final_env())
    assert not args & (env_set | set(BASE_ENV)), sorted(args & (env_set | set(BASE_ENV)))


def _fake_dist(site: Path, name: str, version: str, direct_url: str | None) -> None:
    info = site / f"{name}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    if direct_url is not None:
        (info / "direct_url.json").write_text(json.dumps({"url": direct_url, "archive_info": {}}))


def _verify(site: Path, sources: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(site), "SOURCES": sources, "PYTHON_PINS": ""}
    return subprocess.run(
        [sys.executable, "-S", str(ROOT / "images" / "verify_pins.py")],
        env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("direct_url", "ok"),
    [
        ("file:///tmp/bwstack-wheelhouse/deep_gemm-2.1.0-cp312-cp312-linux_x86_64.whl", True),
        ("file:///somewhere/else/deep_gemm-2.1.0-cp312-cp312-linux_x86_64.whl", False),
        (None, False),
    ],
)
def test_verify_pins_accepts_the_source_build_of_a_replaced_name(
    tmp_path: Path, direct_url: str | None, ok: bool
) -> None:
    """The nightly's DeepGEMM source wheel is itself ``deep_gemm``, a name its ``replaces`` lists."""
    sources = pins.load_variant(ROOT / "images", NIGHTLY).build_args()["SOURCES"]
    assert "deep-gemm" in sources
    _fake_dist(tmp_path, "deep_gemm", "2.1.0", direct_url)
    done = _verify(tmp_path, sources)
    assert (done.returncode == 0) is ok, done.stderr
    if not ok:
        assert "deep-gemm: should have been replaced by a source build, still installed" in done.stderr


def test_nightly_removes_the_bases_flashinfer_jit_cache() -> None:
    variant = pins.load_variant(ROOT / "images", NIGHTLY)
    assert "flashinfer-jit-cache" in variant.sources["flashinfer"].replaces


def test_flashinfer_cubin_is_pinned_equal_to_flashinfer_python() -> None:
    for name in pins.list_variants(ROOT / "images"):
        python = pins.load_variant(ROOT / "images", name).python
        if "flashinfer-python" in python:
            assert python.get("flashinfer-cubin") == python["flashinfer-python"], name


@pytest.mark.parametrize("name", ["CUTE_DSL_CACHE_DIR", "B12X_COMPILE_CACHE_DIR"])
def test_the_cute_dsl_and_b12x_caches_are_checked_by_the_self_check(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R8 of first-contact-2: CuTe DSL (default /tmp/<user>/cutlass_python_cache) and FlashInfer 0.7.2's b12x
    honour these variables; the image points both at the JIT volume and the self-check names a missing one."""
    from healthchecks import selfcheck

    assert imagelayout.CACHE_ENV[name].startswith(imagelayout.JIT_CACHE + "/")
    for other in imagelayout.CACHE_ENV:
        monkeypatch.setenv(other, str(tmp_path / other.lower()))
    assert selfcheck.check_caches(volume=False) == []
    monkeypatch.delenv(name)
    assert selfcheck.check_caches(volume=False) == [
        f"{name} is unset -- fix: set ENV {name}={imagelayout.CACHE_ENV[name]} (healthchecks/imagelayout.py)"
    ]
    monkeypatch.setenv(name, str(tmp_path / "file" / "below"))
    (tmp_path / "file").write_text("not a folder", encoding="utf-8")
    problems = selfcheck.check_caches(volume=False)
    assert len(problems) == 1 and problems[0].startswith(f"{name}={tmp_path}/file/below is not writable"), (
        problems
    )
