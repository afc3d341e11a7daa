"""Pins: every pin lives once, in images/<variant>/pins.toml; the Dockerfile receives them all as build args and
holds none itself; the generated lock and manifest agree with pins.toml; hadolint passes."""

from __future__ import annotations

import re
import subprocess
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from bwstack.build.lock import command as locking
from bwstack.stack import pins
from healthchecks import imagelayout
from support.stack import ROOT

VARIANTS = pins.list_variants(ROOT / "images")
#: generated from pins.toml (checked against a fresh generation elsewhere) or prose that may quote a pin
GENERATED_OR_PROSE = {
    "compose.yaml",
    "compose.cpu.yaml",
    "versions.json",
    "overrides.lock",
    "wheelhouse.lock",
    "sglang-args.json",
}
#: a CPU variant's base is not pulled but built here, by the module that names it
LOCAL_BASE_BUILDER = "src/bwstack/build/rootfs.py"


#: the build and render machinery: where a hard-coded pin would bypass pins.toml
MACHINERY = [
    "Dockerfile",
    "profiles.yaml",
    "dev",
    ".ci/run",
    "templates",
    "images",
    "src/bwstack/build",
    "src/bwstack/sweep",
    *(
        f"src/bwstack/{m}.py"
        for m in (
            "stack/pins",
            "host/stackproject",
            "launch",
            "render/compose",
            "ops/updown",
            "stack/schema",
            "stack/loader",
            "render/k8s",
            "render/multihost",
            "cli/__init__",
        )
    ),
]


def tracked_files() -> list[Path]:
    missing = [m for m in MACHINERY if not (ROOT / m).exists()]
    assert not missing, f"MACHINERY names paths that no longer exist (moved?): {missing}"
    out = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "--cached", "--others", "--exclude-standard", "--", *MACHINERY],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return [ROOT / p for p in out if (ROOT / p).is_file()]


def pin_strings(variant: pins.Variant) -> Iterator[tuple[str, str]]:
    """The values that identify this variant's inputs, as they would be written if hard-coded elsewhere."""
    yield "base.image", variant.base_image
    if variant.base_digest:
        yield "base.digest", variant.base_digest
    for name, version in variant.python.items():
        yield f"python.{name}", f"{name}=={version}"
    for name, source in variant.sources.items():
        yield f"sources.{name}.ref", source.ref
    if variant.sglang_version:
        yield "sglang.version", f"sglang=={variant.sglang_version}"
    if variant.sglang_commit:
        yield "sglang.commit", f"-{variant.sglang_commit}"


def test_variants_exist() -> None:
    assert {"v0.5.23-cu130", "nightly-cu13-20260705-754524d8"} <= set(VARIANTS)
    nightly = pins.load_variant(ROOT / "images", "nightly-cu13-20260705-754524d8")
    assert re.match(r"^lmsysorg/sglang:nightly-dev-cu13-\d{8}-[0-9a-f]{8}$", nightly.base_image)
    assert nightly.evidence, "the nightly must cite its public evidence"


@pytest.mark.parametrize("name", VARIANTS)
def test_each_pin_exists_once_in_images(name: str) -> None:
    variant = pins.load_variant(ROOT / "images", name)
    files = tracked_files()
    for key, value in pin_strings(variant):
        holders = []
        for path in files:
            rel = path.relative_to(ROOT)
            if path.name in GENERATED_OR_PROSE or path.suffix == ".md" or rel.parts[0] in {"tests", "docs"}:
                continue
            try:
                text = path.read_text(encoding="utf-8")
            except UnicodeDecodeError:
                continue
            if value in text:
                holders.append(str(rel))
        own = f"images/{name}/pins.toml"
        # another variant pinning the same version pins it for itself (its own pins.toml is its home)
        others = [h for h in holders if h != own and not h.endswith("/pins.toml")]
        if variant.is_cpu and key == "base.image":
            others = [h for h in others if h != LOCAL_BASE_BUILDER]
        assert own in holders or key.startswith(("python.", "sglang.")), (key, value, holders)
        assert others == [], f"pin {key}={value} of {name} is repeated outside its pins.toml: {others}"


