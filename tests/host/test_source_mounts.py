"""The helper containers mount bwstack's own two packages, also from a process where ``tests/`` is on
``sys.path`` ahead of them (benchmarks/ puts it there): ``tests/healthchecks`` then makes the name
``healthchecks`` a namespace with no ``__file__``, and a mount read off it named the working folder instead
(``benchmarks/run.py``'s bench_overhead failed in the image with 'No module named healthchecks')."""

from __future__ import annotations

import json
import subprocess
import sys

from support.stack import ROOT

PROBE = """
import json, sys
sys.path.insert(0, {tests!r})
import healthchecks
from bwstack.host import cachevolume
print(json.dumps([healthchecks.__file__, cachevolume.source_mounts()]))
"""


def test_the_mounts_name_the_real_packages_when_tests_shadows_the_name() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(tests=str(ROOT / "tests"))],
        cwd=ROOT / "benchmarks",
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    shadowed, mounts = json.loads(done.stdout)
    assert shadowed is None  # the trap is there: the name is the tests folder's namespace
    sources = [mounts[i + 1].split(":")[0] for i in range(0, len(mounts), 2)]
    assert sources == [str(ROOT / "src" / "bwstack"), str(ROOT / "healthchecks")]
    assert [mounts[i + 1].split(":")[1] for i in range(0, len(mounts), 2)] == [
        "/opt/bwstack-host/bwstack",
        "/opt/bwstack-host/healthchecks",
    ]
