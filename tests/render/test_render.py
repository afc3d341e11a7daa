"""Rendering: profiles.yaml -> compose.yaml through the real Jinja templates, checked against the vendored
compose-spec schema, Docker Compose itself, and the committed file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from bwstack import launch
from bwstack.render import compose
from bwstack.render.compose import RenderError
from bwstack.stack import loader, schema
from support.stack import edit_yaml


def _services(text: str) -> dict[str, dict[str, object]]:
    data = YAML(typ="safe").load(text)
    services: dict[str, dict[str, object]] = data["services"]
    return services


def test_every_profile_is_a_service_under_its_own_profile(stack: schema.Stack) -> None:
    services = _services(compose.render_compose(stack))
    assert set(services) == set(stack.profiles)
    for name, service in services.items():
        assert service["profiles"] == [name]
        assert "depends_on" not in service


def test_service_shape(stack: schema.Stack) -> None:
    services = _services(compose.render_compose(stack))
    svc = services["dsa-fi-sparse-fp8"]
    assert svc["ports"] == ["127.0.0.1:30000:30000"]
    assert svc["ipc"] == "host"
    assert svc["ulimits"] == {"memlock": -1, "stack": 67108864}
    device = svc["deploy"]["resources"]["reservations"]["devices"][0]  # type: ignore[index]
    assert device == {"driver": "nvidia", "count": 8, "capabilities": ["gpu"]}
    assert svc["secrets"] == ["hf_token"]
    assert svc["image"] == "bwstack/sglang:v0.5.23-cu130"
    assert svc["build"]["args"]["BASE_IMAGE"].startswith("lmsysorg/sglang:v0.5.23-cu130")  # type: ignore[index]
    command = svc["command"]
    assert isinstance(command, list) and all(isinstance(a, str) for a in command)
    assert command[:2] == ["--model-path", "nvidia/GLM-5-NVFP4"]
    test = svc["healthcheck"]["test"]  # type: ignore[index]
    assert test[:3] == ["CMD", "python3", "/opt/bwstack/healthchecks/warmup.py"]
    assert "dsa_decode_backend=flashinfer_sparse_mla" in test
    assert "start_interval" not in svc["healthcheck"]  # type: ignore[operator]
    assert svc["restart"] == "on-failure:3"
    assert services["dense-triton-auto"]["restart"] == "no"  # known-bad: no restart loop


def test_no_secret_inline_and_no_shell(stack: schema.Stack) -> None:
    text = compose.render_compose(stack)
    assert "HF_TOKEN" not in text and "--api-key" not in text
    assert "CMD-SHELL" not in text and "sh -c" not in text


def test_flag_spelling_follows_the_variant_parser(stack: schema.Stack) -> None:
    old = launch.launch_spec(stack, "legacy-nsa-default-fp8").argv
    assert old[old.index("--attention-backend") + 1] == "nsa"
    new = launch.launch_spec(stack, "dsa-fi-sparse-fp8").argv
    assert new[new.index("--attention-backend") + 1] == "dsa"
    assert "--dsa-decode-backend" in new and "--nsa-decode-backend" not in new


def test_nsa_flags_rendered_for_old_parser(stack_copy: Path) -> None:
    edit_yaml(
        stack_copy,
        lambda d: d["profiles"]["legacy-nsa-default-fp8"].insert(2, "dsa_decode_backend", "flashmla_kv"),
    )
    stack = loader.load_stack(stack_copy)
    argv = launch.launch_spec(stack, "legacy-nsa-default-fp8").argv
    assert argv[argv.index("--nsa-decode-backend") + 1] == "flashmla_kv"
    assert "--dsa-decode-backend" not in argv


def test_bind_address_and_opt_in_features(stack_copy: Path) -> None:
    edit_yaml(
        stack_copy, lambda d: d["stack"].update(bind_address="0.0.0.0", compose_features=["start_interval"])
    )
    services = _services(compose.render_compose(loader.load_stack(stack_copy)))
    svc = services["dense-fi-bf16"]
    assert svc["ports"] == ["0.0.0.0:30000:30000"]
    assert "start_interval" in svc["healthcheck"]  # type: ignore[operator]


def test_schema_validation_catches_a_bad_key() -> None:
    bad = "services:\n  x:\n    image: a\n    healthcheck:\n      start_intervall: 1s\n"
    with pytest.raises(RenderError, match="compose-spec schema"):
        compose.validate_compose(bad)


def test_strict_undefined(stack: schema.Stack) -> None:
    template = stack.root / "templates" / compose.SERVICE_MACRO
    template.write_text(template.read_text().replace("{{ s.shm_size | q }}", "{{ s.shm_sise | q }}"))
    import jinja2

    with pytest.raises(jinja2.UndefinedError):
        compose.render_compose(stack)


def test_committed_compose_is_a_fresh_render(repo_root: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "bwstack.cli", "render", "--check", "-f", str(repo_root / "profiles.yaml")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_render_check_reports_drift(stack_copy: Path) -> None:
    compose = stack_copy.parent / "compose.yaml"
    compose.write_text(compose.read_text().replace("ipc: host", "ipc: private", 1))
    result = subprocess.run(
        [sys.executable, "-m", "bwstack.cli", "render", "--check", "-f", str(stack_copy)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1
    assert "-    ipc: private" in result.stdout and "+    ipc: host" in result.stdout
    assert "differs from the committed files" in result.stderr


def test_render_writes_atomically_and_is_stable(stack_copy: Path) -> None:
    stack = loader.load_stack(stack_copy)
    outputs = compose.render_outputs(stack)
    compose.write_outputs(outputs)
    assert compose.check_outputs(compose.render_outputs(loader.load_stack(stack_copy))) == ""
    leftovers = [p for p in stack_copy.parent.iterdir() if p.name.startswith(".compose.yaml.")]
    assert leftovers == []


@pytest.mark.docker
def test_docker_compose_config_accepts_every_profile(repo_root: Path, docker_engine: None) -> None:
    compose = repo_root / "compose.yaml"
    base = ["docker", "compose", "-f", str(compose)]
    result = subprocess.run([*base, "config", "-q"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    stack = loader.load_stack(repo_root / "profiles.yaml")
    for name in stack.profiles:
        out = subprocess.run(
            [*base, "--profile", name, "config", "--services"], capture_output=True, text=True, timeout=120
        )
        assert out.returncode == 0, out.stderr
        assert out.stdout.split() == [name]
