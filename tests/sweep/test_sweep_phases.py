"""A start you can watch, on the sweep's side: the judge reads the phase from the real server log as the lines
arrive (live status line), the row records seconds per phase (results.json), the matrix and ``bwstack list
--phases`` show them. The log is the CPU server's real start of SGLang 0.5.9 (healthchecks/startup_corpus)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from bwstack.sweep import bundleread, report
from bwstack.sweep.display import status_text
from bwstack.sweep.judge import HealthChange, Judge, LogLine, Probe
from healthchecks import phases
from support.stack import ROOT, TESTS

LOG = TESTS / "healthchecks" / "startup_corpus" / "cpu-v0.5.9_tiny-llama.log"
STARTING = Probe(1, "unhealthy: starting: connection refused: the server is not listening yet (loading)")


def _log() -> list[str]:
    return LOG.read_bytes().decode("utf-8", "replace").split("\n")


def test_the_status_line_shows_the_phase_while_starting() -> None:
    lines = _log()
    judge = Judge(600.0, now=0.0)
    assert status_text(judge, 0.0) == "container started, waiting for the first healthcheck"
    cut = next(i for i, line in enumerate(lines) if "Loading safetensors checkpoint shards:   0%" in line)
    for second, line in enumerate(lines[: cut + 1]):  # one line a second, as the stream delivers them
        judge.feed(LogLine(line), float(second))
    judge.feed(STARTING, float(cut))
    load_begin = next(i for i, line in enumerate(lines) if "Load weight begin" in line)
    assert status_text(judge, cut + 30.0) == (
        f"starting: loading weights: shard 0/1 for {cut + 30 - load_begin} s (launch {load_begin} s)"
    )
    for second, line in enumerate(lines[cut + 1 :], start=cut + 1):
        judge.feed(LogLine(line), float(second))
    judge.feed(HealthChange("healthy"), float(len(lines)))
    found = judge.phases.progress()
    assert found.phase == phases.READY and set(found.seconds) == {
        "launch",
        "weights",
        "kv_cache",
        "first_decode",
    }
    assert sum(found.seconds.values()) == next(i for i, ln in enumerate(lines) if "ready to roll" in ln)


def _doc_with_start(start: dict[str, object], gpu_arch: str = "cpu", rename: str = "") -> report.Document:
    """The real CPU sweep's report the project ships (evidence/bundles/), its healthy row with ``start``."""
    shipped = sorted((ROOT / "evidence" / "bundles").glob("*.tar.gz"))[0]
    doc: report.Document = json.loads(bundleread.read_bundle(shipped).parts[bundleread.RESULTS])
    doc["stack"]["gpu_arch"] = gpu_arch
    name = next(n for n, row in doc["results"].items() if row["verdict"] == "healthy")
    doc["results"] = {rename or name: {**doc["results"][name], "profile": rename or name, "start": start}}
    doc["plan"] = [rename or name]
    return doc


def test_the_matrix_records_seconds_per_phase() -> None:
    start = phases.read_text(LOG.read_bytes().decode()).record()
    doc = _doc_with_start(start)
    words = "launch 21 s, weights 0 s, kv_cache 0 s, first_decode 27 s; ready after 48 s"
    assert f"- start: {words}" in report.render_markdown(doc)
    assert f"<dt>start</dt><dd>{words}</dd>" in report.render_html(doc)
    assert "start" in report.VOLATILE_ROW_KEYS  # seconds differ from run to run for the same outcome


def test_list_phases_shows_the_newest_real_start(stack_copy: Path) -> None:
    start = phases.read_text(LOG.read_bytes().decode()).record()
    doc = _doc_with_start(start, gpu_arch="sm120", rename="dense-fi-bf16")  # a profile of profiles.yaml
    out = stack_copy.parent / "reports" / "20260401T000000Z"
    out.mkdir(parents=True)
    (out / "results.json").write_text(json.dumps(doc), encoding="utf-8")
    run = [sys.executable, "-m", "bwstack.cli", "list", "-f", str(stack_copy), "--arch", "sm120"]
    shown = subprocess.run([*run, "--phases"], capture_output=True, text=True, timeout=120, check=False)
    assert shown.returncode == 0, shown.stderr
    text = " ".join(shown.stdout.split())
    assert "start, seconds per phase (newest real sweep):" in text
    assert (
        "dense-fi-bf16: launch 21 s, weights 0 s, kv_cache 0 s, first_decode 27 s; ready after 48 s "
        "(reports/20260401T000000Z)"
    ) in text
    plain = subprocess.run(run, capture_output=True, text=True, timeout=120, check=False)
    assert "seconds per phase" not in plain.stdout
    data = json.loads(subprocess.run([*run, "--json"], capture_output=True, text=True, timeout=120).stdout)
    row = {r["profile"]: r for r in data["profiles"]}["dense-fi-bf16"]
    assert row["start"]["seconds"] == {"launch": 21.0, "weights": 0.0, "kv_cache": 0.0, "first_decode": 27.0}
    assert row["start"]["report"] == "20260401T000000Z"
