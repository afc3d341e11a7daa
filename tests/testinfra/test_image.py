"""The built serving image (stand-in build of the project Dockerfile), per variant, through testinfra.

Entrypoint, HEALTHCHECK, user and port are the literal promises of docs/design.md's "Image layout" (not the
Dockerfile read again: ``docker build`` already guarantees that); labels and arch lists come from
``images/<variant>/pins.toml`` (``bwstack.stack.pins.load_variant(...).build_args()``).
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from bwstack import __version__
from bwstack.build.standin_image import BASE_REPO
from bwstack.stack import pins
from healthchecks import imagelayout
from support import dockerstack
from support.infra_targets import Target
from support.stack import ROOT

pytestmark = [pytest.mark.docker]

#: the scripts the image runs (executable) and the modules they import (read-only for the server user)
HEALTHCHECK_FILES = ("warmup.py", "serve.py", "bench_client.py")
HEALTHCHECK_MODULES = ("common.py", "verdict.py", "signatures/__init__.py", "signatures/runtime.py")
#: image label -> the pins.toml build arg it must equal
LABEL_ARGS = {
    "io.bwstack.variant": "PIN_VARIANT",
    "io.bwstack.sglang": "SGLANG_VERSION",
    "io.bwstack.sglang-commit": "SGLANG_COMMIT",
    "io.bwstack.transformers": "TRANSFORMERS_VERSION",
    "io.bwstack.cuda": "PIN_CUDA_VERSION",
    "io.bwstack.torch-cuda-arch-list": "PIN_TORCH_CUDA_ARCH_LIST",
    "io.bwstack.flashinfer-cuda-arch-list": "PIN_FLASHINFER_CUDA_ARCH_LIST",
    "io.bwstack.gpu-archs": "GPU_ARCHS",
    "io.bwstack.python-pins": "PYTHON_PINS",
    "io.bwstack.sources": "SOURCES",
    "io.bwstack.env": "ENV_SWITCHES",
    "io.bwstack.device": "DEVICE",
    "org.opencontainers.image.version": "PIN_VARIANT",
}
SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSWORD|API_KEY|CREDENTIAL", re.IGNORECASE)


def image_config(image: str) -> dict[str, Any]:
    config: dict[str, Any] = json.loads(
        dockerstack.docker("image", "inspect", "--format", "{{json .Config}}", image).stdout
    )
    return config


def test_entrypoint_healthcheck_user_and_port(image_target: Target) -> None:
    """What docs/design.md's "Image layout" promises, as literals: the serve wrapper as entrypoint, the deep
    check as HEALTHCHECK (light mode; 30 s / 90 s / 45 min / 3 retries), uid 10001, SIGTERM, port 30000."""
    config = image_config(image_target.image)
    assert config["Entrypoint"] == ["python3", "/opt/bwstack/healthchecks/serve.py"]
    assert config["Healthcheck"] == {
        "Test": ["CMD", "python3", "/opt/bwstack/healthchecks/warmup.py", "--mode", "light"],
        "Interval": 30 * 10**9,
        "Timeout": 90 * 10**9,
        "StartPeriod": 45 * 60 * 10**9,
        "Retries": 3,
    }
    assert config["User"] == "10001:10001"
    assert config["StopSignal"] == "SIGTERM"
    assert set(config["ExposedPorts"]) == {"30000/tcp"}


def test_healthcheck_and_wrapper_are_present_and_executable(image_target: Target) -> None:
    host = image_target.host
    for name in HEALTHCHECK_FILES:
        script = host.file(f"{imagelayout.HC_DIR}/{name}")
        assert script.is_file, name
        assert script.mode & 0o111 == 0o111, f"{name}: mode {script.mode:o}"
        assert script.user == "root" and script.mode & 0o022 == 0, f"{name} is writable by the server user"
    for name in HEALTHCHECK_MODULES:
        module = host.file(f"{imagelayout.HC_DIR}/{name}")
        assert module.is_file and module.user == "root" and module.mode & 0o022 == 0, name
    assert host.run(f"test -w {imagelayout.HC_DIR}/warmup.py").rc != 0
    assert host.run(f"python3 {imagelayout.HC_DIR}/warmup.py --help").rc == 0
    assert (
        host.run(f"python3 {imagelayout.HC_DIR}/bench_client.py --help").rc == 0
    )  # the sweep's --bench load
    variant_dir = ROOT / "images" / image_target.variant
    assert (
        host.file("/opt/bwstack/versions.json").content_string == (variant_dir / "versions.json").read_text()
    )
    snapshot = json.loads(host.file("/opt/bwstack/sglang-args.json").content_string)
    assert snapshot == json.loads((variant_dir / "sglang-args.json").read_text())


def test_labels_equal_the_pins(image_target: Target) -> None:
    labels = image_config(image_target.image)["Labels"]
    args = pins.load_variant(ROOT / "images", image_target.variant).build_args()
    assert set(args) - {"BASE_IMAGE"} <= set(LABEL_ARGS.values()), "a pin has no label"
    for label, arg in LABEL_ARGS.items():
        assert labels[label] == args[arg], label
    assert labels["io.bwstack.version"] == __version__
    assert image_target.variant in labels["org.opencontainers.image.title"]
    assert re.fullmatch(r"[0-9a-f]{40}|", labels["org.opencontainers.image.revision"])
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", labels["org.opencontainers.image.created"])
    # a stand-in build: built on the stand-in base instead of BASE_IMAGE, pinned installs skipped
    assert labels["org.opencontainers.image.base.name"].startswith(f"{BASE_REPO}:")
    assert labels["io.bwstack.pins-verified"] == "0"


def test_arch_lists_are_the_variants(image_target: Target) -> None:
    args = pins.load_variant(ROOT / "images", image_target.variant).build_args()
    env = image_target.host.environment()
    for name in ("TORCH_CUDA_ARCH_LIST", "FLASHINFER_CUDA_ARCH_LIST"):
        assert env[name] == args[f"PIN_{name}"] != "", name
    assert env["BWSTACK_VARIANT"] == image_target.variant


def test_no_secret_in_env_labels_or_history(image_target: Target) -> None:
    config = image_config(image_target.image)
    for entry in config["Env"]:
        name, _, value = entry.partition("=")
        assert not (SECRET_NAME.search(name) and value), f"image env carries a secret-like value: {name}"
    for name, value in config["Labels"].items():
        assert not (SECRET_NAME.search(name) and value), f"label {name} looks like a secret"
    history = dockerstack.docker(
        "history", "--no-trunc", "--format", "{{.CreatedBy}}", image_target.image
    ).stdout
    assert not re.search(r"(HF_TOKEN|HUGGING_FACE_HUB_TOKEN|API_KEY)=\S", history), "a secret was baked in"
    assert "/run/secrets" not in history


def test_runs_as_bwstack_and_owns_the_writable_paths(image_target: Target) -> None:
    host = image_target.host
    user = host.user()
    assert (user.name, user.uid) == ("bwstack", 10001)
    assert host.check_output("id -u") == "10001"
    for path in (imagelayout.SERVER_LOG.rsplit("/", 1)[0], imagelayout.JIT_CACHE, imagelayout.HF_HOME):
        folder = host.file(path)
        assert folder.is_directory and folder.user == "bwstack" and folder.group == "bwstack", path
        probe = f"{path}/.bwstack-write-test"
        assert host.run(f"touch {probe} && rm {probe}").rc == 0, f"{path} is not writable"
    assert host.run("touch /opt/bwstack/x").rc != 0


def test_user_group_is_the_one_the_image_runs_with(image_target: Target) -> None:
    """``USER uid:gid`` runs the server with that gid: the ``bwstack`` group must have it, or the writable paths
    (``chown bwstack:bwstack``) and every file the server writes end up in two different groups."""
    uid, gid = "10001", "10001"
    host = image_target.host
    assert host.check_output("id -g") == gid
    assert host.group("bwstack").gid == int(gid), "group bwstack does not have the gid of the USER line"
    assert host.user("bwstack").gid == int(gid) and host.user("bwstack").uid == int(uid)