@pytest.mark.parametrize("name", VARIANTS)
def test_pins_toml_declares_each_key_once(name: str) -> None:
    text = (ROOT / "images" / name / "pins.toml").read_text()
    tomllib.loads(text)  # TOML itself refuses duplicate keys
    variant = pins.load_variant(ROOT / "images", name)
    assert "sglang" not in {pins.normalize_package(k) for k in variant.python}


def test_dockerfile_takes_every_build_arg_and_pins_nothing() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    declared = dict(re.findall(r"^ARG ([A-Z_]+)(?:=(.*))?$", dockerfile, flags=re.MULTILINE))
    for name in VARIANTS:
        for arg in pins.load_variant(ROOT / "images", name).build_args():
            assert arg in declared, f"Dockerfile lacks ARG {arg}"
            assert declared[arg] in ("", '""'), (
                f"ARG {arg} has a default ({declared[arg]}): pins live in images/"
            )
    for path in (imagelayout.HC_DIR, imagelayout.SERVER_LOG, imagelayout.HF_HOME, imagelayout.JIT_CACHE):
        assert path in dockerfile
    assert re.search(
        r"^HEALTHCHECK .*\n\s+CMD \[\"python3\", \"/opt/bwstack/healthchecks/warmup.py\"", dockerfile, re.M
    )
    assert 'ENTRYPOINT ["python3", "/opt/bwstack/healthchecks/serve.py"]' in dockerfile


@pytest.mark.parametrize("name", VARIANTS)
def test_overrides_lock_matches_pins(name: str) -> None:
    variant = pins.load_variant(ROOT / "images", name)
    assert locking.lock_problems(variant) == []


def test_lock_text_carries_hashes() -> None:
    variant = pins.load_variant(ROOT / "images", "v0.5.9-cu130")
    fake = {("transformers", "5.2.0"): [("transformers-5.2.0-py3-none-any.whl", "ab" * 32)]}
    text = locking.lock_text(variant, lambda n, v: fake.get((n, v), [(f"{n}-{v}.whl", "cd" * 32)]))
    assert "transformers==5.2.0 \\\n    --hash=sha256:" + "ab" * 32 in text


def test_set_digest_keeps_comments(tmp_path: Path) -> None:
    src = ROOT / "images" / "v0.5.23-cu130" / "pins.toml"
    copy = tmp_path / "pins.toml"
    copy.write_text(src.read_text())
    digest = "sha256:" + "0" * 64
    locking.set_digest(copy, digest)
    text = copy.read_text()
    assert f'digest = "{digest}"' in text
    assert text.replace(f'"{digest}"', '""') == src.read_text()


def test_split_image() -> None:
    assert locking.split_image("lmsysorg/sglang:v0.5.23-cu130") == (
        "registry-1.docker.io",
        "lmsysorg/sglang",
        "v0.5.23-cu130",
    )
    assert locking.split_image("debian") == ("registry-1.docker.io", "library/debian", "latest")
    assert locking.split_image("nvcr.io/nvidia/cuda:13.0.0-devel") == (
        "nvcr.io",
        "nvidia/cuda",
        "13.0.0-devel",
    )


def test_hadolint_passes() -> None:
    import shutil

    hadolint = shutil.which("hadolint") or str(Path(__import__("sys").executable).parent / "hadolint")
    result = subprocess.run(
        [hadolint, "--no-color", str(ROOT / "Dockerfile")], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr
    # every ignored rule is justified on the line above it
    lines = (ROOT / "Dockerfile").read_text().splitlines()
    for index, line in enumerate(lines):
        if line.startswith("# hadolint ignore="):
            above = lines[index - 1] if index > 0 else ""
            assert above.startswith("#") and "hadolint ignore" not in above and len(above.split()) > 4, line
