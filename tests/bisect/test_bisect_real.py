"""``bwstack bisect`` on real parts: eight local nightly-style tags over the real CPU images of two SGLang
versions, a planted first changed tag, real SGLang verdicts, a SIGKILL in the middle and a resume.

The tags: ``bwstack/sglang:v0.5.9-cpu`` (real SGLang 0.5.9) and ``bwstack/sglang:v0.5.23-cpu`` (real 0.5.23),
each built by ``bwstack build`` from its hash-locked wheelhouse, retagged as eight dated nightlies of a scratch
repository: the ones before the planted tag are the 0.5.9 image, the planted one and those after the 0.5.23
image. No stand-in: the CPU stand-in only injects the fault it is told to, so it cannot show what a version
really does with the NaN model; every step here is the real server.

The profile: NaN ``lm_head`` weights with ``SGLANG_SANITIZE_NAN_LOGITS=1``. 0.5.9 has no such switch: its
scheduler dies on the sampled decode (``nan``). 0.5.23 replaces the NaN logits and answers with uniform
logprobs (``garbage``). Flags both versions take (``--disable-cuda-graph``), ``TORCHDYNAMO_DISABLE=1`` for 0.5.9
on the CPU (its image sets it, the throwaway variant keeps the profile's variant's env).
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support import dockerstack, docsblock
from support.stack import copy_stack, edit_yaml

pytestmark = [pytest.mark.docker, pytest.mark.real, pytest.mark.slow, pytest.mark.timeout(1500)]

OLD, NEW = "v0.5.9-cpu", "v0.5.23-cpu"
PROFILE = "cpu-nan-sanitize"
DAYS = [f"202611{day:02d}" for day in range(1, 9)]
PLANTED = 5  # tags[5] is the first on the 0.5.23 image
SHAS = [hashlib.sha1(f"bisect-{day}".encode()).hexdigest()[:9] for day in DAYS]
TAGS = [f"nightly-dev-cu13-{day}-{sha}" for day, sha in zip(DAYS, SHAS, strict=True)]


def bwstack(cwd: Path, *args: str, timeout: float = 1500) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bwstack.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "BWSTACK_OFFLINE": "1"},
    )


def edit(data: Any, project: str, port: int) -> None:
    data["stack"]["project"] = project
    data["stack"]["port"] = port
    args = list(data["model"]["extra_args"])
    for flag in ("--cuda-graph-backend-decode", "--cuda-graph-backend-prefill"):
        at = args.index(flag)
        del args[at : at + 2]
    data["model"]["extra_args"] = [*args, "--disable-cuda-graph"]
    data["profiles"][PROFILE] = {
        "description": "NaN lm_head weights, SGLang's NaN sanitizer on (0.5.15+) - bisect test",
        "attention_backend": "torch_native",
        "model_path": "tiny-nan",
        "env": {"SGLANG_SANITIZE_NAN_LOGITS": "1", "TORCHDYNAMO_DISABLE": "1"},
        "expect": "nan",
        "evidence": ["docs/cpu.md; shared reference real-sglang-on-cpu.md (NaN on the real server)"],
    }


@pytest.fixture(scope="module")
def tagged(docker_engine: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A scratch CPU stack with the bisect profile, both real CPU images, eight tags of a scratch repo."""
    root = tmp_path_factory.mktemp("bisect-stack")
    copy_stack(root)
    project = dockerstack.unique_name("bwstack-bisect-test")
    port = dockerstack.free_port()
    edit_yaml(root / "profiles.cpu.yaml", lambda data: edit(data, project, port))
    for variant in (OLD, NEW):
        image = f"bwstack/sglang:{variant}"
        if dockerstack.docker("image", "inspect", image, check=False).returncode != 0:
            built = bwstack(root, "-f", "profiles.cpu.yaml", "build", "--variant", variant, timeout=3600)
            assert built.returncode == 0, built.stderr[-3000:]
    repo = f"{project}/sglang"
    for index, tag in enumerate(TAGS):
        source = f"bwstack/sglang:{OLD if index < PLANTED else NEW}"
        dockerstack.docker("tag", source, f"{repo}:{tag}")
    tags_file = root / "tags.txt"
    listed = [TAGS[i] for i in (3, 0, 7, 5, 1, 6, 2, 4)]  # any order: the dates in the names order them
    tags_file.write_text("# nightlies of the bisect test\n" + "\n".join(listed) + "\n", encoding="utf-8")
    try:
        yield {"root": root, "project": project, "repo": repo, "tags": tags_file}
    finally:
        dockerstack.force_clean(project)
        dockerstack.docker("rmi", *[f"{repo}:{tag}" for tag in TAGS], check=False)


