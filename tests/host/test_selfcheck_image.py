"""The serving image checks itself, in real Docker, on both CPU variants (real SGLang, real pinned install).

``bwstack build`` builds each CPU image through the Dockerfile's pinned path (overrides, verify_pins, user,
caches, ``selfcheck.py --prepare`` and ``--build``) and then runs the full self-check; ``bwstack doctor --image``
runs it again as uid 10001 with the service's mounts and passes. Planted faults (an unreadable secret, an
unwritable cache folder, a cubin of another version than flashinfer-python, no HOME) each fail with their one
line. SGLang's own import must leave every cache variable where the image put it (DG_JIT_CACHE_DIR included).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bwstack.host import operate
from healthchecks import imagelayout
from support import dockerstack

pytestmark = [pytest.mark.docker, pytest.mark.real, pytest.mark.slow]

VARIANTS = ("v0.5.23-cpu", "v0.5.9-cpu")
SELFCHECK = f"{imagelayout.HC_DIR}/selfcheck.py"
USER = f"{imagelayout.UID}:{imagelayout.GID}"


def bwstack(cwd: Path, *args: str, timeout: float = 1800) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bwstack.cli", "-f", "profiles.cpu.yaml", *args],
        cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip


@pytest.fixture(scope="module")
def selfcheck_stack(docker_engine: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    project = dockerstack.unique_name("bwstack-selfcheck")

    def edit(data: Any) -> None:
        data["stack"]["project"] = project

    stack = dockerstack.edited_stack(tmp_path_factory.mktemp("selfcheck-stack"), edit, "profiles.cpu.yaml")
    try:
        yield stack.root
    finally:
        dockerstack.force_clean(project)


@pytest.fixture(scope="module", params=VARIANTS)
def built_variant(
    request: pytest.FixtureRequest, selfcheck_stack: Path
) -> tuple[str, subprocess.CompletedProcess[str]]:
    variant = str(request.param)
    result = bwstack(selfcheck_stack, "build", "--variant", variant)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return variant, result


def selfcheck(
    variant: str, *docker_args: str, check_args: tuple[str, ...] = ("--no-imports",)
) -> tuple[int, list[str]]:
    """Run the in-image check with a volume-like tmpfs for the caches; its exit status and its lines."""
    done = dockerstack.docker(
        "run", "--rm", "--network", "none", "--user", USER, "--entrypoint", "python3",
        "--tmpfs", f"{imagelayout.JIT_CACHE}:uid={imagelayout.UID},gid={imagelayout.GID}",
        *docker_args, f"bwstack/sglang:{variant}", SELFCHECK, *check_args, check=False,
    )  # fmt: skip
    lines = [ln for ln in (done.stdout + done.stderr).splitlines() if ln.startswith("bwstack selfcheck:")]
    return done.returncode, lines


def test_build_ran_the_self_check_and_doctor_image_passes(
    built_variant: tuple[str, subprocess.CompletedProcess[str]], selfcheck_stack: Path
) -> None:
    variant, result = built_variant
    assert "bwstack selfcheck: ok (" in result.stderr, result.stderr[-2000:]
    doctor = bwstack(selfcheck_stack, "doctor", "--image", variant)
    assert doctor.returncode == 0, doctor.stdout[-2000:] + doctor.stderr[-2000:]
    ok = [ln for ln in doctor.stdout.splitlines() if ln.startswith("bwstack selfcheck: ok (")]
    assert ok and f"uid {imagelayout.UID}" in ok[0] and f"HOME {imagelayout.HOME}" in ok[0], doctor.stdout


def test_the_image_passes_without_the_planted_faults(
    built_variant: tuple[str, subprocess.CompletedProcess[str]],
) -> None:
    status, lines = selfcheck(built_variant[0])
    assert status == 0 and lines[-1].startswith("bwstack selfcheck: ok ("), lines


def test_unreadable_secret(
    built_variant: tuple[str, subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    secret = tmp_path / "api_key"
    secret.write_text("sk-planted\n", encoding="utf-8")
    secret.chmod(0o600)  # owned by this (root) user: how a bind-mounted compose secret keeps it
    status, lines = selfcheck(built_variant[0], "-v", f"{secret}:{imagelayout.SECRETS_DIR}/api_key:ro")
    assert status == 1
    assert lines == [
        f"bwstack selfcheck: secret {imagelayout.SECRETS_DIR}/api_key exists but uid {imagelayout.UID} cannot read "
        f"it -- fix: run 'bwstack up' (it makes the secret files readable for uid {imagelayout.UID}) or chown "
        "the file to it"
    ]


def test_unwritable_cache_dir(built_variant: tuple[str, subprocess.CompletedProcess[str]]) -> None:
    name = "TVM_FFI_CACHE_DIR"
    status, lines = selfcheck(built_variant[0], "-e", f"{name}=/opt/bwstack/tvm-ffi")
    assert status == 1
    assert len(lines) == 1 and lines[0].startswith(
        f"bwstack selfcheck: {name}=/opt/bwstack/tvm-ffi is not writable for uid {imagelayout.UID} -- fix: chown"
    ), lines


def test_mismatched_cubin_version(
    built_variant: tuple[str, subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    for name, version in (("flashinfer_python", "0.7.2"), ("flashinfer_cubin", "0.7.1")):
        info = tmp_path / f"{name}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    os.chmod(tmp_path, 0o755)
    status, lines = selfcheck(
        built_variant[0], "-v", f"{tmp_path}:/opt/planted:ro", "-e", "PYTHONPATH=/opt/planted"
    )
    assert status == 1
    assert len(lines) == 1 and lines[0].startswith(
        "bwstack selfcheck: flashinfer-cubin 0.7.1 != flashinfer-python 0.7.2: FlashInfer ignores it"
    ), lines


def test_missing_home(built_variant: tuple[str, subprocess.CompletedProcess[str]]) -> None:
    """What a runtime uid without a passwd entry gets from Docker when the image sets no HOME: ``/``."""
    status, lines = selfcheck(built_variant[0], "-e", "HOME=/")
    assert status == 1
    assert lines == [
        "bwstack selfcheck: HOME is /: every ~/.cache default lands in / -- fix: set ENV "
        f"HOME={imagelayout.HOME} in the Dockerfile (healthchecks/imagelayout.py FIXED_ENV)"
    ]


def test_a_cache_sglang_moves_at_import_is_found(
    built_variant: tuple[str, subprocess.CompletedProcess[str]],
) -> None:
    """Main's image set only DG_JIT_CACHE_DIR; SGLang then moves it to ~/.cache at import (first-contact 3.4)."""
    status, lines = selfcheck(built_variant[0], "-e", "SGLANG_DG_CACHE_DIR=", check_args=())
    assert status == 1
    assert any(
        ln.startswith("bwstack selfcheck: DG_JIT_CACHE_DIR is moved from /var/cache/bwstack/deep_gemm to ")
        for ln in lines
    ), lines


