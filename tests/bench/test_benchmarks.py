"""benchmarks/: every benchmark runs (its ``--smoke`` mode, in CI), one that cannot run here is reported as
skipped with its reason (exit 3 and one line), and --write-docs writes only its own block of the page."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import _docs
import pytest
import run
from run import Outcome, benchmarks

from support.stack import ROOT

BENCHMARKS = ROOT / "benchmarks"

DOCKER_BENCHMARKS = ("detection", "sweep_overhead")


def run_benchmarks(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None
) -> tuple[int, str, dict[str, Any]]:
    out = tmp_path / "outcomes.json"
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / "run.py"), *args, "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=1500, env=env, check=False,
    )  # fmt: skip
    return done.returncode, done.stdout + done.stderr, json.loads(out.read_text()) if out.exists() else {}


def test_a_benchmark_without_docker_says_why_in_one_line_and_is_skipped(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": str(tmp_path)}  # no docker CLI on PATH: the machine a newcomer may have
    only = [arg for name in DOCKER_BENCHMARKS for arg in ("--only", name)]
    status, output, found = run_benchmarks(tmp_path, *only, "--smoke", env=env)
    assert status == 0, output
    assert [r["outcome"] for r in found["runs"]] == ["skipped"] * len(DOCKER_BENCHMARKS), output
    for row in found["runs"]:
        assert row["reason"] == "needs a Docker engine and Compose v2 (`./dev setup`): docker CLI not found"
        assert f"{row['name']:20} skipped" in output
    assert "Traceback" not in output


def test_exit_3_without_the_reason_line_is_a_failure() -> None:
    assert Outcome("x", 3, 1.0, ["skipped: no engine", ""]).word == "skipped"
    assert Outcome("x", 3, 1.0, ["skipped: no engine", "later words"]).word == "FAILED (exit 3)"
    assert Outcome("x", 1, 1.0, ["skipped: no engine"]).word == "FAILED (exit 1)"


def test_write_docs_refuses_a_partial_run(tmp_path: Path) -> None:
    status, output, _ = run_benchmarks(tmp_path, "--smoke", "--write-docs")
    assert status == 2
    assert output.strip() == "run.py: --write-docs records a full run: not with --smoke or --only"


def test_the_generated_block_replaces_only_itself() -> None:
    text = f"# Title\n\nhand-written\n\n{_docs.START}\nold figures\n{_docs.END}\n\n## After\nkept\n"
    new = _docs.replace_block(text, f"{_docs.START}\nnew\n{_docs.END}")
    assert new == f"# Title\n\nhand-written\n\n{_docs.START}\nnew\n{_docs.END}\n\n## After\nkept\n"
    assert _docs.replace_block("# Only text\n", "BLOCK") == "# Only text\n\nBLOCK\n"


@pytest.mark.docker
@pytest.mark.real
@pytest.mark.slow
def test_every_benchmark_runs_in_smoke_mode(
    standin_refs: dict[str, str], real_sglang_python: Path, tmp_path: Path
) -> None:
    """The smoke's own cost (CI's budget for it is 3 minutes): what it shares with other tests (the stand-in
    images, the real SGLang host venv) is built by their session fixtures, in this test's setup."""
    status, output, found = run_benchmarks(tmp_path, "--smoke")
    summary = output[output.rfind("=== summary") :]
    assert status == 0, output[-6000:]
    assert {r["name"]: r["outcome"] for r in found["runs"]} == {p.stem: "ok" for p in benchmarks()}, summary
    print(summary)


def test_the_block_header_names_the_commit_the_run_started_on() -> None:
    started = _docs.stamp()
    header = _docs.parse_header(_docs.replace_block("# Page\n", _docs.block([], 12.4, started)))
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True)
    assert header is not None
    assert head.stdout.startswith(header["commit"]) and header["seconds"] == "12"
    assert header["machine"].startswith(f"{os.cpu_count()} CPU cores, ")


@pytest.mark.slow
def test_smoke_lanes_print_each_output_whole_and_keep_the_order(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    chosen = [p for p in benchmarks() if p.stem in ("classify_speed", "merge_scale", "validate_scale")]
    monkeypatch.setattr(run, "SIDE_LANE", ("merge_scale",))  # a lane of its own beside the two others
    outcomes = run.run_lanes(chosen)
    printed = capsys.readouterr().out
    assert [o.name for o in outcomes] == ["classify_speed", "merge_scale", "validate_scale"]
    for path, outcome in zip(chosen, outcomes, strict=True):
        assert outcome.word == "ok", printed
        assert outcome.lines and "\n".join([run.heading(path), *outcome.lines]) in printed
