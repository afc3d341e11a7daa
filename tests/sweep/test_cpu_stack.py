"""The real path without a GPU, end to end: the v0.5.23-cpu image (its local venv base, the Dockerfile's GPU
path on it: verify_pins.py, user, caches, self-check),
compose.cpu.yaml in real Docker + Compose v2, real SGLang's verdicts, and the sweep in mode ``real``.

One scratch copy of the stack per module (its own compose project name, an ephemeral host port): the image is
built by ``bwstack build`` there (the wheelhouse is linked from the host cache; the Docker layer cache makes
the second build of the session cheap). Everything the module made is removed at the end, also on failure.

Healthy under sustained load, on the shipped defaults (issues 23, 32): one container of that image, started
by ``bwstack up --soak`` from a scratch stack whose profiles.cpu.yaml is untouched but for its project name and
port, stays healthy busy and idle; its real scheduler and detokenizer frozen with SIGSTOP in the middle of a
soak are ``hang`` for the soak, Docker's own health status (``unhealthy: hang`` within 75 s of the freeze)
and fail-fast (exit 3), with the derived hang bound (30 s on the CPU profiles) and Docker's probes as
rendered (every 10 s, 3 retries).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from markupsafe import escape
from ruamel.yaml import YAML

from bwstack.stack import loader
from bwstack.sweep import bench, quality, report, soak
from support import dockerstack, docsblock
from support.dockerstack import TrackedContainer
from support.headless import run_chromium, table_cells
from support.realserve import hold
from support.stack import copy_stack, edit_yaml

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
    port = dockerstack.free_port()
    edit_yaml(root / "profiles.cpu.yaml", lambda data: data["stack"].update(project=project, port=port))
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


def test_swapping_profiles_with_plain_compose_is_the_documented_command(
    cpu_stack: Path, built: object
) -> None:
    """Swapping backends with plain Compose (issue 34): while profile A holds the port, `up -d --wait` of B
    fails on the port; the command the compose file's header documents (stop every profile, then up B)
    swaps. Run exactly as written there, through a shell."""
    project = project_of(cpu_stack)
    header = (cpu_stack / "compose.cpu.yaml").read_text().splitlines()[:6]
    documented = next(line.strip("# ").strip() for line in header if "stop &&" in line)
    assert documented == (
        "docker compose --profile '*' stop && docker compose --profile <profile> up -d --wait"
    ), header
    try:
        first = compose(cpu_stack, "--profile", NAN, "up", "-d", "--no-build")  # A: binds the port at once
        assert first.returncode == 0, first.stderr
        clash = compose(cpu_stack, "--profile", HEALTHY, "up", "-d", "--wait", "--no-build", timeout=600)
        assert clash.returncode != 0 and "port is already allocated" in clash.stderr, clash.stderr[-2000:]
        compose(cpu_stack, "--profile", HEALTHY, "rm", "-f", "-s")
        command = documented.replace("docker compose", "docker compose -f compose.cpu.yaml")
        command = command.replace("<profile>", HEALTHY) + " --no-build --wait-timeout 420"
        swapped = subprocess.run(
            ["bash", "-c", command], cwd=cpu_stack, capture_output=True, text=True, timeout=900, check=False
        )
        assert swapped.returncode == 0, swapped.stderr[-3000:]
        running = dockerstack.docker(
            "ps",
            "--filter",
            f"label=com.docker.compose.project={project}",
            "--format",
            "{{.Names}} {{.Status}}",
        ).stdout.splitlines()
        assert len(running) == 1 and HEALTHY in running[0] and "(healthy)" in running[0], running
    finally:
        compose(cpu_stack, "--profile", "*", "down", "-v", "--remove-orphans")
    assert dockerstack.leftovers(project) == {}


def test_a_nan_profile_under_restart_on_failure_loads_the_model_once(built: object, tmp_path: Path) -> None:
    """No reload storm (issue 34): the NaN profile as an operator who does not know it is bad would run it,
    expected healthy and so rendered with ``restart: on-failure:3``, under plain ``docker compose up``. The
    first start loads the model, the readiness probe finds NaN and fail-fast stops it (exit 3); Docker then
    restarts it three times, and each restart exits at once on the verdict the wrapper remembered for this
    launch spec: the model is loaded once."""
    copy_stack(tmp_path)
    project = dockerstack.unique_name("bwstack-restart-test")

    def edit(data: Any) -> None:
        data["stack"].update({"project": project, "port": dockerstack.free_port(), "restart": "on-failure:3"})
        data["profiles"][NAN].update({"expect": "healthy", "why": "", "evidence": []})

    edit_yaml(tmp_path / "profiles.cpu.yaml", edit)
    assert bwstack(tmp_path, "-f", "profiles.cpu.yaml", "render").returncode == 0
    assert bwstack(tmp_path, "-f", "profiles.cpu.yaml", "fetch").returncode == 0
    service = YAML(typ="safe").load((tmp_path / "compose.cpu.yaml").read_text())["services"][NAN]
    assert service["restart"] == "on-failure:3"
    try:
        up = compose(tmp_path, "--profile", NAN, "up", "-d", "--no-build")
        assert up.returncode == 0, up.stderr
        cid = dockerstack.docker(
            "ps", "-aq", "--filter", f"label=com.docker.compose.project={project}"
        ).stdout.split()
        container = TrackedContainer(cid[0])

        def done() -> bool:
            state = container.state()
            return state["Status"] == "exited" and container.inspect()["RestartCount"] == 3

        assert dockerstack.wait_until(done, timeout=420, interval=1.0), container.logs()[-3000:]
        logs = container.logs()
        assert container.state()["ExitCode"] == 3, logs[-3000:]
        assert logs.count("bwstack-serve: starting ") == 1, logs[-3000:]  # one model load
        assert logs.count("Load weight begin") == 1, logs[-3000:]
        assert "remembered 'nan' for this launch spec" in logs, logs[-3000:]
        refused = [line for line in logs.splitlines() if "not starting: the same launch spec" in line]
        assert len(refused) == 3, logs[-3000:]
        assert "ended 'unhealthy: nan: " in refused[0] and "bwstack up --retry" in refused[0], refused[0]
        print(f"\n{len(refused)} restarts refused without a model load; the first: {refused[0]}")
    finally:
        compose(tmp_path, "--profile", "*", "down", "-v", "--remove-orphans", "--timeout", "5")
        dockerstack.force_clean(project)
    assert dockerstack.leftovers(project) == {}


def test_sweep_matches_every_expect_from_the_real_server(
    cpu_stack: Path, built: object, tmp_path: Path, chromium: str
) -> None:
    out = tmp_path / "report"
    result = bwstack(
        cpu_stack,
        "-f",
        "profiles.cpu.yaml",
        "sweep",
        "--bench",
        "--soak",
        str(SWEEP_SOAK_S),
        "--compare-to",
        REFERENCE,
        "--out",
        str(out),
    )
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
            assert_scored_and_soaked(name, row)
            # seconds per start-up phase, from the real server's own log (issue 34 item 4)
            assert row["start"]["phase"] == "ready", (name, row["start"])
            assert {"launch", "weights", "kv_cache", "first_decode"} <= set(row["start"]["seconds"]), row[
                "start"
            ]
        else:
            assert "speed" not in row and "soak" not in row, name  # only a healthy profile is measured
    html = (out / "matrix.html").read_text()
    assert "real SGLang 0.5.23" in html
    speed_table = html.split('<section id="speed">', 1)[1].split("</section>", 1)[0]
    for name in healthy:
        figures = doc["results"][name]["speed"]
        assert f'data-profile="{name}"' in speed_table
        assert f"{bench.figure(figures['output_tokens_per_s'])}</td>" in speed_table
        assert figures["host"] in speed_table
        assert f"{bench.short_words(figures)}</span>" in html.split('<table class="grid">', 1)[1]
        # the evidence section shows the probes' short and long scores and the soak's figures
        evidence = html.split(f'id="profile-{name}"', 1)[1].split("</details>", 1)[0]
        assert f"<dt>scores</dt><dd>{escape(report.score_words(doc['results'][name]['scores']))}" in evidence
        assert f"<dt>soak</dt><dd>{escape(soak.words(doc['results'][name]['soak']))}</dd>" in evidence
    assert_compared(doc, healthy)
    assert_quality_table_in_chromium(out / "matrix.html", doc, chromium, tmp_path)
    assert dockerstack.leftovers(project_of(cpu_stack)) == {}


#: the real sweep's --compare-to reference: the copying model, whose needle retrieval holds at every length
REFERENCE = "cpu-long-copy"


def assert_compared(doc: dict[str, Any], healthy: list[str]) -> None:
    """--compare-to on the real server: the reference ran first and its answers were recorded; each other
    healthy row holds its retrieval by length and its comparison with the reference's recorded answers."""
    assert doc["mode"]["compare_to"] == REFERENCE and doc["mode"]["retrieval"] is True
    assert REFERENCE in healthy and len(healthy) >= 2, healthy
    first = min(doc["results"].values(), key=lambda row: row["started_at"])
    assert first["profile"] == REFERENCE
    ref = doc["results"][REFERENCE]["quality"]
    print(f"\n{REFERENCE}: {quality.words(ref)}")
    assert ref["reference"] is True and "compare" not in ref, ref
    assert [r["right"] for r in ref["retrieval"]] == [r["asked"] for r in ref["retrieval"]], ref  # it copies
    for name in healthy:
        row = doc["results"][name]["quality"]
        # half the window, the window, twice the window (2048), each capped by the model's served context
        assert [r["length"] for r in row["retrieval"]][:2] == [1024, 2048] and len(row["retrieval"]) == 3, row
        if name == REFERENCE:
            continue
        print(f"{name}: {quality.words(row)}")
        vs = row["compare"]
        assert vs is not None and vs["to"] == REFERENCE and vs["positions"] > 3000, row
        # the tiny Llama is another model than the copying one: far past the gate
        assert vs["passed"] is False and vs["mean_kl"] > 1.0, vs
    for name, row in doc["results"].items():
        if name not in healthy:
            assert "quality" not in row, name  # only a healthy server is asked