def bisect_args(env: dict[str, Any], out: Path) -> list[str]:
    return [
        "-f", "profiles.cpu.yaml", "bisect", PROFILE, "--good", TAGS[0], "--bad", TAGS[-1],
        "--tags", str(env["tags"]), "--repo", env["repo"], "--good-verdict", "nan",
        "--out", str(out), "--timeout", "300",
    ]  # fmt: skip


def running(project: str) -> list[str]:
    return dockerstack.docker(
        "ps", "--quiet", "--filter", f"label=com.docker.compose.project={project}"
    ).stdout.split()


def start_bisect(tagged: dict[str, Any], out: Path) -> subprocess.Popen[str]:
    """The real command in its own process (to be killed or interrupted), offline, output merged."""
    return subprocess.Popen(
        [sys.executable, "-m", "bwstack.cli", *bisect_args(tagged, out)],
        cwd=tagged["root"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "BWSTACK_OFFLINE": "1"},
    )


def test_bisect_finds_the_planted_tag_and_resumes_after_sigkill(
    tagged: dict[str, Any], tmp_path: Path
) -> None:
    out = tmp_path / "bisect"
    started = time.monotonic()
    proc = start_bisect(tagged, out)
    seen: list[str] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            seen.append(line)
            if line.startswith("step 2 of"):
                break
        assert seen and seen[-1].startswith("step 2 of ≤3: testing "), "".join(seen)[-3000:]
        # kill -9 while step 2's server runs: no handler, no cleanup, a container left behind
        assert dockerstack.wait_until(lambda: bool(running(tagged["project"])), timeout=300), "".join(seen)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    first_line = next(line for line in seen if line.startswith("step 1 of"))
    assert first_line.strip() == f"step 1 of ≤3: testing {TAGS[4]} (6 candidates left)"
    killed = json.loads((out / "bisect.json").read_text(encoding="utf-8"))
    assert [s["tag"] for s in killed["steps"]] == [TAGS[4]]
    assert killed["status"] == "running"  # SIGKILL: nothing was saved after step 1
    assert running(tagged["project"]), "the kill left step 2's server up, as a kill does"

    resumed = bwstack(tagged["root"], *bisect_args(tagged, out), "--resume")
    wall = time.monotonic() - started
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert running(tagged["project"]) == []
    assert dockerstack.leftovers(tagged["project"]) == {}
    assert dockerstack.docker("images", "--quiet", "bwstack/sglang:bisect-*").stdout.split() == []

    state = json.loads((out / "bisect.json").read_text(encoding="utf-8"))
    result = state["result"]
    assert state["status"] == "done"
    assert [s["tag"] for s in state["steps"]] == [TAGS[4], TAGS[6], TAGS[5]]
    assert result["steps"] == 3  # ceil(log2(8)) for eight tags
    assert result["placed"] is True
    assert result["first_changed"]["tag"] == TAGS[PLANTED]
    assert result["last_unchanged"]["tag"] == TAGS[PLANTED - 1]
    old, new = result["last_unchanged"]["step"], result["first_changed"]["step"]
    assert (old["verdict"], old["sglang_version"]) == ("nan", "0.5.9")
    assert (new["verdict"], new["sglang_version"]) == ("garbage", "0.5.23")
    for step in (old, new):
        assert step["evidence"]["log_tail"] or step["evidence"]["health"], step
        assert (out / step["report"]).is_file()
        row = json.loads((out / step["report"]).read_text(encoding="utf-8"))["results"][PROFILE]
        assert row["verdict"] == step["verdict"] and row["source"].startswith("real SGLang")
    assert result["compare"] == (
        f"https://github.com/sgl-project/sglang/compare/{SHAS[PLANTED - 1]}...{SHAS[PLANTED]}"
    )
    text = resumed.stdout
    assert f"first changed tag: {TAGS[PLANTED]}" in text
    assert "step 2 of ≤3: testing" in text and "step 3 of ≤3: testing" in text
    assert result["compare"] in text
    print(resumed.stdout, f"\nbisect: 3 steps, {wall:.0f} s wall (with the killed step 2 run twice)")
    # docs/sweep.md shows the resumed run's output (by shape: scratch paths, ports, ids and times vary)
    command = "bwstack " + " ".join([*bisect_args(tagged, out), "--resume"])
    names = {str(out): "reports/bisect", str(tagged["root"]): ".", tagged["repo"]: "bwstack-bisect/sglang"}
    docsblock.check("docs/sweep.md", "tests/bisect/test_bisect_real.py", command, resumed.stdout, names=names)


