"""``upgrade --measure`` with two GPU variants: each side is the profile's own rendered compose service, as
``bwstack up`` starts it; proven here without a GPU, by Compose v2 itself (``docker compose config`` reads the
files only) and by the real refusal of this no-GPU host. Nothing here ran on a GPU."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from bwstack.errors import UserError
from bwstack.host.dockercompose import Project
from bwstack.host.stackproject import project_for
from bwstack.ops import measure_gpu, upgrade_measure
from bwstack.stack import loader
from support.dockercheck import require_compose_cli
from support.stack import run_cli

TOKEN = "hf_measureGpuSpecNeverInTheRender0123456789"
OLD, NEW = "v0.5.9-cu130", "v0.5.23-cu130"


def _config(project: Project, profile: str) -> tuple[dict[str, Any], str]:
    """``docker compose config`` of one profile's service (no engine contacted), and the raw output."""
    done = project.run(["config", "--format", "json"], profiles=[profile], capture=True, timeout=60)
    assert done.returncode == 0, done.stderr
    service: dict[str, Any] = json.loads(done.stdout)["services"][profile]
    return service, done.stdout


def test_a_gpu_side_is_the_profiles_own_compose_service_on_its_variant(stack_copy: Path) -> None:
    require_compose_cli()
    root = stack_copy.parent
    (root / "secrets").mkdir(exist_ok=True)
    (root / "secrets" / "hf_token").write_text(TOKEN + "\n", encoding="utf-8")
    stack = loader.load_stack(stack_copy)
    assert upgrade_measure.on_gpus(stack, OLD, NEW)
    # the first healthy profile both releases can launch: 0.5.9 has no DSA backend flags
    profile = upgrade_measure.measured_profile(stack, [], (OLD, NEW))
    assert (profile, upgrade_measure.measured_profile(stack, [])) == ("dense-fi-bf16", "dsa-fi-sparse-fp8")
    no_engine = {"DOCKER_HOST": "unix:///nonexistent/docker.sock"}  # config reads files only
    up_service, _ = _config(project_for(stack, env=no_engine), profile)  # what `up` starts (compose.yaml)
    old = upgrade_measure._on(stack, profile, OLD)
    path = measure_gpu.spec_file(old, OLD)
    assert path.parent == stack.compose_file.parent and path.name.startswith(".bwstack-measure-")
    side, raw = _config(project_for(old, compose_file=path, env=no_engine), profile)
    # the GPU reservation, shm, ulimits, IPC, mounts, healthcheck, loopback port: up's, unchanged
    devices = side["deploy"]["resources"]["reservations"]["devices"]
    assert devices and all("gpu" in d["capabilities"] for d in devices)
    assert devices == up_service["deploy"]["resources"]["reservations"]["devices"]
    assert [p["host_ip"] for p in side["ports"]] == ["127.0.0.1"]
    for key in ("ports", "shm_size", "ulimits", "ipc", "healthcheck", "secrets", "deploy", "user"):
        assert side.get(key) == up_service.get(key), key
    assert side["image"].endswith(f":{OLD}") and up_service["image"].endswith(f":{NEW}")
    changed = {k for k in set(side) | set(up_service) if side.get(k) != up_service.get(k)}
    assert changed <= {"build", "image", "volumes", "environment", "labels", "command"}, changed
    assert TOKEN not in raw and TOKEN not in path.read_text(encoding="utf-8")


def test_a_host_without_usable_gpus_is_refused_in_one_line_before_the_prediction(stack_copy: Path) -> None:
    if shutil.which("nvidia-smi"):
        pytest.skip("this host has nvidia-smi: the refusal is for a host without GPUs")
    done = run_cli(stack_copy.parent, "upgrade", OLD, NEW, "--measure", timeout=60)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr
    assert "GPU variant v0.5.9-cu130 is measured on this host's GPUs" in lines[0]
    assert "nvidia-smi not found" in lines[0] and "bwstack doctor" in lines[0]
    assert done.stdout == ""  # no prediction ran before it


def test_one_gpu_and_one_cpu_variant_are_refused(stack_copy: Path) -> None:
    stack = loader.load_stack(stack_copy)
    with pytest.raises(UserError, match="one GPU and one CPU variant"):
        upgrade_measure.on_gpus(stack, "v0.5.9-cu130", "v0.5.23-cpu")
    cpu = loader.load_stack(stack_copy.parent / "profiles.cpu.yaml")
    assert not upgrade_measure.on_gpus(cpu, "v0.5.9-cpu", "v0.5.23-cpu")