def assert_quality_table_in_chromium(page: Path, doc: dict[str, Any], chromium: str, tmp: Path) -> None:
    """The real matrix.html's quality table, as headless Chromium parsed it, holds the rows' figures."""
    dom = run_chromium(chromium, page, tmp, "--dump-dom").stdout
    rows = table_cells(dom, "quality")
    measured = {name: row["quality"] for name, row in doc["results"].items() if "quality" in row}
    lengths = sorted({r["length"] for q in measured.values() for r in q["retrieval"]})
    assert rows[0] == ["profile", *(f"retrieval @{n}" for n in lengths), "mean KL", "p99 KL", "top-1",
                              "verdict"], rows  # fmt: skip
    shown = {row[0]: row[1:] for row in rows[1:]}
    for name in doc["results"]:
        if name not in measured:
            assert name not in shown
            continue
        quality = measured[name]
        found = {r["length"]: f"{r['right']}/{r['asked']}" for r in quality["retrieval"]}
        cells = [found.get(n, "-") for n in lengths]
        vs = quality.get("compare")
        tail = (["reference", "", "", ""] if name == REFERENCE else
                [f"{vs['mean_kl']:.4g}", f"{vs['p99_kl']:.4g}", f"{vs['top1_agreement']:.2%}",
                 "within" if vs["passed"] else "DIVERGES"])  # fmt: skip
        assert shown[name] == [*cells, *tail], (name, shown[name])


