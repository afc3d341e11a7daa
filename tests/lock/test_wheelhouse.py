"""The CPU variants' wheelhouse: the lock is the whole truth, the placeholder wheel is reproducible."""

from __future__ import annotations

import hashlib
import re
import shutil
import zipfile
from pathlib import Path

import pytest

from bwstack.errors import UserError
from bwstack.lock import wheelhouse
from bwstack.stack import pins
from support.stack import ROOT

CPU_VARIANTS = [
    name for name in pins.list_variants(ROOT / "images") if pins.load_variant(ROOT / "images", name).is_cpu
]


def test_there_is_a_cpu_variant() -> None:
    assert "v0.5.23-cpu" in CPU_VARIANTS


@pytest.mark.parametrize("name", CPU_VARIANTS)
def test_lock_names_exactly_the_pinned_closure(name: str) -> None:
    variant = pins.load_variant(ROOT / "images", name)
    hashes = wheelhouse.locked_hashes(variant)
    assert f"sglang=={variant.sglang_version}" in hashes
    assert any(req.startswith("torch==") and req.endswith("+cpu") for req in hashes)
    assert all(len(sha) == 64 for sha in hashes.values())


@pytest.mark.parametrize("name", CPU_VARIANTS)
def test_placeholder_wheel_is_reproducible_and_locked(name: str, tmp_path: Path) -> None:
    variant = pins.load_variant(ROOT / "images", name)
    first = wheelhouse.build_placeholder_wheel(ROOT / "images", tmp_path / "a")
    second = wheelhouse.build_placeholder_wheel(ROOT / "images", tmp_path / "b")
    digest = hashlib.sha256(first.read_bytes()).hexdigest()
    assert digest == hashlib.sha256(second.read_bytes()).hexdigest()
    locked = wheelhouse.locked_hashes(variant)[
        f"{wheelhouse.PLACEHOLDERS}=={wheelhouse.PLACEHOLDERS_VERSION}"
    ]
    assert digest == locked, "placeholder sources changed: run 'bwstack lock --variant V --no-digest'"
    names = zipfile.ZipFile(first).namelist()
    assert "sgl_kernel/__init__.py" in names
    assert "bwstack_venv_shims.pth" in names


def test_placeholder_kernels_raise_by_name(tmp_path: Path) -> None:
    wheel = wheelhouse.build_placeholder_wheel(ROOT / "images", tmp_path)
    zipfile.ZipFile(wheel).extractall(tmp_path / "site")
    import subprocess
    import sys

    code = (
        "import sgl_kernel, sgl_kernel.kvcacheio as k\n"
        "assert sgl_kernel.PLACEHOLDER\n"
        "try:\n    sgl_kernel.copy_all_layer_kv_cache_cpu(1)\nexcept NotImplementedError as e:\n    print(e)\n"
        "try:\n    import sgl_kernel.scalar_type\nexcept ImportError:\n    print('guarded')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={"PYTHONPATH": str(tmp_path / "site")},
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    assert "copy_all_layer_kv_cache_cpu" in out.stdout and "placeholder" in out.stdout
    assert "guarded" in out.stdout


def test_stale_lock_is_refused_with_the_command_to_fix_it(tmp_path: Path) -> None:
    images = tmp_path / "images"
    shutil.copytree(ROOT / "images", images, ignore=shutil.ignore_patterns("wheelhouse", "__pycache__"))
    pins_path = images / "v0.5.23-cpu" / "pins.toml"
    pins_path.write_text(pins_path.read_text().replace('"zipp==4.1.2",', '"zipp==4.1.1",'))
    variant = pins.load_variant(images, "v0.5.23-cpu")
    with pytest.raises(UserError, match=re.escape("bwstack lock --variant v0.5.23-cpu")):
        wheelhouse.locked_hashes(variant)


def test_verify_rejects_a_tampered_file(tmp_path: Path) -> None:
    variant = pins.load_variant(ROOT / "images", "v0.5.23-cpu")
    folder = tmp_path / "wh"
    hashes = wheelhouse.locked_hashes(variant)
    folder.mkdir()
    for req in hashes:  # fake files with the right names: every hash mismatches
        name, _, version = req.partition("==")
        (folder / f"{name.replace('-', '_')}-{version}-py3-none-any.whl").write_bytes(b"not a wheel")
    from bwstack.errors import ExternalError

    with pytest.raises(ExternalError, match=re.escape("do not match wheelhouse.lock")):
        wheelhouse.verify(variant, folder)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (('device = "cpu"', 'device = "tpu"'), "invalid device 'tpu'"),
        (('torch = "2.13.0+cpu"', 'torch = "2.13.1+cpu"'), "the wheelhouse holds '2.13.0+cpu'"),
    ],
)
def test_bad_cpu_pins_name_the_line(tmp_path: Path, edit: tuple[str, str], message: str) -> None:
    images = tmp_path / "images"
    shutil.copytree(
        ROOT / "images" / "v0.5.23-cpu", images / "v0.5.23-cpu", ignore=shutil.ignore_patterns("wheelhouse")
    )
    path = images / "v0.5.23-cpu" / "pins.toml"
    path.write_text(path.read_text().replace(*edit))
    with pytest.raises(UserError, match=re.escape(message)) as info:
        pins.load_variant(images, "v0.5.23-cpu")
    assert info.value.line is not None


def test_gpu_variant_cannot_carry_a_wheelhouse(tmp_path: Path) -> None:
    images = tmp_path / "images"
    shutil.copytree(ROOT / "images" / "v0.5.23-cu130", images / "v0.5.23-cu130")
    path = images / "v0.5.23-cu130" / "pins.toml"
    path.write_text(path.read_text() + '\n[wheelhouse]\npackages = ["zipp==4.1.2"]\n')
    with pytest.raises(UserError, match='only device = "cpu" variants'):
        pins.load_variant(images, "v0.5.23-cu130")
