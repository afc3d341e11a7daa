"""Issue 37, item 4: an output never clobbers an input. ``report bundle -o`` may not name the report's own
files or the profiles file; ``report merge --out`` may not be an input bundle (a file where a folder is
wanted) nor hold one where it writes; each refusal is one line, exit 2, nothing changed. And ``sweep
--soak`` shares ``up``'s bound: NaN, infinity and more than a day are refused before results.json."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from bwstack import record
from bwstack.sweep import bundleread
from support.bundles import SHIPPED, base_parts
from support.stack import ROOT, run_cli


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture()
def report_stack(stack_copy: Path) -> Path:
    """A scratch copy of the stack with one report folder (the shipped bundle's results.json) in it."""
    report = stack_copy.parent / "report"
    report.mkdir()
    (report / "results.json").write_bytes(base_parts()[bundleread.RESULTS])
    return stack_copy.parent


@pytest.mark.parametrize("target", ["report/results.json", "profiles.cpu.yaml", "report"])
def test_bundle_output_may_not_name_what_it_reads(report_stack: Path, target: str) -> None:
    before = {p: _digest(p) for p in report_stack.rglob("*") if p.is_file()}
    done = run_cli(report_stack, "-f", "profiles.cpu.yaml", "report", "bundle", "report", "-o", target)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert len(done.stderr.strip().splitlines()) == 1 and "which this command reads" in done.stderr
    assert {p: _digest(p) for p in report_stack.rglob("*") if p.is_file()} == before


def test_merge_out_may_not_be_an_input_bundle(tmp_path: Path) -> None:
    bundle = tmp_path / "in.tar.gz"
    shutil.copy2(SHIPPED[0], bundle)
    before = _digest(bundle)
    done = run_cli(tmp_path, "report", "merge", "in.tar.gz", "--out", "in.tar.gz")
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "not a folder" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert _digest(bundle) == before


def test_merge_never_writes_over_an_input_inside_out(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    trap = out / record.MERGED_FILE  # an input bundle that happens to carry the name merge writes
    shutil.copy2(SHIPPED[0], trap)
    before = _digest(trap)
    done = run_cli(tmp_path, "report", "merge", str(trap), "--out", "out")
    assert done.returncode == 2 and "which this command reads" in done.stderr, done.stderr
    assert _digest(trap) == before and sorted(p.name for p in out.iterdir()) == [record.MERGED_FILE]


def test_merge_out_below_a_file_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x", encoding="utf-8")
    done = run_cli(tmp_path, "report", "merge", str(SHIPPED[0]), "--out", "file/sub")
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("seconds", ["1e309", "nan", "1e12", "-1", "inf"])
def test_sweep_soak_shares_ups_bound(tmp_path: Path, seconds: str) -> None:
    out = tmp_path / "never-written"
    done = run_cli(
        ROOT, "-f", "profiles.cpu.yaml", "sweep", "--standin", "--soak", seconds, "--out", str(out)
    )
    assert done.returncode == 2, done.stderr
    assert "0 (off) to 86400" in done.stderr
    assert not out.exists()