SWEEP_SOAK_S = 8  # seconds of soak on each healthy profile of the real sweep


def assert_scored_and_soaked(name: str, row: dict[str, Any]) -> None:
    """A healthy real row carries the readiness probe's short and long scores and the soak's figures."""
    scores = row["scores"]
    assert isinstance(scores["short"], float) and isinstance(scores["long"], float), (name, scores)
    assert scores["long_tokens"] > 2000, (name, scores)  # past the default sparse window (2048, capped)
    soaked = row["soak"]
    assert soaked["verdict"] == "ok", (name, soaked)
    assert soaked["requests"] > 0 and soaked["tokens"] > 0 and soaked["stalls"] == 0, (name, soaked)
    assert 0 < soaked["itl_ms_p50"] <= soaked["itl_ms_p99"], (name, soaked)
    assert soaked["duration_s"] >= SWEEP_SOAK_S - 1, (name, soaked)


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


# --- healthy under sustained load, a frozen scheduler is hang (issue 23) ------------------------------------

#: what the shipped CPU profile renders (compose.cpu.yaml): the derived hang bound and Docker's probe interval;
#: the fixture checks the rendered file says so, it does not set them
HANG_BOUND = 30
HC_INTERVAL = 10
#: the issue-32 promise: a server frozen under load is Docker-unhealthy as `hang` within this many seconds
HANG_WITHIN = 75


