"""``bwstack upgrade v0.5.9-cpu 0.5.23 --measure``: both CPU variants' real images serve the CPU profiles'
tiny Llama one after the other, in containers of their own on free loopback ports: the old one's answers to
``compare``'s seeded prompts are recorded and it is removed before the new one is created (read from Docker's
own events, not from bwstack's log); the new one is scored against the recording and the upgrade report prints
the measured divergence. Real Docker, real SGLang, the shipped profiles.cpu.yaml (a scratch copy); the
containers are gone afterwards.

The prediction half of ``upgrade`` runs too (each release's resolution with torch reporting the stack's GPU
arch; tests/ops/test_upgrade_wheels.py checks it); the measurement needs no prediction.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bwstack.ops import upgrade_measure
from bwstack.quality import compare
from support import dockerstack, docsblock
from support.stack import copy_stack

pytestmark = [pytest.mark.docker, pytest.mark.real, pytest.mark.slow]


def test_upgrade_measure_prints_the_measured_divergence_of_0_5_9_and_0_5_23(
    docker_engine: None, tmp_path: Path
) -> None:
    copy_stack(tmp_path)
    since = int(time.time()) - 1
    done = subprocess.run(
        [sys.executable, "-m", "bwstack.cli", "upgrade", "v0.5.9-cpu", "0.5.23", "--measure", "-f",
         "profiles.cpu.yaml"],
        cwd=tmp_path, capture_output=True, text=True, timeout=1500,
    )  # fmt: skip
    until = int(time.time()) + 1
    print(f"\n{done.stdout}\n{done.stderr[-3000:]}")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    assert (
        "## Measured divergence (--measure): cpu-torch-native on v0.5.9-cpu and v0.5.23-cpu, real SGLang on "
        "the CPU"
    ) in out
    assert (
        "compare A = cpu-torch-native@v0.5.9-cpu (SGLang 0.5.9), B = cpu-torch-native@v0.5.23-cpu "
        "(SGLang 0.5.23)"
    ) in out
    figures = re.search(r"KL\(A\|\|B\) mean (\S+), p99 (\S+), max \S+ nats; top-1 agreement (\S+)%", out)
    assert figures, out
    mean, p99, top1 = (float(figures.group(i).rstrip(",")) for i in (1, 2, 3))
    # the same model and the same torch_native attention on both releases: float rounding only
    assert mean < compare.MAX_MEAN_KL / 100 and p99 < compare.MAX_P99_KL / 100 and top1 >= 99.0, out
    assert "\nwithin (thresholds: " in out
    docsblock.check("docs/upgrade.md", "tests/ops/test_upgrade_measure.py",
                    "bwstack upgrade v0.5.9-cpu 0.5.23 --measure -f profiles.cpu.yaml", out, floats=True)  # fmt: skip
    left = dockerstack.docker("ps", "-aq", "--filter", f"label={upgrade_measure.LABEL}").stdout.split()
    assert left == [], left
    volumes = dockerstack.docker(
        "volume", "ls", "-q", "--filter", f"label={upgrade_measure.LABEL}"
    ).stdout.split()
    assert volumes == [], volumes
    # one server at a time, from Docker's own record: the old variant's container destroyed before the new
    # variant's was created
    events = [
        json.loads(line)
        for line in dockerstack.docker(
            "events", "--since", str(since), "--until", str(until), "--filter", "type=container",
            "--filter", f"label={upgrade_measure.LABEL}", "--format", "{{json .}}",
        ).stdout.splitlines()
        if line.strip()
    ]  # fmt: skip
    at = {(e["Actor"]["Attributes"][upgrade_measure.LABEL], e["Action"]): int(e["timeNano"]) for e in events}
    for variant in ("v0.5.9-cpu", "v0.5.23-cpu"):
        assert (variant, "create") in at and (variant, "destroy") in at, sorted(at)
    assert at[("v0.5.9-cpu", "destroy")] < at[("v0.5.23-cpu", "create")], sorted(
        at.items(), key=lambda i: i[1]
    )
    for phase in ("v0.5.9-cpu: serving after", "v0.5.9-cpu: recorded 9 prompts' answers",
                  "v0.5.9-cpu: bwstack-measure-", "v0.5.23-cpu: serving after"):  # fmt: skip
        assert f"measure: {phase}" in done.stderr, done.stderr[-3000:]
