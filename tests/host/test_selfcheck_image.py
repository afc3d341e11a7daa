"""The serving image checks itself, in real Docker, on both CPU variants (real SGLang, real pinned install).

``bwstack build`` builds each CPU image through the Dockerfile's pinned path (overrides, verify_pins, user,
caches, ``selfcheck.py --prepare`` and ``--build``) and then runs the full self-check; ``bwstack doctor --image``
runs it again as uid 10001 with the service's mounts and passes. Planted faults (an unreadable secret, an
unwritable cache folder, a cubin of another version than flashinfer-python, no HOME) each fail with their one
line. SGLang's own import must leave every cache variable where the image put it (DG_JIT_CACHE_DIR included).

Each CPU image stands on a local base laid out like the real base of its SGLang (images/<v>/pins.toml [base],
images/cpu-base/install.sh): the layout tests read that layout back from the built image, and that the GPU
path's steps ran on it (verify_pins.py, compileall, the user), as root and as the serving user. On v0.5.9-cpu
the override step installs the GPU variant's overrides (transformers 5.2.0, huggingface-hub 1.4.1) over the
base's transformers 4.57.1, offline, from the wheels bwstack build staged.
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

from bwstack.build import dockerbuild
from healthchecks import imagelayout
from support import dockerstack
from support.stack import ROOT

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


#: the layout of each CPU image (first-contact.md rows 1.1, 1.3, 1.4): interpreter, site, where sglang lives
LAYOUT = {
    "v0.5.23-cpu": {
        "executable": "/opt/sglang/bin/python3",
        "purelib": "/opt/sglang/lib/python3.11/site-packages",
        "sglang": "/opt/sglang/lib/python3.11/site-packages/sglang/__init__.py",
        "editable": False,
        "externally_managed": False,
    },
    "v0.5.9-cpu": {
        "executable": "/usr/bin/python3",
        "purelib": "/usr/local/lib/python3.11/dist-packages",
        "sglang": "/sgl-workspace/sglang/python/sglang/__init__.py",
        "editable": True,
        "externally_managed": True,
    },
}
#: run inside the image: what its python3 (the PATH's) says about itself, as the user the container runs as
LAYOUT_PROBE = """
import importlib.util, json, os, sys, sysconfig
from importlib import metadata
site = sysconfig.get_path("purelib")
origin = importlib.util.find_spec("sglang").origin
direct = json.loads(metadata.distribution("sglang").read_text("direct_url.json") or "{}")
def owner(path):
    try:
        return os.stat(path).st_uid
    except OSError as exc:
        return type(exc).__name__