@dataclass
class HangStack:
    root: Path
    frozen: list[int]  # host pids the test froze: thawed (SIGCONT) before the teardown stops anything


@pytest.fixture()
def hang_stack(built: object, tmp_path: Path) -> Iterator[HangStack]:
    """A scratch CPU stack on the shipped defaults: profiles.cpu.yaml as committed but for its own project and
    a free port; the module's image. The rendered service carries the derived hang bound and Docker's probe
    timing as shipped (checked here, not set). Everything it started is removed at the end (the frozen
    processes thawed first)."""
    copy_stack(tmp_path)
    project = dockerstack.unique_name("bwstack-hang-test")
    edit_yaml(
        tmp_path / "profiles.cpu.yaml",
        lambda data: data["stack"].update({"project": project, "port": dockerstack.free_port()}),
    )
    rendered = bwstack(tmp_path, "-f", "profiles.cpu.yaml", "render")
    assert rendered.returncode == 0, rendered.stderr
    service = YAML(typ="safe").load((tmp_path / "compose.cpu.yaml").read_text())["services"][HEALTHY]
    assert service["environment"]["BWSTACK_HC_HANG_AFTER"] == str(HANG_BOUND), service["environment"]
    assert service["healthcheck"]["interval"].endswith(f":-{HC_INTERVAL}s}}"), service["healthcheck"]
    assert service["healthcheck"]["retries"] == 3
    made = bwstack(tmp_path, "-f", "profiles.cpu.yaml", "fetch")
    assert made.returncode == 0, made.stderr
    made_stack = HangStack(tmp_path, [])
    try:
        yield made_stack
    finally:
        for pid in made_stack.frozen:
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        compose(tmp_path, "--profile", "*", "down", "-v", "--remove-orphans", "--timeout", "5")
        dockerstack.force_clean(project)


def sglang_pids(container: str, name: str) -> list[int]:
    """The host pids of the real SGLang process ``name`` (``sglang::scheduler``, ``sglang::detokenizer``) in
    the container (``docker top``)."""
    rows = dockerstack.docker("top", container, "-eo", "pid,args").stdout.splitlines()[1:]
    return [int(row.split(None, 1)[0]) for row in rows if name in row]


