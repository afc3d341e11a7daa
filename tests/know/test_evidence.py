"""The shipped evidence (``evidence/merged.json``, the project's own CPU bundles) read by ``list``, ``up --dry-run``,
the next-profile hint and ``validate`` (which warns on a contradicted expect and prints the change the evidence
supports, citing the bundles). CPU evidence never speaks for a GPU profile."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from bwstack.know import evidence, next_try
from bwstack.stack import loader
from support.stack import ROOT, TESTS, copy_stack, run_cli

CPU_LABEL = "seen on the CPU by the project's own bundles"


def bwstack(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(cwd, *args)


def scratch(tmp_path: Path, expect: str | None = None) -> Path:
    """A scratch copy of the stack with the shipped evidence; cpu-torch-native's expect changed if asked."""
    copy_stack(tmp_path)
    shutil.copytree(ROOT / "evidence", tmp_path / "evidence")
    if expect is not None:
        path = tmp_path / "profiles.cpu.yaml"
        text = path.read_text(encoding="utf-8")
        head, _, tail = text.partition("  cpu-torch-native:")
        tail = tail.replace("expect: healthy", f"expect: {expect}", 1)
        path.write_text(head + "  cpu-torch-native:" + tail, encoding="utf-8")
    return tmp_path


def test_list_shows_the_recorded_cpu_verdicts_labelled_as_the_projects_own() -> None:
    done = bwstack(ROOT, "-f", "profiles.cpu.yaml", "list")
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())
    assert "recorded evidence" in text
    assert f"cpu-torch-native: expect healthy — {CPU_LABEL}: healthy on" in text
    rows = {
        r["profile"]: r
        for r in json.loads(bwstack(ROOT, "-f", "profiles.cpu.yaml", "list", "--json").stdout)["profiles"]
    }
    assert rows["cpu-torch-native"]["seen"].startswith(CPU_LABEL)
    assert rows["cpu-flashinfer"]["seen"].startswith(
        f"{CPU_LABEL}: import_error on 1 host (CPU, SGLang 0.5.23"
    )


def test_gpu_profiles_get_no_cpu_evidence() -> None:
    done = bwstack(ROOT, "list", "--json")
    assert done.returncode == 0, done.stderr
    assert all(row["seen"] is None for row in json.loads(done.stdout)["profiles"])


def test_up_dry_run_prints_the_evidence_of_the_profile() -> None:
    done = bwstack(ROOT, "-f", "profiles.cpu.yaml", "up", "--dry-run", "cpu-torch-native")
    assert done.returncode == 0, done.stderr
    assert f"evidence: expect healthy — {CPU_LABEL}: healthy on" in " ".join(done.stdout.split())


def test_the_next_profile_hint_says_what_was_seen_of_it() -> None:
    stack = loader.load_stack(ROOT / "profiles.cpu.yaml")
    hint = next_try.suggest(stack, "cpu-nan-default", "nan")
    assert hint.profile == "cpu-torch-native"
    assert f"expect healthy — {CPU_LABEL}: healthy on" in hint.why


def test_validate_is_quiet_when_the_evidence_agrees() -> None:
    done = bwstack(ROOT, "-f", "profiles.cpu.yaml", "validate")
    assert done.returncode == 0, done.stderr
    assert "recorded evidence" not in done.stderr and "evidence/bundles" not in done.stderr


def test_validate_warns_on_a_contradicted_expect_and_prints_the_supported_change(tmp_path: Path) -> None:
    root = scratch(tmp_path, expect="nan")
    done = bwstack(root, "-f", "profiles.cpu.yaml", "validate")
    assert done.returncode == 0, done.stderr  # a warning, never an error
    warning = next(
        line
        for line in done.stderr.splitlines()
        if "profile cpu-torch-native: expect: nan" in line and "(bundles: " in line
    )
    assert CPU_LABEL in warning
    cited = warning.split("(bundles: ")[1].rstrip(")").split(", ")
    assert cited and all((root / path).is_file() for path in cited)
    assert (
        "    cpu-torch-native:\n      expect: healthy   # was nan; evidence: evidence/bundles/" in done.stderr
    )


def test_disagreeing_evidence_warns_without_a_single_change(tmp_path: Path) -> None:
    root = scratch(tmp_path)
    bundles = sorted((root / "evidence" / "bundles").glob("*.tar.gz"))
    timeout = TESTS / "fixtures" / "bundles" / "v0523-timeout.bundle.tar.gz"
    merged = bwstack(root, "report", "merge", *map(str, bundles), str(timeout), "--out", "evidence")
    assert merged.returncode == 0, merged.stderr
    stack = loader.load_stack(root / "profiles.cpu.yaml")
    found = {c.profile: c for c in evidence.contradictions(stack)}
    assert found["cpu-torch-native"].supported is None and found["cpu-torch-native"].change() == []
    assert "the runs disagree" in found["cpu-torch-native"].warning()
