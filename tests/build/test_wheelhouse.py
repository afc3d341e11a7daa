"""The CPU variants' wheelhouse: the lock is the whole truth, the placeholder wheel is reproducible."""

from __future__ import annotations

import hashlib
import re
import shutil
import zipfile
from pathlib import Path

import pytest

from bwstack.build.lock import wheelhouse
from bwstack.errors import UserError
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


# --- the overrides of a CPU variant (pins.toml [overrides], overrides.lock, images/<v>/override-wheels/) ----


def test_v059_cpu_base_holds_the_real_bases_transformers_and_overrides_as_the_gpu_variant() -> None:
    """The base closure is what the real 0.5.9 base holds (SGLang 0.5.9's transformers 4.57.1, a hub below
    1.0, nothing hub 1.x alone needs); [overrides] is v0.5.9-cu130's set, and the [python] pins name the
    overridden versions, so verify_pins.py proves in the image that the override won."""
    cpu = pins.load_variant(ROOT / "images", "v0.5.9-cpu")
    gpu = pins.load_variant(ROOT / "images", "v0.5.9-cu130")
    assert cpu.overrides == gpu.overrides
    base = {pins.normalize_package(r.partition("==")[0]): r.partition("==")[2] for r in cpu.wheelhouse}
    assert base["transformers"] == "4.57.1"
    assert base["huggingface-hub"].startswith("0.")
    assert not {"typer-slim", "typer", "shellingham"} & set(base)
    for req in cpu.overrides:
        name, _, version = req.partition("==")
        assert cpu.python[name] == version == gpu.python[name]
    assert set(wheelhouse.override_hashes(cpu)) == set(cpu.overrides)


def test_a_pin_without_its_override_must_match_the_base(tmp_path: Path) -> None:
    images = tmp_path / "images"
    shutil.copytree(
        ROOT / "images" / "v0.5.9-cpu", images / "v0.5.9-cpu", ignore=shutil.ignore_patterns("*wheels*")
    )
    path = images / "v0.5.9-cpu" / "pins.toml"
    path.write_text(path.read_text().replace('"huggingface-hub==1.4.1", ', ""))
    with pytest.raises(UserError, match=re.escape("pinned '1.4.1'; the wheelhouse holds '0.36.2'")):
        pins.load_variant(images, "v0.5.9-cpu")


def _fake_override_wheels(variant: pins.Variant, folder: Path) -> dict[str, str]:
    folder.mkdir(parents=True)
    hashes = {}
    for req in variant.overrides:
        name, _, version = req.partition("==")
        path = folder / f"{name.replace('-', '_')}-{version}-py3-none-any.whl"
        path.write_bytes(f"fake {req}".encode())
        hashes[req] = hashlib.sha256(path.read_bytes()).hexdigest()
    return hashes


def test_override_wheels_must_match_overrides_lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    variant = pins.load_variant(ROOT / "images", "v0.5.9-cpu")
    monkeypatch.setenv("BWSTACK_CACHE", str(tmp_path / "cache"))
    _fake_override_wheels(variant, wheelhouse.override_cache_dir(variant))  # right names, wrong bytes
    from bwstack.errors import ExternalError

    with pytest.raises(ExternalError, match=re.escape("does not match overrides.lock")):
        wheelhouse.override_wheels(variant, echo=lambda _m: None)


def test_stage_overrides_holds_exactly_the_locked_wheels(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    images = tmp_path / "images"
    shutil.copytree(
        ROOT / "images" / "v0.5.9-cpu", images / "v0.5.9-cpu", ignore=shutil.ignore_patterns("*wheels*")
    )
    variant = pins.load_variant(images, "v0.5.9-cpu")
    monkeypatch.setenv("BWSTACK_CACHE", str(tmp_path / "cache"))
    hashes = _fake_override_wheels(variant, wheelhouse.override_cache_dir(variant))
    (wheelhouse.override_cache_dir(variant) / "other-1.0-py3-none-any.whl").write_bytes(b"not locked")
    monkeypatch.setattr(wheelhouse, "override_hashes", lambda _v: {r: {h} for r, h in hashes.items()})
    stale = variant.dir / pins.OVERRIDE_WHEELS_DIR / "stale-0.1-py3-none-any.whl"
    stale.parent.mkdir()
    stale.write_bytes(b"left by an older build")
    staged = wheelhouse.stage_overrides(variant, echo=lambda _m: None)
    assert staged == variant.dir / pins.OVERRIDE_WHEELS_DIR
    found = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in staged.iterdir()}
    assert sorted(found.values()) == sorted(hashes.values()) and len(found) == len(variant.overrides)
    gpu = pins.load_variant(ROOT / "images", "v0.5.9-cu130")
    with pytest.raises(UserError, match="its overrides come from PyPI"):
        wheelhouse.stage_overrides(gpu)


def test_the_dockerfile_installs_a_cpu_variants_overrides_offline() -> None:
    """The override step: --no-index from the staged wheels when there are any, PyPI otherwise (a GPU
    variant: the COPY pattern matches no folder), a CPU variant without them refused."""
    text = (ROOT / "Dockerfile").read_text()
    assert "images/${PIN_VARIANT}/overrides.lock images/${PIN_VARIANT}/override-wheel[s] " in text
    assert "offline=(--no-index --find-links /tmp/bwstack-overrides)" in text
    assert '"${offline[@]}" --no-deps --require-hashes' in text
    assert "no override wheels in images/${PIN_VARIANT}/override-wheels" in text
    ignored = (ROOT / ".gitignore").read_text()
    assert f"/images/*/{pins.OVERRIDE_WHEELS_DIR}/" in ignored
