"""docs/benchmarks.md's figures are one full run's, recorded by ``benchmarks/run.py --write-docs``: a header
naming the date, a commit of this branch's history and the machine, then every benchmark's outcome and output."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import _docs
import pytest
from run import benchmarks

from support.stack import ROOT


def test_docs_figures_come_from_one_full_run_of_a_commit_in_the_history() -> None:
    text = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    header = _docs.parse_header(text)
    assert header is not None, f"docs/benchmarks.md has no generated run header ({_docs.START})"
    shallow = subprocess.run(
        ["git", "rev-parse", "--is-shallow-repository"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    if shallow == "true":
        pytest.skip("a shallow clone holds only part of the history")
    known = subprocess.run(
        ["git", "merge-base", "--is-ancestor", header["commit"], "HEAD"],
        cwd=ROOT,
        capture_output=True,
        check=False,
    )
    assert known.returncode == 0, f"the run's commit {header['commit']} is not in this branch's history"
    block = _docs.generated(text) or ""
    ran = _docs.benchmarks_at(header["commit"])
    assert {p.stem for p in benchmarks()} <= ran, "a benchmark is missing from the recorded run"
    for name in ran:
        assert f"### `{name}` output" in block, f"no output of {name} in the generated block"
        assert f"| `{name}` | ok |" in block, f"{name} did not run ok in the recorded run"
    assert str(ROOT) not in block and str(Path.home()) not in block  # no path of the machine that ran it
    assert tempfile.gettempdir().rstrip("/") + "/" not in block
