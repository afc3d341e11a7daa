"""The stand-in sweep end to end on real Docker and Compose: every shipped profile, the HTML report in headless
Chromium, SIGKILL + --resume, SIGINT/SIGTERM teardown, and nothing left behind.

One stand-in sweep over all profiles runs once per module (short load time, 1 s healthcheck interval) and serves
as the reference for the other tests. Each test stack gets its own compose project name and a free port, so
parallel runs on one engine do not collide.
"""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from bwstack.record import read
from bwstack.sweep import report
from support.headless import run_chromium
from support.stack import copy_stack

pytestmark = [pytest.mark.docker, pytest.mark.slow]

LOAD_SECONDS = "0.3"
TIMEOUT = "120"
KILL_SUBSET = ["dense-fi-bf16", "dense-triton-auto", "dsa-trtllm-fp8"]


@dataclass(frozen=True)
class StandinStack:
    profiles: Path
    project: str

    @property
    def standin_project(self) -> str:
        return f"{self.project}-standin"


@dataclass(frozen=True)
class Run:
    out: Path
    returncode: int
    output: str


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def bwstack(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bwstack.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def sweep_argv(stack: StandinStack, out: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "bwstack.cli",
        "sweep",
        "-f",
        str(stack.profiles),
        "--standin",
        "--out",
        str(out),
        "--timeout",
        TIMEOUT,
        "--standin-load-seconds",
        LOAD_SECONDS,
        *extra,
    ]


def docker_ids(kind: str, project: str) -> list[str]:
    """Containers (all states), networks or volumes carrying the compose project label."""
    argv = {
        "container": ["docker", "ps", "-a", "-q"],
        "network": ["docker", "network", "ls", "-q"],
        "volume": ["docker", "volume", "ls", "-q"],
    }[kind]
    result = subprocess.run(
        [*argv, "--filter", f"label=com.docker.compose.project={project}"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return result.stdout.split()


def leftovers(project: str) -> dict[str, list[str]]:
    found = {kind: docker_ids(kind, project) for kind in ("container", "network", "volume")}
    return {kind: ids for kind, ids in found.items() if ids}


def _force_clean(project: str) -> None:
    for kind, ids in leftovers(project).items():
        command = {
            "container": ["docker", "rm", "-f"],
            "network": ["docker", "network", "rm"],
            "volume": ["docker", "volume", "rm", "-f"],
        }[kind]
        subprocess.run([*command, *ids], capture_output=True, timeout=120, check=False)


@pytest.fixture(scope="module")
def standin_stack(tmp_path_factory: pytest.TempPathFactory, docker_engine: None) -> Iterator[StandinStack]:
    root = tmp_path_factory.mktemp("standin-stack")
    profiles = copy_stack(root)
    project = f"bwsweep{uuid.uuid4().hex[:8]}"
    text = profiles.read_text(encoding="utf-8")
    text = text.replace("  project: bwstack\n", f"  project: {project}\n")
    text = text.replace("  port: 30000\n", f"  port: {_free_port()}\n")
    profiles.write_text(text, encoding="utf-8")
    rendered = bwstack("render", "-f", str(profiles))  # versions.json and compose.yaml of the copy
    assert rendered.returncode == 0, rendered.stderr
    stack = StandinStack(profiles, project)
    try:
        yield stack
    finally:
        _force_clean(stack.standin_project)
        _force_clean(stack.project)


@pytest.fixture(scope="module")
def full_run(standin_stack: StandinStack, tmp_path_factory: pytest.TempPathFactory) -> Run:
    out = tmp_path_factory.mktemp("full") / "report"
    result = subprocess.run(
        sweep_argv(standin_stack, out), capture_output=True, text=True, timeout=1800, check=False
    )
    return Run(out, result.returncode, result.stdout + result.stderr)


def test_standin_sweep_of_every_shipped_profile_matches(standin_stack: StandinStack, full_run: Run) -> None:
    assert full_run.returncode == 0, full_run.output[-4000:]
    doc = read.load(full_run.out / "results.json")
    names = [line.split(":")[0].strip() for line in _profile_names(standin_stack.profiles)]
    assert doc["plan"] == names and report.all_match(doc)
    for name, row in doc["results"].items():
        assert row["verdict"] == row["expect"], (name, row["reason"])
        assert row["standin"] is True and row["fast"] is False
        evidence = row["evidence"]
        if row["expect"] == "healthy":
            assert evidence["effective"] and evidence["effective"]["tp_size"] == "8", name
            assert row["decided_by"] == "healthcheck"
        else:
            assert evidence["log_match"] or evidence["health"]["last"], name
    assert "all 9 profile(s) match" in full_run.output
    assert "next to try: dense-fi-bf16: nan on sm120" in full_run.output  # after modelcard-fi-auto's nan
    # the rendered GPU services ran with their reservations removed by the stand-in's own override
    assert (full_run.out / "compose.nogpu.yaml").read_text(encoding="utf-8").count("devices: !reset []") == 9
    assert (full_run.out / "matrix.md").read_text(encoding="utf-8").count("| yes |") == 9
    assert leftovers(standin_stack.standin_project) == {}


def _profile_names(profiles: Path) -> list[str]:
    lines = profiles.read_text(encoding="utf-8").split("\nprofiles:\n", 1)[1].splitlines()
    return [line for line in lines if re.match(r"^  [a-z0-9][a-z0-9_.-]*:\s*$", line)]


# --- the HTML report in headless Chromium ---------------------------------------------------------------------


CONSOLE = re.compile(r'CONSOLE[^\]]*\]\s*"(?P<message>.*)", source: (?P<source>\S*)')


def open_in_chromium(binary: str, page: Path, tmp: Path) -> tuple[Path, list[str]]:
    """Load ``page`` headless, take a screenshot; returns it and every console message the page produced."""
    shot = tmp / f"{page.stem}.png"
    result = run_chromium(binary, page, tmp, f"--screenshot={shot}", height=2000)
    return shot, [m.group("message") for m in CONSOLE.finditer(result.stderr)]


@pytest.mark.chromium
def test_html_report_renders_in_chromium_without_console_errors(
    full_run: Run, chromium: str, tmp_path: Path
) -> None:
    shot, messages = open_in_chromium(chromium, full_run.out / "matrix.html", tmp_path)
    assert messages == []
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    # the detector is real: the same check on a page with a failing script reports it
    broken = tmp_path / "broken.html"
    broken.write_text(
        (full_run.out / "matrix.html")
        .read_text(encoding="utf-8")
        .replace('<meta http-equiv="Content-Security-Policy"', '<meta name="x"')
        .replace("</body>", "<script>throw new Error('beacon-42')</script></body>"),
        encoding="utf-8",
    )
    _, messages = open_in_chromium(chromium, broken, tmp_path)
    assert any("beacon-42" in m for m in messages), messages


# --- SIGKILL, then --resume ------------------------------------------------------------------------------------


def _decided(results: Path) -> int:
    try:
        doc = json.loads(results.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return 0
    return len(doc.get("results") or {})


def test_killed_sweep_resumes_to_the_same_results(
    standin_stack: StandinStack, full_run: Run, tmp_path: Path
) -> None:
    out = tmp_path / "report"
    results = out / "results.json"
    process = subprocess.Popen(
        sweep_argv(standin_stack, out, *KILL_SUBSET), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 600
        while _decided(results) < 1 and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)  # polling the report file, not waiting for a guessed duration
        assert _decided(results) >= 1 and process.poll() is None, "first profile not decided while running"
        process.kill()
    finally:
        process.kill()
        process.wait(timeout=60)
    before = json.loads(results.read_text(encoding="utf-8"))
    assert 1 <= len(before["results"]) < len(KILL_SUBSET)
    resumed = subprocess.run(
        sweep_argv(standin_stack, out, "--resume"), capture_output=True, text=True, timeout=1800, check=False
    )
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    after = read.load(results)
    for name, row in before["results"].items():
        assert after["results"][name] == row  # decided before the kill: kept as it was, not rerun
    reference = read.load(full_run.out / "results.json")
    reference["plan"] = list(KILL_SUBSET)
    reference["results"] = {name: reference["results"][name] for name in KILL_SUBSET}
    used = {reference["results"][name]["variant"] for name in KILL_SUBSET}
    reference["variants"] = {name: pins for name, pins in reference["variants"].items() if name in used}
    assert report.decided_content(after) == report.decided_content(reference)
    assert leftovers(standin_stack.standin_project) == {}


# --- Ctrl-C and SIGTERM -------------------------------------------------------------------------------------------


def _loading(project: str) -> bool:
    """The stand-in server of ``project`` is up and simulating its weight load."""
    for cid in docker_ids("container", project):
        logs = subprocess.run(
            ["docker", "logs", cid], capture_output=True, text=True, timeout=60, check=False
        )
        if "Load weight begin" in logs.stdout + logs.stderr:
            return True
    return False


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_signal_removes_the_running_container(
    standin_stack: StandinStack, tmp_path: Path, signum: int
) -> None:
    argv = sweep_argv(standin_stack, tmp_path / "report", "dense-fi-bf16")
    argv[argv.index("--standin-load-seconds") + 1] = "600"  # still loading when the signal comes
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 600
        while not _loading(standin_stack.standin_project) and time.monotonic() < deadline:
            assert process.poll() is None, process.communicate()[0][-3000:]
            time.sleep(0.1)  # polling Docker for the loading server, not waiting for a guessed duration
        process.send_signal(signum)
        output, _ = process.communicate(timeout=300)
    finally:
        process.kill()
    assert process.returncode == 128 + signum, output[-3000:]
    assert f"interrupted by {signal.Signals(signum).name}" in output
    assert leftovers(standin_stack.standin_project) == {}
    assert read.load(tmp_path / "report" / "results.json")["results"] == {}
