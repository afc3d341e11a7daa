"""``bwstack report merge`` on real bundles: the shipped CPU bundles (real sweeps of v0.5.23-cpu and v0.5.9-cpu),
the same real report bundled on another host (a recorded doctor host: distinct host facts), and a real sweep
that timed out (``tests/fixtures/bundles/``): agreeing cells count hosts, disagreeing cells say what differs,
every cell links to evidence that exists, stand-in rows never merge and CPU rows stay apart from GPU rows."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from bwstack import record
from bwstack.sweep import bundleread, reportmerge
from support.bundles import GPU_HOST
from support.stack import ROOT, TESTS, run_cli

SHIPPED = sorted((ROOT / "evidence" / "bundles").glob("*.tar.gz"))
TIMEOUT_BUNDLE = TESTS / "fixtures" / "bundles" / "v0523-timeout.bundle.tar.gz"
RTX_HOST = TESTS / "fixtures" / "doctor" / "rtx-pro-6000-8x"


def bwstack(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_cli(cwd, *args, env=env)


def shipped(variant: str) -> Path:
    for path in SHIPPED:
        if variant in bundleread.read_bundle(path).results["variants"]:
            return path
    raise AssertionError(f"no shipped bundle of {variant}")


def rebundle(source: Path, tmp: Path, host: Path, name: str, *extra: str) -> Path:
    """The report inside ``source`` (results.json, compose files as run) bundled again on a recorded host."""
    bundle = bundleread.read_bundle(source)
    folder = tmp / name
    folder.mkdir()
    (folder / "results.json").write_bytes(bundle.parts["results.json"])
    for part, data in bundle.parts.items():
        if part.startswith("run/"):
            (folder / part.removeprefix("run/")).write_bytes(data)
    out = tmp / f"{name}.tar.gz"
    done = bwstack(
        tmp,
        "-f",
        str(ROOT / "profiles.cpu.yaml"),
        "report",
        "bundle",
        str(folder),
        "-o",
        str(out),
        *extra,
        env={"BWSTACK_DOCTOR_FIXTURE": str(host)},
    )
    assert done.returncode == 0, done.stderr
    return out


def merged_cells(out: Path) -> dict[tuple[str, str], dict[str, object]]:
    doc = json.loads((out / record.MERGED_FILE).read_text())
    return {(c["variant"], c["profile"]): c for c in doc["cells"]}


def links_resolve(out: Path) -> list[str]:
    """Every evidence link of matrix.html, checked to point at an existing page holding the anchor."""
    html = (out / "matrix.html").read_text()
    links = re.findall(r'href="(bundles/[0-9a-f]{16}/matrix\.html#profile-[^"]+)"', html)
    for link in links:
        page, anchor = link.split("#")
        assert f'id="{anchor}"' in (out / page).read_text(), link
    return links


def test_agreeing_hosts_count_in_one_cell_with_links_to_each_evidence(tmp_path: Path) -> None:
    real = shipped("v0.5.23-cpu")
    other = rebundle(real, tmp_path, RTX_HOST, "other-host")
    done = bwstack(tmp_path, "report", "merge", str(real), str(other), "--out", "out")
    assert done.returncode == 0, done.stderr
    cell = merged_cells(tmp_path / "out")[("v0.5.23-cpu", "cpu-torch-native")]
    assert cell["verdicts"] == {"healthy": 2} and cell["agree"] is True
    assert len(cell["hosts"]) == 2 and cell["differs"] == []  # type: ignore[arg-type]
    links = links_resolve(tmp_path / "out")
    assert len([link for link in links if link.endswith("#profile-cpu-torch-native")]) == 2
    assert "healthy x2 on 2 hosts" in (tmp_path / "out" / "matrix.md").read_text()


def test_disagreeing_hosts_are_marked_with_what_differs(tmp_path: Path) -> None:
    real = shipped("v0.5.23-cpu")
    late = rebundle(TIMEOUT_BUNDLE, tmp_path, RTX_HOST, "timeout-host")
    done = bwstack(tmp_path, "report", "merge", str(real), str(late), "--out", "out")
    assert done.returncode == 0, done.stderr
    cell = merged_cells(tmp_path / "out")[("v0.5.23-cpu", "cpu-torch-native")]
    assert cell["agree"] is False and cell["verdicts"] == {"healthy": 1, "timeout": 1}
    fields = {d["field"]: d["by_verdict"] for d in cell["differs"]}  # type: ignore[attr-defined]
    assert {"driver", "gpu_count", "topology", "gpu_model"} <= set(fields)
    assert fields["gpu_count"] == {"healthy": ["0"], "timeout": ["8"]}
    # (image_digest may differ too: a report made before rows recorded evidence.image_id is bundled with the
    # image its tag names now, which another build may have replaced)
    html = (tmp_path / "out" / "matrix.html").read_text()
    assert 'data-agree="no"' in html and "differs: driver" in html
    links_resolve(tmp_path / "out")


def test_both_cpu_variants_merge_into_their_own_cells(tmp_path: Path) -> None:
    done = bwstack(tmp_path, "report", "merge", *map(str, SHIPPED), "--out", "out")
    assert done.returncode == 0, done.stderr
    cells = merged_cells(tmp_path / "out")
    assert {("v0.5.23-cpu", "cpu-torch-native"), ("v0.5.9-cpu", "cpu-torch-native")} <= set(cells)
    assert all(c["section"] == "cpu" and c["arch"] == "cpu" for c in cells.values())
    assert len(links_resolve(tmp_path / "out")) == len(cells)


def _variant(
    bundle: bundleread.Bundle, tag: str, host: dict[str, object] | None = None, **changes: object
) -> bundleread.Bundle:
    doc = bundle.json(bundleread.RESULTS)
    for key, value in changes.items():
        section, field = key.split("__")
        doc[section][field] = value
    if changes.get("mode__standin"):
        for row in doc["results"].values():
            row["standin"] = True
    facts = {**bundle.json(bundleread.HOST), **(host or {})}
    parts = {
        **bundle.parts,
        "results.json": json.dumps(doc).encode(),
        "host.json": json.dumps(facts).encode(),
    }
    return bundleread.Bundle(bundle.path, bundle.id + tag, bundle.data, bundle.manifest, parts)


def test_standin_rows_never_merge_and_cpu_rows_stay_apart_from_gpu_rows() -> None:
    real = bundleread.read_bundle(shipped("v0.5.23-cpu"))
    standin = _variant(real, "s", mode__standin=True)
    gpu = _variant(real, "g", GPU_HOST, stack__gpu_arch="sm120")
    doc = reportmerge.merge([real, standin, gpu])
    assert doc["standin_rows_left_out"] == len(real.results["results"])
    sections = {(c["section"], c["arch"]) for c in doc["cells"]}
    assert sections == {("cpu", "cpu"), ("gpu", "sm120")}
    html = reportmerge.render_html(doc)
    assert html.index(reportmerge.SECTIONS["gpu"]) < html.index(reportmerge.SECTIONS["cpu"])


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_shipped_bundles_verify(path: Path) -> None:
    done = bwstack(ROOT, "report", "verify", str(path))
    assert done.returncode == 0, done.stderr
    assert "real SGLang on the CPU" in done.stdout


def test_redact_host_drops_the_recorded_host_name_everywhere(tmp_path: Path) -> None:
    import gzip

    plain = bundleread.read_bundle(rebundle(shipped("v0.5.23-cpu"), tmp_path, RTX_HOST, "named"))
    assert plain.host["hostname"] == "g4-rtxpro-01"  # without --redact-host the host keeps its name
    path = rebundle(shipped("v0.5.23-cpu"), tmp_path, RTX_HOST, "redacted", "--redact-host")
    bundle = bundleread.read_bundle(path)
    assert bundle.manifest["host_redacted"] is True
    assert bundle.host["hostname"] is None and bundle.host["kernel_cmdline"] is None
    assert bundle.host["host_id"] == plain.host["host_id"]  # still one host in a merge
    assert b"g4-rtxpro-01" not in gzip.decompress(path.read_bytes())
