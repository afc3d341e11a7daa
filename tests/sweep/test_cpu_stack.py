"""The real path without a GPU, end to end: the v0.5.23-cpu image (its local venv base, the Dockerfile's GPU
path on it: verify_pins.py, user, caches, self-check),
compose.cpu.yaml in real Docker + Compose v2, real SGLang's verdicts, and the sweep in mode ``real``.

One scratch copy of the stack per module (its own compose project name, an ephemeral host port): the image is
built by ``bwstack build`` there (the wheelhouse is linked from the host cache; the Docker layer cache makes
the second build of the session cheap). Everything the module made is removed at the end, also on failure.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from bwstack.sweep import bench
from support import dockerstack
from support.dockerstack import TrackedContainer
from support.stack import copy_stack

pytestmark = [pytest.mark.docker, pytest.mark.real, pytest.mark.slow]

HEALTHY = "cpu-torch-native"
NAN = "cpu-nan-default"
IMAGE = "bwstack/sglang:v0.5.23-cpu"


def bwstack(cwd: Path, *args: str, timeout: float = 1800) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bwstack.cli", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout
    )


def compose(stack: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["docker", "compose", "-f", "compose.cpu.yaml", *args],
        cwd=stack,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def cpu_stack(docker_engine: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A scratch CPU stack (unique project, free port), its tiny models made and its image built."""
    root = tmp_path_factory.mktemp("cpu-stack")
    copy_stack(root)
    project = dockerstack.unique_name("bwstack-cpu-test")
    path = root / "profiles.cpu.yaml"
    yaml = YAML()
    data = yaml.load(path.read_text(encoding="utf-8"))
    data["stack"]["project"] = project
    data["stack"]["port"] = dockerstack.free_port()
    buffer = io.StringIO()
    yaml.dump(data, buffer)
    path.write_text(buffer.getvalue(), encoding="utf-8")
    rendered = bwstack(root, "-f", "profiles.cpu.yaml", "render")
    assert rendered.returncode == 0, rendered.stderr
    try:
        yield root
    finally:
        dockerstack.force_clean(project)


@pytest.fixture(scope="module")
def built(cpu_stack: Path) -> subprocess.CompletedProcess[str]:
    result = bwstack(cpu_stack, "-f", "profiles.cpu.yaml", "build", "--variant", "v0.5.23-cpu")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    made = bwstack(cpu_stack, "-f", "profiles.cpu.yaml", "fetch")
    assert made.returncode == 0, made.stderr
    return result


def project_of(stack: Path) -> str:
    return str(YAML(typ="safe").load((stack / "profiles.cpu.yaml").read_text())["stack"]["project"])


def test_build_runs_the_real_pinned_install_and_verify_pins(built: subprocess.CompletedProcess[str]) -> None:
    out = built.stdout + built.stderr
    assert "cpu base bwstack/cpu-base:v0.5.23-cpu: " in out  # made (or found up to date) by bwstack build
    base = json.loads(
        dockerstack.docker(
            "image", "inspect", "--format", "{{json .}}", "bwstack/cpu-base:v0.5.23-cpu"
        ).stdout
    )
    assert base["Config"]["Labels"]["io.bwstack.cpu-base-layout"] == "venv"
    # one committed layer over the root file system: images/cpu-base/install.sh, offline, --require-hashes
    history = dockerstack.docker(
        "history", "--no-trunc", "--format", "{{.CreatedBy}}", "bwstack/cpu-base:v0.5.23-cpu"
    )
    assert "bwstack-cpu-base.sh" in history.stdout
    labels = json.loads(
        dockerstack.docker("image", "inspect", "--format", "{{json .Config.Labels}}", IMAGE).stdout
    )
    assert labels["io.bwstack.device"] == "cpu"
    assert labels["io.bwstack.sglang"] == "0.5.23"
    assert labels["io.bwstack.pins-verified"] == "1"
    assert "torch==2.13.0+cpu" in labels["io.bwstack.python-pins"]
    # the image really holds the pins: verify_pins.py, as the build ran it, now against the built image
    verify = dockerstack.docker(
        "run", "--rm", "--network", "none", "--entrypoint", "python3",
        "-e", f"SGLANG_VERSION={labels['io.bwstack.sglang']}", "-e", f"PYTHON_PINS={labels['io.bwstack.python-pins']}",
        IMAGE, "/opt/bwstack/verify_pins.py", check=False,
    )  # fmt: skip
    assert verify.returncode == 0, verify.stderr
    assert "3 pins verified" in verify.stdout
    placeholder = dockerstack.docker(
        "run", "--rm", "--network", "none", "--entrypoint", "python3", IMAGE, "-c",
        "import sgl_kernel; print(sgl_kernel.PLACEHOLDER, sgl_kernel.__version__)", check=False,
    )  # fmt: skip
    assert placeholder.stdout.strip() == "True 0.0.1+bwstack.placeholder", placeholder.stderr