def test_ctrl_c_in_a_step_stops_its_server_saves_the_state_and_exits_130(
    tagged: dict[str, Any], tmp_path: Path
) -> None:
    out = tmp_path / "bisect"
    proc = start_bisect(tagged, out)
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first.startswith("bisect: ") or first.startswith("bwstack: warning"), first
        assert dockerstack.wait_until(lambda: bool(running(tagged["project"])), timeout=300)
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, rest[-3000:]
    assert "bisect interrupted; nothing left running, state saved: --resume continues" in rest
    assert running(tagged["project"]) == []
    assert dockerstack.docker("images", "--quiet", "bwstack/sglang:bisect-*").stdout.split() == []
    state = json.loads((out / "bisect.json").read_text(encoding="utf-8"))
    assert state["status"] == "interrupted" and state["steps"] == []


def test_bisect_bad_input_exits_2_with_the_place(tagged: dict[str, Any], tmp_path: Path) -> None:
    args = bisect_args(tagged, tmp_path / "b")
    same = bwstack(tagged["root"], *[TAGS[0] if a == TAGS[-1] else a for a in args])
    assert same.returncode == 2 and "--good and --bad are the same tag" in same.stderr
    unknown = bwstack(
        tagged["root"], *[a.replace(TAGS[-1], "nightly-dev-cu13-20261231-abcdef012") for a in args]
    )
    assert unknown.returncode == 2 and "unknown tag nightly-dev-cu13-20261231-abcdef012" in unknown.stderr
    assert "tags.txt" in unknown.stderr
    broken = tagged["root"] / "broken.txt"
    broken.write_text(f"{TAGS[0]}\nlatest\n", encoding="utf-8")
    parsed = bwstack(tagged["root"], *[str(broken) if a == str(tagged["tags"]) else a for a in args])
    assert parsed.returncode == 2 and f"{broken}:2:" in parsed.stderr and "Traceback" not in parsed.stderr
    missing = bwstack(tagged["root"], *[a.replace(PROFILE, "no-such-profile") for a in args])
    assert missing.returncode == 2 and "unknown profile 'no-such-profile'" in missing.stderr


def test_a_tag_that_is_no_bwstack_image_gets_the_serving_layer_built_on_it(
    tagged: dict[str, Any], python_image: str, tmp_path: Path
) -> None:
    """The path of a published nightly (no serve wrapper inside): the project's Dockerfile is built on the
    tag. The stand-in's Debian root file system stands in for the published image; it has no SGLang, so the
    parser snapshot the dump would write is put in place first (the step then skips the dump)."""
    from bwstack.bisect import search
    from bwstack.bisect.step import StepRunner, image_labels, throwaway_name
    from bwstack.stack import loader

    stack = loader.load_stack(tagged["root"] / "profiles.cpu.yaml")
    runner = StepRunner(
        stack, PROFILE, tagged["repo"], tmp_path, fast=False, good_verdict="nan", console=None, echo=print
    )
    tag = search.parse_tag("nightly-dev-cu13-20261109-0123456789abc")
    image = f"{tagged['repo']}:{tag.name}"
    dockerstack.docker("tag", python_image, image)
    name = throwaway_name(runner.base, image, tag)
    (tmp_path / "variants" / name).mkdir(parents=True)
    snapshot = stack.variant(NEW).cli_snapshot_path.read_text(encoding="utf-8")
    (tmp_path / "variants" / name / "sglang-args.json").write_text(snapshot, encoding="utf-8")
    ref = None
    try:
        variant, parsed = runner.prepare(image, tag)
        ref = runner.serving_image(runner.with_variant(variant, parsed), variant, image_labels(image))
        labels = image_labels(ref)
        assert labels["io.bwstack.stage"] == "serve" and labels["io.bwstack.variant"] == name
        assert labels["io.bwstack.sglang-commit"] == tag.sha
        assert labels["org.opencontainers.image.base.name"] == image
        shown = dockerstack.docker(
            "run", "--rm", "--network", "none", "--entrypoint", "python3", ref, "-c",
            "import json; print(json.load(open('/opt/bwstack/versions.json'))['base']['image'])",
        )  # fmt: skip
        assert shown.stdout.strip() == image
        assert not (tmp_path / "context").exists()  # the staged build context is gone
    finally:
        dockerstack.docker("rmi", *([ref] if ref else []), image, check=False)
