"""GPU reservations: rendered for GPU services only; the stand-in removes them in its own override file.

A service that targets the CPU (``stack.device: cpu``, or a profile's ``device: cpu``) renders without
``deploy.resources.reservations.devices``. The stand-in sweep runs the GPU services of the real compose.yaml
with ``compose.standin.yaml`` (:func:`bwstack.sweep.gpu_reservation_reset`, Compose's ``!reset``) on top, so no
Docker engine needs an NVIDIA runtime or hook. The override is checked two ways: merged by hand the way Compose
merges ``!reset`` and validated against the vendored compose-spec schema; and, where the Docker CLI with the
Compose v2 plugin is installed (no engine needed), by ``docker compose config`` itself.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from ruamel.yaml import YAML

from bwstack.render import compose, k8s, multihost
from bwstack.stack import loader, schema
from bwstack.sweep.run import gpu_reservation_reset
from support.dockercheck import require_compose_cli


def _compose(stack: schema.Stack) -> dict[str, Any]:
    data: dict[str, Any] = YAML(typ="safe").load(compose.render_compose(stack))
    return data


def _devices(service: dict[str, Any]) -> Any:
    return (((service.get("deploy") or {}).get("resources") or {}).get("reservations") or {}).get("devices")


def test_gpu_services_reserve_tp_size_gpus(stack_copy: Path) -> None:
    stack = loader.load_stack(stack_copy)
    services = _compose(stack)["services"]
    assert set(services) == set(stack.profiles)
    for service in services.values():
        assert _devices(service) == [{"driver": "nvidia", "count": 8, "capabilities": ["gpu"]}]


def test_cpu_stack_and_cpu_profile_render_without_reservation(stack_copy: Path) -> None:
    text = stack_copy.read_text(encoding="utf-8")
    stack_copy.write_text(
        text.replace("  project: bwstack\n", "  project: bwstack\n  device: cpu\n"), "utf-8"
    )
    services = _compose(loader.load_stack(stack_copy))["services"]
    assert all("deploy" not in service for service in services.values())
    # one profile on the CPU, the rest on GPUs
    stack_copy.write_text(
        text.replace("    kv_cache_dtype: bf16\n", "    kv_cache_dtype: bf16\n    device: cpu\n", 1), "utf-8"
    )
    stack = loader.load_stack(stack_copy)
    cpu = [name for name in stack.profiles if stack.device_for(name) == "cpu"]
    assert len(cpu) == 1
    services = _compose(stack)["services"]
    assert [name for name, service in services.items() if _devices(service) is None] == cpu


def test_device_is_checked(stack_copy: Path) -> None:
    from bwstack.errors import UserError

    text = stack_copy.read_text(encoding="utf-8")
    stack_copy.write_text(
        text.replace("  project: bwstack\n", "  project: bwstack\n  device: tpu\n"), "utf-8"
    )
    with pytest.raises(UserError, match=r"stack\.device"):
        loader.load_stack(stack_copy)


class _Reset:
    """Compose's ``!reset`` tag, as loaded."""


def _load_override(text: str) -> Any:
    yaml = YAML(typ="safe")
    yaml.constructor.add_constructor("!reset", lambda loader, node: _Reset())
    return yaml.load(text)


def _merge(base: Any, override: Any) -> Any:
    """Compose's merge of an override file, for mappings (all this override holds): ``!reset`` deletes."""
    if not isinstance(base, dict) or not isinstance(override, dict):
        return override
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, _Reset):
            merged.pop(key, None)
        else:
            merged[key] = _merge(base.get(key), value)
    return merged


def test_standin_override_removes_every_gpu_reservation(stack_copy: Path) -> None:
    stack = loader.load_stack(stack_copy)
    base = _compose(stack)
    text = gpu_reservation_reset(list(stack.profiles))
    override = _load_override(text)
    assert set(override["services"]) == set(stack.profiles)
    for service in override["services"].values():  # it touches the reservation and nothing else
        assert list(service) == ["deploy"]
        assert isinstance(service["deploy"]["resources"]["reservations"]["devices"], _Reset)
    merged = _merge(base, override)
    jsonschema.Draft7Validator(compose.compose_schema()).validate(merged)
    for name, service in merged["services"].items():
        assert _devices(service) is None
        assert {k: v for k, v in service.items() if k != "deploy"} == {
            k: v for k, v in base["services"][name].items() if k != "deploy"
        }


def test_docker_compose_config_merges_it_the_same_way(stack_copy: Path) -> None:
    """The Compose v2 plugin itself (``config`` reads files only; no engine is contacted)."""
    require_compose_cli()
    stack = loader.load_stack(stack_copy)
    root = stack_copy.parent
    (root / "compose.standin.yaml").write_text(gpu_reservation_reset(list(stack.profiles)), "utf-8")
    argv = ["docker", "compose", "--project-directory", str(root), "-f", str(root / "compose.yaml")]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DOCKER_HOST", "COMPOSE_"))}
    env["DOCKER_HOST"] = "unix:///nonexistent/docker.sock"  # prove no engine is needed

    def config(*files: str) -> dict[str, Any]:
        args = [*argv, *(x for f in files for x in ("-f", str(root / f))), "--profile", "*", "config"]
        done = subprocess.run(
            [*args, "--format", "json"], capture_output=True, text=True, check=False, timeout=60, env=env
        )
        assert done.returncode == 0, done.stderr
        data: dict[str, Any] = json.loads(done.stdout)
        return data

    plain = config()
    assert all(_devices(s) for s in plain["services"].values())
    merged = config("compose.standin.yaml")
    assert set(merged["services"]) == set(stack.profiles)
    assert all(_devices(s) is None for s in merged["services"].values())


@pytest.mark.parametrize(
    ("target", "nodes", "gpu_text"), [("compose", 2, "driver: nvidia"), ("k8s", 1, "nvidia.com/gpu")]
)
def test_multihost_and_k8s_follow_the_device_too(
    stack_copy: Path, target: str, nodes: int, gpu_text: str
) -> None:
    def text() -> str:
        render_target = k8s.render_k8s if target == "k8s" else multihost.render_multihost
        outputs = render_target(
            loader.load_stack(stack_copy),
            nodes=nodes,
            profiles=["dense-fi-bf16"],
            out=stack_copy.parent / "out",
        )
        return "".join(o.text for o in outputs)

    assert gpu_text in text()
    original = stack_copy.read_text(encoding="utf-8")
    stack_copy.write_text(
        original.replace("  project: bwstack\n", "  project: bwstack\n  device: cpu\n"), "utf-8"
    )
    assert gpu_text not in text()