def test_healthy_profile_goes_healthy_by_a_real_sampled_decode(cpu_stack: Path, built: object) -> None:
    project = project_of(cpu_stack)
    up = compose(cpu_stack, "--profile", HEALTHY, "up", "-d", "--wait", "--wait-timeout", "420", "--no-build")
    try:
        assert up.returncode == 0, up.stderr[-2000:]
        cid = dockerstack.docker(
            "ps", "-q", "--filter", f"label=com.docker.compose.project={project}"
        ).stdout.split()
        container = TrackedContainer(cid[0])
        assert container.health() == "healthy"
        last = container.health_log()[-1]
        assert last.startswith("healthy:"), last
        assert "SGLang" in container.logs() or "sglang" in container.logs()
    finally:
        down = compose(cpu_stack, "--profile", "*", "down", "-v", "--remove-orphans")
    assert down.returncode == 0, down.stderr
    assert dockerstack.leftovers(project) == {}


def test_nan_weights_end_unhealthy_nan_and_the_container_exits(cpu_stack: Path, built: object) -> None:
    project = project_of(cpu_stack)
    up = compose(cpu_stack, "--profile", NAN, "up", "-d", "--wait", "--wait-timeout", "420", "--no-build")
    try:
        assert up.returncode != 0
        cid = dockerstack.docker(
            "ps", "-aq", "--filter", f"label=com.docker.compose.project={project}"
        ).stdout.split()
        container = TrackedContainer(cid[0])
        assert dockerstack.wait_until(lambda: container.state()["Status"] == "exited", timeout=120)
        assert container.verdict() == "nan", container.health_log()
        assert container.state()["ExitCode"] == 3  # the serve wrapper's fail-fast
    finally:
        compose(cpu_stack, "--profile", "*", "down", "-v", "--remove-orphans")
    assert dockerstack.leftovers(project) == {}


def test_sweep_matches_every_expect_from_the_real_server(
    cpu_stack: Path, built: object, tmp_path: Path
) -> None:
    out = tmp_path / "report"
    result = bwstack(cpu_stack, "-f", "profiles.cpu.yaml", "sweep", "--bench", "--out", str(out))
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    doc = json.loads((out / "results.json").read_text())
    assert doc["mode"]["kind"] == "real" and doc["mode"]["standin"] is False and doc["mode"]["bench"] is True
    assert set(doc["results"]) == set(doc["plan"])
    settings = YAML(typ="safe").load((cpu_stack / "profiles.cpu.yaml").read_text())["stack"]["bench"]
    healthy = [name for name, row in doc["results"].items() if row["verdict"] == "healthy"]
    assert healthy
    for name, row in doc["results"].items():
        assert row["match"], (name, row["verdict"], row["reason"])
        assert row["standin"] is False and row["source"].startswith("real SGLang on the CPU")
        if row["verdict"] == "healthy":
            assert row["evidence"]["server_version"] == "0.5.23"
            assert_sane_speed(name, row["speed"], settings)
        else:
            assert "speed" not in row, name  # only a healthy profile is measured
    html = (out / "matrix.html").read_text()
    assert "real SGLang 0.5.23" in html
    speed_table = html.split('<section id="speed">', 1)[1].split("</section>", 1)[0]
    for name in healthy:
        figures = doc["results"][name]["speed"]
        assert f'data-profile="{name}"' in speed_table
        assert f"{bench.figure(figures['output_tokens_per_s'])}</td>" in speed_table
        assert figures["host"] in speed_table
        assert f"{bench.short_words(figures)}</span>" in html.split('<table class="grid">', 1)[1]
    assert dockerstack.leftovers(project_of(cpu_stack)) == {}


def assert_sane_speed(name: str, speed: dict[str, Any], settings: dict[str, int]) -> None:
    """Figures the real server could have produced: every request done, rates > 0, percentiles ordered."""
    assert "error" not in speed, (name, speed)
    assert speed["completed"] == settings["num_prompts"] and speed["failed"] == 0, speed
    assert speed["timed_out"] is False
    assert speed["output_tokens"] == settings["num_prompts"] * settings["output_len"]  # ignore_eos held
    for key in ("output_tokens_per_s", "requests_per_s", "ttft_ms_p50", "ttft_ms_p99", "itl_ms_p50"):
        assert isinstance(speed[key], float) and speed[key] > 0, (key, speed)
    assert speed["ttft_ms_p99"] >= speed["ttft_ms_p50"]
    # tokens/s and requests/s come from one duration; the load cannot outrun its own time limit
    assert speed["output_tokens_per_s"] == pytest.approx(
        speed["requests_per_s"] * settings["output_len"], rel=0.01
    )
    assert 0 < speed["duration_s"] <= settings["time_limit_s"]
    assert speed["bench_s"] >= speed["duration_s"]  # the step's wall time holds the load
    # the CPU image cannot import SGLang's own client (no `datasets`): ours ran, and the row says why
    assert speed["client"] == "bwstack bench_client", speed
    assert "sglang.bench_serving does not import in this image" in speed["client_note"]
    assert "datasets" in speed["client_note"]
    assert speed["host"].startswith("CPU: ") and speed["host"].endswith("(real SGLang, no GPU)")
    assert speed["standin"] is False and speed["settings"] == settings