def test_a_rebuild_on_a_bwstack_image_keeps_its_own_pins(selfcheck_stack: Path) -> None:
    """The base's ENV BWSTACK_VARIANT / TORCH_CUDA_ARCH_LIST (a bwstack image) must not beat the build args."""
    variant = VARIANTS[0]
    base = bwstack(
        selfcheck_stack, "build", "--variant", variant
    )  # the Docker layer cache makes this one cheap
    assert base.returncode == 0, base.stderr[-2000:]
    tag = f"bwstack/rebuild-test:{dockerstack.unique_name('r')}"
    result = bwstack(
        selfcheck_stack,
        "build",
        "--variant",
        "v0.5.9-cu130",
        "--base-image",
        f"bwstack/sglang:{variant}",
        "--tag",
        tag,
    )
    try:
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        labels = dockerstack.docker("image", "inspect", "--format", "{{json .Config.Labels}}", tag).stdout
        assert '"io.bwstack.variant":"v0.5.9-cu130"' in labels
        assert '"io.bwstack.torch-cuda-arch-list":"12.0a"' in labels
    finally:
        stage = f"{operate.STAGE_REPO}:{re.sub(r'[^A-Za-z0-9_.-]', '_', tag)[:120]}"  # the kept build stage
        dockerstack.docker("rmi", "--force", tag, stage, check=False)


def test_lock_inspect_records_the_image_and_judges_first_contact(
    selfcheck_stack: Path, tmp_path: Path
) -> None:
    """No registry here: ``--image`` inspects the local CPU image in place of the pulled base."""
    variant = VARIANTS[0]
    base = bwstack(
        selfcheck_stack, "build", "--variant", variant
    )  # cached when the module built_variant it already
    assert base.returncode == 0, base.stderr[-2000:]
    out = tmp_path / "inspect.json"
    done = bwstack(
        selfcheck_stack,
        "lock",
        "--inspect",
        variant,
        "--image",
        f"bwstack/sglang:{variant}",
        "--out",
        str(out),
    )
    assert done.returncode in (0, 1), done.stderr[-2000:]
    record = json.loads(out.read_text(encoding="utf-8"))
    facts = record["inside"]["facts"]
    assert facts["uid"] == imagelayout.UID and facts["versions"]["sglang"] == "0.5.23"
    lines = done.stdout.splitlines()
    assert (
        "confirms first-contact 1.6: the base reports the pinned sglang version -- found sglang 0.5.23, "
        "pinned 0.5.23" in lines
    )
    venv = [ln for ln in lines if "SGLang in a venv at /opt/sglang" in ln]
    word = "confirms" if facts["python"]["purelib"].startswith("/opt/sglang/") else "contradicts"
    assert venv == [
        f"{word} first-contact 1.1: 0.5.23 base: SGLang in a venv at /opt/sglang (PR #30612); 0.5.9 base: "
        f"system dist-packages -- found site {facts['python']['purelib']}"
    ]
    # a bwstack image already holds the bwstack user, so "uid 10001 is free" is contradicted, as it must be
    assert any(ln.startswith("contradicts first-contact 2.1: uid 10001 is free") for ln in lines)
    assert any(ln.startswith("confirms first-contact build args:") for ln in lines)
    assert done.returncode == 1