def test_healthy_idle_and_under_a_soak_a_frozen_scheduler_is_hang_and_the_container_stops(
    hang_stack: HangStack,
) -> None:
    """One container, started by ``bwstack up --soak`` as an operator would, on the shipped defaults: busy and
    progressing under a soak, then idle past the hang bound, it stays ``healthy``; with the real scheduler and
    detokenizer SIGSTOPped in the middle of a second soak (one user request held open, as a livelock leaves
    it), the soak says ``hang`` within the bound + 5 s, Docker's own status turns ``unhealthy`` with
    ``unhealthy: hang: ...`` within 75 s of the freeze, and fail-fast stops the container (exit 3)."""
    root = hang_stack.root
    stack = loader.load_stack(root / "profiles.cpu.yaml")
    port = stack.settings.port
    began = time.monotonic()
    up = bwstack(root, "-f", "profiles.cpu.yaml", "up", HEALTHY, "--soak", "20", timeout=900)
    up_s = time.monotonic() - began
    out = up.stdout + up.stderr
    assert up.returncode == 0, out[-4000:]
    assert f"{HEALTHY}: healthy" in out and "soak verdict: ok" in out, out[-3000:]
    # the start's phases, read live from the real server's log (docker logs --timestamps; issue 34 item 4)
    assert re.search(
        r"^  start: launch \d+ s, weights \d+ s, kv_cache \d+ s, .*first_decode \d+ s$", out, re.M
    ), out
    assert f"no token for {HANG_BOUND} s = hang" in out, out[-3000:]  # the soak took the derived bound
    figures = re.search(
        r"soak figures: (\d+) requests, (\d+) tokens, ITL p50 \d+ / p99 \d+ ms, (\d+) stalls", out
    )
    assert figures is not None, out[-3000:]
    requests, tokens, stalls = (int(n) for n in figures.groups())
    assert requests > 0 and tokens > 0 and stalls == 0, figures.group(0)
    cid = dockerstack.docker(
        "ps", "-q", "--filter", f"label=com.docker.compose.project={stack.settings.project}"
    ).stdout.split()
    assert len(cid) == 1, cid
    container = TrackedContainer(cid[0])
    # Docker keeps the last five probes: with probes every 10 s the first ones may be from the start-up
    probes = container.health_log()
    busy_log = probes[next(i for i, line in enumerate(probes) if line.startswith("healthy")) :]
    assert container.health() == "healthy" and all(line.startswith("healthy") for line in busy_log), probes

    time.sleep(HANG_BOUND + 2 * HC_INTERVAL)  # idle past the hang bound
    idle_log = container.health_log()
    assert container.health() == "healthy" and all(line.startswith("healthy") for line in idle_log), idle_log
    logs = container.logs()
    assert f"hang watchdog on: requests in flight with no token for {HANG_BOUND} s = hang" in logs, logs[
        -3000:
    ]
    # the wrapper's readiness probe was a full pass: sampled decode, passage, long context past the 2048 window
    ready = re.search(r"readiness probe: (.*)", logs)
    assert ready is not None and ready.group(1).startswith("healthy: "), logs[-3000:]
    long_tokens = re.search(r"long context \((\d+) tokens\) score", ready.group(1))
    assert long_tokens is not None and int(long_tokens.group(1)) > 2048, ready.group(1)

    settings = soak.for_profile(stack, HEALTHY)
    assert settings.stall_after_s == HANG_BOUND
    client = soak.argv(settings, port=port, seconds=120, api_key_file=None)
    running = subprocess.Popen(
        bench.exec_argv(container.id, client), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    hold(f"http://127.0.0.1:{port}")  # a user's request that stays in flight after the soak closed its own
    time.sleep(4)
    pids = sglang_pids(container.id, "sglang::scheduler") + sglang_pids(container.id, "sglang::detokenizer")
    assert len(pids) == 2, pids
    hang_stack.frozen.extend(pids)
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    frozen = time.monotonic()
    stdout, stderr = running.communicate(timeout=180)
    seen = time.monotonic() - frozen
    stuck = soak.parse(stdout)
    assert stuck is not None, stderr
    assert stuck["verdict"] == "hang" and "requests in flight, no token for" in stuck["reason"], stuck
    assert seen <= HANG_BOUND + 5, (seen, stuck)

    assert dockerstack.wait_until(lambda: container.health() == "unhealthy", timeout=150, interval=0.5)
    unhealthy = time.monotonic() - frozen
    assert container.verdict() == "hang", container.health_log()
    line = next(line for line in reversed(container.health_log()) if line.startswith("unhealthy: hang: "))
    assert "requests in flight, no token for" in line, line
    assert unhealthy <= HANG_WITHIN, (unhealthy, container.health_log())
    assert dockerstack.wait_until(lambda: container.state()["Status"] == "exited", timeout=150, interval=0.5)
    stopped = time.monotonic() - frozen
    state = container.state()
    logs = container.logs()
    assert state["ExitCode"] == 3, logs[-3000:]  # the serve wrapper's fail-fast
    assert "fail-fast: the hang watchdog reported 'unhealthy: hang:" in logs, logs[-3000:]
    last = container.health_log()[-1]
    down = compose(root, "--profile", "*", "down", "-v", "--remove-orphans")
    assert down.returncode == 0, down.stderr
    assert dockerstack.leftovers(stack.settings.project) == {}
    soaked = [line for line in out.splitlines() if line.startswith("bwstack: soak")]
    # docs/operating.md shows these lines of this run (by shape: a soak's counts and latencies vary)
    docsblock.check("docs/operating.md", "tests/sweep/test_cpu_stack.py",
                    f"bwstack up {HEALTHY} --soak 20 -f profiles.cpu.yaml", "\n".join(soaked),
                    extra=docsblock.LOAD_FIGURES)  # fmt: skip
    print("\n" + "\n".join(soaked) + f"\nup --soak 20 took {up_s:.0f} s")
    print(f"soak hang after {seen:.1f} s, health unhealthy after {unhealthy:.1f} s, container exited "
          f"(code {state['ExitCode']}) after {stopped:.1f} s (hang bound {HANG_BOUND} s, probes every "
          f"{HC_INTERVAL} s, shipped defaults); last probe: {last}")  # fmt: skip