out = {
    "executable": sys.executable, "purelib": site, "sglang": origin,
    "editable": direct.get("dir_info", {}).get("editable", False),
    # PEP 668 as pip judges it: the marker next to the stdlib, outside a venv
    "externally_managed": os.path.isfile(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED"))
    and sys.prefix == sys.base_prefix,
    "in_venv": sys.prefix != sys.base_prefix,
    "site_owner": owner(site), "site_writable": os.access(site, os.W_OK),
    "sglang_owner": owner(origin), "sglang_writable": os.access(os.path.dirname(origin), os.W_OK),
    "pyc": os.path.isfile(importlib.util.cache_from_source(origin)),
    "root_readable": os.access("/root", os.R_OK | os.X_OK),
    "cwd": os.getcwd(),
}
if os.getuid() == 0:
    out["root_mode"] = oct(os.stat("/root").st_mode & 0o777)
    out["root_caches"] = {p: owner(p) for p in ("/root/.cache/huggingface", "/root/.cache/sglang/kernels.lock")}
    out["pip_config"] = open("/root/.config/pip/pip.conf").read() if os.path.isfile("/root/.config/pip/pip.conf") else ""
else:
    import sglang.srt.server_args  # the serving user imports SGLang from the root-owned tree
print(json.dumps(out))
"""


def probe_layout(variant: str, user: str) -> dict[str, Any]:
    done = dockerstack.docker(
        "run", "--rm", "--network", "none", "--user", user, "--entrypoint", "python3",
        f"bwstack/sglang:{variant}", "-c", LAYOUT_PROBE, check=False, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    found: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def test_the_image_has_the_layout_of_its_real_base(
    built_variant: tuple[str, subprocess.CompletedProcess[str]],
) -> None:
    """0.5.23: SGLang in the venv /opt/sglang, first on PATH; 0.5.9: system site-packages, EXTERNALLY-MANAGED,
    SGLang editable from /sgl-workspace/sglang/python. Both: root owns the code, uid 10001 cannot write it
    and imports it anyway (byte-compiled at build), /root is 0700 with root-owned caches the server never
    needs."""
    variant = built_variant[0]
    serving = probe_layout(variant, USER)
    for key, want in LAYOUT[variant].items():
        assert serving[key] == want, (key, serving)
    assert serving["in_venv"] is (variant == "v0.5.23-cpu")
    assert serving["site_owner"] == 0 and serving["sglang_owner"] == 0, serving
    assert serving["site_writable"] is False and serving["sglang_writable"] is False, serving
    assert serving["pyc"] is True, "selfcheck.py --prepare did not byte-compile SGLang"
    assert serving["root_readable"] is False, serving
    assert serving["cwd"] == imagelayout.HOME  # the serving image's WORKDIR, not the base's
    root = probe_layout(variant, "0")
    assert root["root_mode"] == "0o700", root
    assert root["root_caches"] == {"/root/.cache/huggingface": 0, "/root/.cache/sglang/kernels.lock": 0}, root
    if LAYOUT[variant]["externally_managed"]:  # PEP 668 lifted only by root's own pip config, as upstream
        assert "break-system-packages = true" in root["pip_config"], root
    base = dockerstack.docker(
        "image", "inspect", "--format", "{{json .Config}}", f"bwstack/cpu-base:{variant}"
    ).stdout
    config = json.loads(base)
    assert config["WorkingDir"] == "/sgl-workspace/sglang"
    assert config["Labels"]["io.bwstack.cpu-base-layout"] == (
        "venv" if variant == "v0.5.23-cpu" else "system"
    )


def test_the_gpu_path_ran_on_the_cpu_base(
    built_variant: tuple[str, subprocess.CompletedProcess[str]],
) -> None:
    """The Dockerfile's pinned steps are in the image's history and hold now: verify_pins.py, the user, the
    self-check; the labels say the pins were verified on the local base."""
    variant = built_variant[0]
    image = f"bwstack/sglang:{variant}"
    labels = json.loads(
        dockerstack.docker("image", "inspect", "--format", "{{json .Config.Labels}}", image).stdout
    )
    assert labels["io.bwstack.pins-verified"] == "1"
    assert labels["org.opencontainers.image.base.name"] == f"bwstack/cpu-base:{variant}"
    history = dockerstack.docker("history", "--no-trunc", "--format", "{{.CreatedBy}}", image).stdout
    for step in (
        "verify_pins.py",
        "selfcheck.py --prepare",
        "selfcheck.py --build",
        "useradd --system --uid 10001",
    ):
        assert step in history, step
    assert "io.bwstack.python-site" not in labels  # the CPU-only copy of a closure (/site) is gone
    verify = dockerstack.docker(
        "run", "--rm", "--network", "none", "--user", USER, "--entrypoint", "python3",
        "-e", f"SGLANG_VERSION={labels['io.bwstack.sglang']}", "-e", f"PYTHON_PINS={labels['io.bwstack.python-pins']}",
        image, "/opt/bwstack/verify_pins.py", check=False,
    )  # fmt: skip
    pinned = len(labels["io.bwstack.python-pins"].split()) + 1  # [python] and sglang
    assert pinned == (3 if variant == "v0.5.23-cpu" else 6)
    assert verify.returncode == 0 and f"{pinned} pins verified" in verify.stdout, verify.stderr


#: what the override step changes on v0.5.9-cpu: the real 0.5.9 base's versions -> v0.5.9-cu130's overrides
OVERRIDDEN = {
    "transformers": ("4.57.1", "5.2.0"),
    "huggingface-hub": ("0.36.2", "1.4.1"),
    "typer-slim": (None, "0.21.1"),
    "shellingham": (None, "1.5.4"),
}
VERSIONS_PROBE = """
import json
from importlib import metadata
def version(name):
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None
print(json.dumps({name: version(name) for name in NAMES}))
"""


def installed(image: str, user: str, *, imports: bool = False) -> dict[str, str | None]:
    code = VERSIONS_PROBE.replace("NAMES", repr(sorted(OVERRIDDEN)))
    if imports:
        code = "import transformers, sglang.srt.server_args\n" + code
    done = dockerstack.docker(
        "run", "--rm", "--network", "none", "--user", user, "--entrypoint", "python3", image, "-c", code,
        check=False, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    found: dict[str, str | None] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def test_the_overrides_replace_the_bases_versions_offline(
    built_variant: tuple[str, subprocess.CompletedProcess[str]],
) -> None:
    """v0.5.9-cpu: the base holds SGLang 0.5.9's transformers 4.57.1 and its hub below 1.0, as the real base;
    the Dockerfile's override step installs v0.5.9-cu130's set over it --no-index from the staged wheels (the
    build container has no network, the system layout needs PIP_BREAK_SYSTEM_PACKAGES), and the serving user
    imports transformers and SGLang's server args with them."""
    variant, result = built_variant
    out = result.stdout + result.stderr
    if (
        variant != "v0.5.9-cpu"
    ):  # v0.5.23-cpu, like v0.5.23-cu130, overrides nothing: the step installs nothing
        lock = (ROOT / "images" / variant / "overrides.lock").read_text(encoding="utf-8")
        assert not re.search(r"(?m)^[A-Za-z0-9]", lock), lock
        assert not re.search(r"(?m)^bwstack: pip install", out)  # the step's own echo, never printed
        return
    base = installed(f"bwstack/cpu-base:{variant}", "0")
    assert base == {name: old for name, (old, _new) in OVERRIDDEN.items()}, base
    image = installed(f"bwstack/sglang:{variant}", USER, imports=True)
    assert image == {name: new for name, (_old, new) in OVERRIDDEN.items()}, image
    step = out[out.index("RUN lock=/tmp/bwstack-overrides/overrides.lock") :]
    if not step.split("Step ", 1)[0].count("Using cache"):  # a cached layer: its run is in an earlier build
        assert "bwstack: pip install --no-index --find-links /tmp/bwstack-overrides --no-deps" in step, step
        assert "Successfully installed huggingface-hub-1.4.1 shellingham-1.5.4 transformers-5.2.0" in step


def override_on_the_base(variant: str, stack: Path, lock: Path) -> subprocess.CompletedProcess[str]:
    """The Dockerfile's offline override command with ``lock`` on the CPU base, in a container without a
    network, then the build's import check (selfcheck.check_imports, what ``selfcheck.py --build`` runs)."""
    wheels = stack / "images" / variant / "override-wheels"
    script = (
        "PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install -q --no-cache-dir --no-index --find-links /w "
        "--no-deps --require-hashes -r /l/overrides.lock --root-user-action=ignore && cd /opt/bwstack && "
        "python3 -c 'from healthchecks import selfcheck; print(selfcheck.check_imports([\"transformers\"]))'"
    )
    return dockerstack.docker(
        "run", "--rm", "--network", "none", "--user", "0", "--entrypoint", "bash",
        "-v", f"{wheels}:/w:ro", "-v", f"{lock.parent}:/l:ro",
        "-v", f"{stack / 'healthchecks'}:/opt/bwstack/healthchecks:ro",
        f"bwstack/cpu-base:{variant}", "-c", script, check=False, timeout=300,
    )  # fmt: skip


def test_an_override_without_its_hub_fails_the_builds_import_check(
    built_variant: tuple[str, subprocess.CompletedProcess[str]], selfcheck_stack: Path, tmp_path: Path
) -> None:
    """The item-1 break, planted cheaply (no second image build): on the v0.5.9 base, without a network, the
    staged wheels with the committed overrides.lock pass the build's import check; with an overrides.lock
    that has transformers 5.2.0 but not huggingface-hub 1.4.1, the check fails naming the hub."""
    variant = built_variant[0]
    if variant != "v0.5.9-cpu":
        pytest.skip("v0.5.23-cpu has no overrides")
    lock = (selfcheck_stack / "images" / variant / "overrides.lock").read_text()
    (tmp_path / "good").mkdir()
    (tmp_path / "good" / "overrides.lock").write_text(lock)
    good = override_on_the_base(variant, selfcheck_stack, tmp_path / "good" / "overrides.lock")
    assert good.returncode == 0 and good.stdout.strip().splitlines()[-1] == "[]", good.stdout + good.stderr
    broken = tmp_path / "broken" / "overrides.lock"
    broken.parent.mkdir()
    broken.write_text(re.sub(r"(?ms)^huggingface-hub==.*?(?=^[a-z])", "", lock))
    assert "huggingface-hub" not in broken.read_text() and "transformers==5.2.0" in broken.read_text()
    done = override_on_the_base(variant, selfcheck_stack, broken)
    assert done.returncode == 0, done.stderr[-2000:]
    problem = done.stdout.strip().splitlines()[-1]
    assert "import transformers fails: ImportError" in problem and "huggingface_hub" in problem, problem
    assert "[overrides]" in problem, problem


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


@pytest.mark.parametrize("name", ["CUTE_DSL_CACHE_DIR", "B12X_COMPILE_CACHE_DIR"])
def test_unwritable_cute_dsl_or_b12x_cache(
    built_variant: tuple[str, subprocess.CompletedProcess[str]], name: str
) -> None:
    """The CuTe DSL and b12x compile caches (FlashInfer 0.7.2) are checked like every other JIT cache."""
    status, lines = selfcheck(built_variant[0], "-e", f"{name}=/opt/bwstack/compiled")
    assert status == 1
    assert len(lines) == 1 and lines[0].startswith(
        f"bwstack selfcheck: {name}=/opt/bwstack/compiled is not writable for uid {imagelayout.UID} -- fix: chown"
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
        stage = (
            f"{dockerbuild.STAGE_REPO}:{re.sub(r'[^A-Za-z0-9_.-]', '_', tag)[:120]}"  # the kept build stage
        )
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
