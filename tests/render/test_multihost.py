"""Multi-host Compose: ``bwstack render --nodes N`` -> one service per (profile, node rank), checked against the
vendored compose-spec schema and Docker Compose itself, with the rank-above-0 liveness check run for real."""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from ruamel.yaml import YAML

from bwstack import cli, launch
from bwstack.errors import UserError
from bwstack.render import compose, multihost
from bwstack.stack import loader, schema
from healthchecks import imagelayout
from support.stack import edit_yaml

DIST = "${DIST_INIT_ADDR:?" + multihost.DIST_HINT + "}"


def compose_file(
    module_stack: schema.Stack, nodes: int = 2, profiles: tuple[str, ...] = ()
) -> dict[str, Any]:
    [output] = multihost.render_multihost(module_stack, nodes=nodes, profiles=profiles)
    data: dict[str, Any] = YAML(typ="safe").load(output.text)
    return data


def option(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def test_one_service_per_profile_and_rank(module_stack: schema.Stack) -> None:
    data = compose_file(module_stack, nodes=2)
    expected = {f"{p}-node{r}" for p in module_stack.profiles for r in range(2)}
    assert set(data["services"]) == expected
    for name, svc in data["services"].items():
        assert svc["profiles"] == [
            name
        ]  # one compose profile per rank: no command starts two ranks on one host
        assert "depends_on" not in svc
    assert data["name"] == "bwstack"  # the single-host project: the same hf-cache volume on each host
    assert set(data["volumes"]) == {"hf-cache", "jit-v0-5-23-cu130", "jit-v0-5-9-cu130"}
    assert data["secrets"] == {"hf_token": {"file": "secrets/hf_token"}}


def test_rank_services_share_the_single_host_logic(module_stack: schema.Stack) -> None:
    data = compose_file(module_stack, nodes=4, profiles=("dsa-fi-sparse-fp8",))
    for rank in range(4):
        svc = data["services"][f"dsa-fi-sparse-fp8-node{rank}"]
        argv = svc["command"]
        assert argv[-6:] == ["--dist-init-addr", DIST, "--nnodes", "4", "--node-rank", str(rank)]
        single = launch.launch_spec(module_stack, "dsa-fi-sparse-fp8").argv
        expected = list(single)
        expected[expected.index("--host") + 1] = "127.0.0.1"  # stack.bind_address, on the host network
        assert argv[:-6] == expected
        assert option(argv, "--tp-size") == "8"
        assert svc["environment"] == launch.launch_spec(module_stack, "dsa-fi-sparse-fp8").env()
        device = svc["deploy"]["resources"]["reservations"]["devices"][0]
        assert device == {"driver": "nvidia", "count": 2, "capabilities": ["gpu"]}
        assert svc["network_mode"] == "host" and "ports" not in svc and svc["ipc"] == "host"
        assert svc["labels"]["io.bwstack.node-rank"] == str(rank)
        assert svc["labels"]["io.bwstack.nodes"] == "4"
        assert svc["image"] == "bwstack/sglang:v0.5.23-cu130"
        assert svc["restart"] == "on-failure:3"


def test_only_rank_zero_serves_and_runs_the_deep_check(module_stack: schema.Stack) -> None:
    services = compose_file(module_stack, nodes=2, profiles=("dense-triton-auto",))["services"]
    leader, worker = services["dense-triton-auto-node0"], services["dense-triton-auto-node1"]
    assert option(leader["command"], "--host") == "127.0.0.1"  # stack.bind_address, on the host network
    assert option(worker["command"], "--host") == "127.0.0.1"
    deep = leader["healthcheck"]["test"]
    assert deep[:3] == ["CMD", "python3", "/opt/bwstack/healthchecks/warmup.py"]
    assert deep == ["CMD", *launch.launch_spec(module_stack, "dense-triton-auto").healthcheck]
    shallow = worker["healthcheck"]["test"]
    assert shallow[:3] == ["CMD", "python3", "-c"] and "warmup.py" not in " ".join(shallow)
    assert "/health" in shallow[3] and "/generate" not in shallow[3]
    assert worker["healthcheck"]["start_period"] == leader["healthcheck"]["start_period"]
    assert leader["restart"] == worker["restart"] == "no"  # known-bad: no restart loop


def test_bind_address_is_kept_on_the_host_network(stack_copy: Path) -> None:
    edit_yaml(stack_copy, lambda d: d["stack"].update(bind_address="10.1.2.3"))
    services = compose_file(loader.load_stack(stack_copy), profiles=("dense-fi-bf16",))["services"]
    leader, worker = services["dense-fi-bf16-node0"], services["dense-fi-bf16-node1"]
    assert option(leader["command"], "--host") == "10.1.2.3"
    assert option(leader["healthcheck"]["test"], "--url") == "http://10.1.2.3:30000"
    assert option(worker["command"], "--host") == "127.0.0.1"


def test_api_url() -> None:
    assert multihost.api_url("0.0.0.0", 30000) == "http://127.0.0.1:30000"
    assert multihost.api_url("::", 8) == "http://127.0.0.1:8"
    assert multihost.api_url("fd00::1", 30000) == "http://[fd00::1]:30000"
    assert multihost.api_url("127.0.0.1", 1) == "http://127.0.0.1:1"


def test_paths_follow_the_output_folder(module_stack: schema.Stack, tmp_path: Path) -> None:
    out = tmp_path / "deploy" / "multi"
    [output] = multihost.render_multihost(module_stack, nodes=2, profiles=("dense-fi-bf16",), out=out)
    assert output.path == out / multihost.MULTIHOST_FILE
    data = YAML(typ="safe").load(output.text)
    context = data["services"]["dense-fi-bf16-node0"]["build"]["context"]
    assert (out / context).resolve() == module_stack.root.resolve()
    assert (out / data["secrets"]["hf_token"]["file"]).resolve() == (
        module_stack.root / "secrets" / "hf_token"
    ).resolve()
    [named] = multihost.render_multihost(module_stack, nodes=2, out=tmp_path / "two-hosts.yml")
    assert named.path == tmp_path / "two-hosts.yml"


def test_output_is_valid_compose(module_stack: schema.Stack) -> None:
    [output] = multihost.render_multihost(module_stack, nodes=2)
    compose.validate_compose(output.text)  # also done by render_multihost; RenderError on a violation
    assert output.text.startswith("# GENERATED by `bwstack render --nodes 2`")


def test_bad_input(module_stack: schema.Stack) -> None:
    with pytest.raises(UserError, match="--nodes must be 1 or more"):
        multihost.render_multihost(module_stack, nodes=0)
    with pytest.raises(UserError, match="needs --nodes 2 or more"):
        multihost.render_multihost(module_stack, nodes=1)
    with pytest.raises(UserError) as err:
        multihost.render_multihost(module_stack, nodes=3)
    assert err.value.field == "model.tp_size" and "--nodes must divide model.tp_size" in err.value.message
    with pytest.raises(UserError, match="unknown profile 'nope'"):
        multihost.render_multihost(module_stack, nodes=2, profiles=("nope",))


def test_cli_renders_and_checks_multihost(stack_copy: Path) -> None:
    runner = CliRunner()
    base = ["render", "-f", str(stack_copy), "--nodes", "2"]
    result = runner.invoke(cli.main, base)
    assert result.exit_code == 0, result.output
    path = stack_copy.parent / multihost.MULTIHOST_FILE
    assert path.is_file()
    assert runner.invoke(cli.main, [*base, "--check"]).exit_code == 0
    path.write_text(path.read_text().replace('"--nnodes"\n      - "2"', '"--nnodes"\n      - "3"', 1))
    assert runner.invoke(cli.main, [*base, "--check"]).exit_code == 1
    bad = subprocess.run(
        [sys.executable, "-m", "bwstack.cli", *base[:3], "--nodes", "3"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = [line for line in bad.stderr.splitlines() if not line.startswith("bwstack: warning:")]
    assert bad.returncode == 2 and len(lines) == 1 and "model.tp_size" in lines[0]


# --- the liveness check of ranks above 0, run for real against a local server ---------------------------------


class _Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200 if self.path == "/health" else 404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture()
def health_server() -> Iterator[int]:
    server = http.server.HTTPServer(("127.0.0.1", 0), _Health)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def run_test(test: list[str]) -> subprocess.CompletedProcess[str]:
    assert test[0] == "CMD"
    return subprocess.run([sys.executable, *test[2:]], capture_output=True, text=True, timeout=60)


def test_rank_liveness_check_passes_on_a_live_server(health_server: int) -> None:
    result = run_test(multihost.liveness_test(health_server, 1))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1].startswith("healthy: node rank 1")


def test_rank_liveness_check_fails_without_a_server() -> None:
    server = http.server.HTTPServer(("127.0.0.1", 0), _Health)
    port = server.server_address[1]
    server.server_close()  # nothing listens there now
    result = run_test(multihost.liveness_test(port, 3))
    assert result.returncode == 1
    assert result.stdout.strip().startswith("unhealthy: starting: node rank 3")
    assert "Traceback" not in result.stderr


# --- Docker Compose itself ----------------------------------------------------------------------------------


@pytest.mark.docker
def test_docker_compose_accepts_the_file(stack_copy: Path, docker_engine: None) -> None:
    stack = loader.load_stack(stack_copy)
    outputs = multihost.render_multihost(stack, nodes=2)
    compose.write_outputs(outputs)
    (stack_copy.parent / "secrets").mkdir(exist_ok=True)
    (stack_copy.parent / "secrets" / "hf_token").write_text("not-a-token\n")
    base = ["docker", "compose", "-f", str(outputs[0].path)]
    env = {k: v for k, v in os.environ.items() if k not in ("DIST_INIT_ADDR", "COMPOSE_PROFILES")}
    missing = subprocess.run([*base, "config", "-q"], capture_output=True, text=True, timeout=120, env=env)
    assert missing.returncode != 0 and "DIST_INIT_ADDR" in missing.stderr  # required on every host
    env["DIST_INIT_ADDR"] = "10.0.0.1:20000"
    result = subprocess.run([*base, "config", "-q"], capture_output=True, text=True, timeout=120, env=env)
    assert result.returncode == 0, result.stderr
    profile = "dense-fi-bf16-node1"
    out = subprocess.run(
        [*base, "--profile", profile, "config", "--format", "json"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert out.returncode == 0, out.stderr
    resolved = json.loads(out.stdout)
    assert list(resolved["services"]) == [profile]
    svc = resolved["services"][profile]
    assert svc["network_mode"] == "host"
    assert svc["command"][-6:] == ["--dist-init-addr", "10.0.0.1:20000", "--nnodes", "2", "--node-rank", "1"]


def test_model_cache_path_is_bind_mounted_from_where_the_file_is(stack_copy: Path) -> None:
    edit_yaml(stack_copy, lambda d: d["stack"].update(model_cache_path="./models"))
    stack = loader.load_stack(stack_copy)
    for out, mount in ((stack_copy.parent / "mh", "../models"), (stack_copy.parent, "./models")):
        (output,) = multihost.render_multihost(stack, nodes=2, profiles=["dsa-fi-sparse-fp8"], out=out)
        data = YAML(typ="safe").load(output.text)
        assert "hf-cache" not in (data.get("volumes") or {})
        for service in data["services"].values():
            assert service["volumes"][0] == f"{mount}:{imagelayout.HF_HOME}"
