"""``bwstack report diff`` and the matrix grid, on real sweep reports made without Docker.

The reports come from :mod:`support.standin_sweep`: the real CPU stand-in, the real deep healthcheck, the sweep's
own Judge, rows and report writer. OLD is the shipped expectation; NEW imposes other stand-in faults, as an
image upgrade that broke one profile, fixed another and changed a third's failure would.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

import pytest

from bwstack.record import read
from bwstack.sweep import report, reportdiff
from support.headless import run_chromium
from support.stack import copy_stack
from support.standin_sweep import sweep_without_docker

pytestmark = pytest.mark.slow

PROFILES = ["dense-fi-bf16", "modelcard-fi-auto", "dense-triton-auto", "dsa-trtllm-fp8"]
#: what the "new image" does differently: breaks a healthy profile, fixes a known-bad one, changes a failure
NEW_FAULTS = {"dense-fi-bf16": "nan", "dsa-trtllm-fp8": "none", "dense-triton-auto": "oom"}


@dataclass(frozen=True)
class Reports:
    old: Path
    new: Path
    fixed: Path  # only an improvement: dsa-trtllm-fp8 healthy, dense-fi-bf16 still healthy


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> Reports:
    root = tmp_path_factory.mktemp("diff")
    (root / "stack").mkdir()
    profiles = copy_stack(root / "stack")
    sweep_without_docker(profiles, root / "old", PROFILES)
    sweep_without_docker(profiles, root / "new", PROFILES, faults=NEW_FAULTS)
    sweep_without_docker(
        profiles,
        root / "fixed",
        ["dense-fi-bf16", "dsa-trtllm-fp8"],
        faults=NEW_FAULTS | {"dense-fi-bf16": "none"},
    )
    return Reports(root / "old", root / "new", root / "fixed")


def bwstack(*args: str, columns: int = 80) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bwstack.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=dict(os.environ, COLUMNS=str(columns)),
    )


def test_the_reports_are_real_sweeps(reports: Reports) -> None:
    old = read.load(reports.old / "results.json")
    new = read.load(reports.new / "results.json")
    assert report.all_match(old)
    assert {n: r["verdict"] for n, r in old["results"].items()} == {
        "dense-fi-bf16": "healthy",
        "modelcard-fi-auto": "nan",
        "dense-triton-auto": "assertion",
        "dsa-trtllm-fp8": "unsupported_arch",
    }
    assert {n: r["verdict"] for n, r in new["results"].items()} == {
        "dense-fi-bf16": "nan",
        "modelcard-fi-auto": "nan",
        "dense-triton-auto": "oom",
        "dsa-trtllm-fp8": "healthy",
    }
    assert new["results"]["dense-fi-bf16"]["decided_by"] == "healthcheck"
    # each failed row names the next profile worth trying; never one seen failing in the same sweep
    assert "next_try" not in old["results"]["dense-fi-bf16"]
    assert old["results"]["modelcard-fi-auto"]["next_try"]["profile"] == "dense-fi-bf16"
    assert new["results"]["modelcard-fi-auto"]["next_try"]["profile"] not in ("dense-fi-bf16", None)
    html = (reports.old / "matrix.html").read_text(encoding="utf-8")
    assert 'next to try: <a href="#profile-dense-fi-bf16">dense-fi-bf16</a>' in html
    markdown = (reports.old / "matrix.md").read_text(encoding="utf-8")
    assert "- next to try: dense-fi-bf16: nan on sm120 points at kv_cache_dtype" in markdown


def test_diff_lists_changes_with_both_reasons_and_exits_1_on_regression(reports: Reports) -> None:
    result = bwstack("report", "diff", str(reports.old / "results.json"), str(reports.new))
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines[:-1]) <= 80
    assert lines[0].split() == ["REGRESSION", "dense-fi-bf16", "healthy", "->", "nan"]
    assert any(
        line.split() == ["improvement", "dsa-trtllm-fp8", "unsupported_arch", "->", "healthy"]
        for line in lines
    )
    assert not any("modelcard-fi-auto" in line for line in lines)  # unchanged
    old_reason = re.search(r"old \[v0\.5\.23-cu130\]: healthy: sampled decode ok", result.stdout)
    new_reason = re.search(r"new \[v0\.5\.23-cu130\]: unhealthy: nan: ", result.stdout)
    assert old_reason and new_reason
    assert lines[-1] == "3 profile(s) changed, 1 regression(s), 1 unchanged"


def test_diff_json_classifies_each_change(reports: Reports) -> None:
    result = bwstack("report", "diff", str(reports.old), str(reports.new), "--json")
    assert result.returncode == 1
    data = json.loads(result.stdout)
    kinds = {c["profile"]: (c["kind"], c["old"]["verdict"], c["new"]["verdict"]) for c in data["changes"]}
    assert kinds == {
        "dense-fi-bf16": ("regression", "healthy", "nan"),
        "dense-triton-auto": (
            "improvement",
            "assertion",
            "oom",
        ),  # crashed at first decode -> refused to start
        "dsa-trtllm-fp8": ("improvement", "unsupported_arch", "healthy"),
    }
    assert data["regressions"] == 1 and data["old"]["variants"] == {"v0.5.23-cu130": "0.5.23"}


def test_the_other_direction_is_a_regression_too(reports: Reports) -> None:
    data = reportdiff.diff(reportdiff.load(reports.new), reportdiff.load(reports.old))
    kinds = {c["profile"]: c["kind"] for c in data["changes"]}
    assert kinds == {
        "dense-fi-bf16": "improvement",
        "dense-triton-auto": "regression",
        "dsa-trtllm-fp8": "regression",
    }


def test_only_improvements_exit_0(reports: Reports) -> None:
    result = bwstack("report", "diff", str(reports.old), str(reports.fixed))
    assert result.returncode == 0, result.stdout
    rows = [line.split() for line in result.stdout.splitlines() if not line.startswith(" ")]
    assert ["improvement", "dsa-trtllm-fp8", "unsupported_arch", "->", "healthy"] in rows
    # the failing profiles the new sweep did not run are listed, not counted as regressions
    assert ["changed", "modelcard-fi-auto", "nan", "->", "-"] in rows
    assert "    new: not decided" in result.stdout.splitlines()
    assert result.stdout.splitlines()[-1] == "3 profile(s) changed, 0 regression(s), 1 unchanged"


def test_a_healthy_profile_the_new_sweep_did_not_decide_is_a_regression(reports: Reports) -> None:
    data = reportdiff.diff(reportdiff.load(reports.fixed), reportdiff.load(reports.old))
    assert data["regressions"] == 1
    assert [c["kind"] for c in data["changes"] if c["profile"] == "dsa-trtllm-fp8"] == ["regression"]
    without = reportdiff.load(reports.fixed)
    del without["results"]["dense-fi-bf16"]
    data = reportdiff.diff(reportdiff.load(reports.fixed), without)
    assert [(c["profile"], c["kind"]) for c in data["changes"]] == [("dense-fi-bf16", "regression")]


def test_same_report_has_no_change(reports: Reports) -> None:
    result = bwstack("report", "diff", str(reports.new), str(reports.new))
    assert result.returncode == 0
    assert result.stdout.splitlines() == ["0 profile(s) changed, 0 regression(s), 4 unchanged"]


@pytest.mark.parametrize(
    ("old", "new", "kind"),
    [
        ("healthy", "unsupported_arch", "regression"),
        ("unsupported_arch", "nan", "regression"),
        ("assertion", "crash", "changed"),  # same tier
        ("nan", "crash", "improvement"),
        ("healthy", "healthy", None),
        ("no_such_class", "nan", "regression"),  # an unknown class counts as a crash
    ],
)
def test_change_kinds(old: str, new: str, kind: str | None) -> None:
    assert reportdiff.change_kind(old, new) == kind


def test_unreadable_input_is_exit_2(tmp_path: Path, reports: Reports) -> None:
    (tmp_path / "results.json").write_text("{not json", encoding="utf-8")
    result = bwstack("report", "diff", str(tmp_path), str(reports.new))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.startswith("bwstack: ") and len(result.stderr.strip().splitlines()) == 1
    missing = bwstack("report", "diff", str(tmp_path / "nope"), str(reports.new))
    assert missing.returncode == 2
    assert (
        missing.stderr
        == f"bwstack: {tmp_path / 'nope'}: no sweep results here (expected a results.json or its folder)\n"
    )


# --- the grid ----------------------------------------------------------------------------------------------


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.hrefs: list[str] = []
        self.cells: list[str] = []
        self._in_grid = 0
        self._in_cell = False
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(str(a["id"]))
        if a.get("href"):
            self.hrefs.append(str(a["href"]))
        if tag == "table" and a.get("class") == "grid":
            self._in_grid += 1
        if tag == "td" and self._in_grid and "cell" in str(a.get("class")):
            self._in_cell, self._text = True, []

    def handle_endtag(self, tag: str) -> None:
        if tag == "table" and self._in_grid:
            self._in_grid -= 1
        if tag == "td" and self._in_cell:
            self.cells.append(" ".join("".join(self._text).split()))
            self._in_cell = False

    def handle_data(self, data: str) -> None:
        if self._in_cell:
            self._text.append(f" {data} ")


def test_grid_of_a_real_report(reports: Reports) -> None:
    doc = read.load(reports.new / "results.json")
    (grid,) = report.grids(doc)
    assert grid["variant"] == "v0.5.23-cu130" and grid["column"] == "kv_cache_dtype"
    assert grid["columns"] == ["bf16", "auto", "fp8_e4m3"]
    where = {
        e["profile"]: (dict(row["label"]), value, e["verdict"], e["tone"])
        for row in grid["rows"]
        for value, entries in zip(grid["columns"], row["cells"], strict=True)
        for e in entries
    }
    assert set(where) == set(PROFILES)
    fi_bf16 = {"attention_backend": "flashinfer", "fp4_gemm_backend": "flashinfer_cutlass"}
    assert where["dense-fi-bf16"] == (fi_bf16, "bf16", "nan", "bad")
    assert where["modelcard-fi-auto"] == ({"attention_backend": "flashinfer"}, "auto", "nan", "bad")
    assert where["dense-triton-auto"] == ({"attention_backend": "triton"}, "auto", "oom", "bad")
    dsa = {"attention_backend": "dsa", "dsa_prefill_backend": "trtllm", "dsa_decode_backend": "trtllm"}
    assert where["dsa-trtllm-fp8"] == (dsa, "fp8_e4m3", "healthy", "ok")
    assert grid["common"] == [("moe_runner_backend", "flashinfer_cutlass")]
    html = (reports.new / "matrix.html").read_text(encoding="utf-8")
    page = _Links()
    page.feed(html)
    assert all(h.startswith("#") and h[1:] in page.ids for h in page.hrefs), page.hrefs
    assert {h[1:] for h in page.hrefs} == {f"profile-{n}" for n in PROFILES}
    assert "nan dense-fi-bf16 expected healthy" in page.cells
    assert "healthy dsa-trtllm-fp8 expected unsupported_arch" in page.cells
    assert page.cells.count("\N{EN DASH}") == len(grid["rows"]) * len(grid["columns"]) - 4
    markdown = (reports.new / "matrix.md").read_text(encoding="utf-8")
    assert "| backends \\ kv_cache_dtype | bf16 | auto | fp8_e4m3 |" in markdown
    assert "**nan** [dense-fi-bf16](#evidence-dense-fi-bf16) (expected healthy)" in markdown
    assert '<a id="evidence-dense-fi-bf16"></a>' in markdown


# --- in headless Chromium ------------------------------------------------------------------------------------

CONSOLE = re.compile(r'CONSOLE[^\]]*\]\s*"(?P<message>.*)", source: (?P<source>\S*)')
#: injected into a copy of the page (the report itself has no script): every verdict badge must lie inside its cell
OVERLAP_PROBE = """<script>
const bad = [];
for (const badge of document.querySelectorAll('.verdict')) {
  const cell = badge.closest('td');
  const b = badge.getBoundingClientRect(), c = cell.getBoundingClientRect();
  if (b.left < c.left - 0.5 || b.right > c.right + 0.5) bad.push(badge.textContent + '@' + cell.cellIndex);
}
document.body.setAttribute('data-overlaps', String(bad.length));
document.body.setAttribute('data-badges', String(document.querySelectorAll('.verdict').length));
</script>"""


def _chromium(
    binary: str, page: Path, tmp: Path, *mode: str, width: int = 1400
) -> subprocess.CompletedProcess[str]:
    return run_chromium(binary, page, tmp, *mode, width=width)


@pytest.mark.chromium
def test_grid_screenshot_in_chromium_without_console_errors(
    reports: Reports, chromium: str, tmp_path: Path
) -> None:
    shot = tmp_path / "grid.png"
    result = _chromium(chromium, reports.new / "matrix.html", tmp_path, f"--screenshot={shot}")
    assert [m.group("message") for m in CONSOLE.finditer(result.stderr)] == []
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000


@pytest.mark.chromium
@pytest.mark.parametrize("width", [1400, 800])
def test_no_verdict_badge_overflows_its_cell(
    reports: Reports, chromium: str, tmp_path: Path, width: int
) -> None:
    page = tmp_path / "probe.html"
    page.write_text(
        (reports.new / "matrix.html")
        .read_text(encoding="utf-8")
        .replace('<meta http-equiv="Content-Security-Policy"', '<meta name="x"')
        .replace("</body>", OVERLAP_PROBE + "</body>"),
        encoding="utf-8",
    )
    dom = _chromium(chromium, page, tmp_path, "--dump-dom", width=width).stdout
    badges = re.search(r'data-badges="(\d+)"', dom)
    overlaps = re.search(r'data-overlaps="(\d+)"', dom)
    assert badges and overlaps, dom[-2000:]
    assert int(badges.group(1)) >= 8  # grid cells + table rows
    assert overlaps.group(1) == "0"
