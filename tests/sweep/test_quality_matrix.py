"""The matrix's quality table (``sweep --compare-to`` / ``--retrieval``): matrix.md's section and matrix.html's
table as a real browser parses it (Debian's headless Chromium, ``--dump-dom``).

The rows carry the figures the real CPU run measured (docs/compare.md: the copying model 8/8 at each length,
its window twin 8/8 4/8 2/8 and, against the copying model, mean KL 5.217, p99 12.79, top-1 39.55 %);
the sweep writes them this way (:mod:`bwstack.sweep.quality`; the step itself runs against real SGLang in
tests/real/test_image_compare.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bwstack.quality.retrieval import Accuracy
from bwstack.sweep import quality, report
from support.headless import run_chromium, table_cells

REFERENCE = "cpu-long-copy"
TWIN = "cpu-long-window"
LENGTHS = (1024, 2048, 4088)


def _row(name: str, measured: dict[str, Any]) -> dict[str, Any]:
    return {"profile": name, "variant": "v0.5.23-cpu", "model": "copy", "expect": "healthy",
            "verdict": "healthy", "match": True, "fast": False, "standin": False,
            "source": "real SGLang on the CPU", "fault": None, "decided_by": "healthcheck", "reason": "healthy",
            "started_at": "2026-12-04T22:00:00Z", "finished_at": "2026-12-04T22:00:30Z", "elapsed_s": 30.0,
            "evidence": EVIDENCE, "quality": measured}  # fmt: skip


#: a healthy row's evidence as the runner keeps it (:meth:`bwstack.sweep.runner.Runner.evidence`)
EVIDENCE = {"readiness": None, "log_match": None, "log_tail": [], "exit_code": None, "oom_killed": False,
            "health": {"status": "healthy", "probes": 1, "last": []}, "requested": {}, "effective": None, "startup": None, "server_version": "0.5.23",
            "timeout_s": 300.0, "image_id": None}  # fmt: skip


def document() -> report.Document:
    doc = report.new_document(
        stack={
            "file": "profiles.cpu.yaml",
            "project": "bwstack-cpu",
            "model": "copy",
            "revision": None,
            "served_name": "tiny",
            "gpu_arch": "cpu",
            "tp_size": 1,
        },
        mode={
            "kind": "real",
            "standin": False,
            "fast": False,
            "variant": None,
            "compare_to": REFERENCE,
            "retrieval": True,
        },
        variants={},
        plan=[REFERENCE, TWIN, "cpu-torch-native"],
        generated_by="bwstack test",
    )
    found = dict(zip(LENGTHS, (8, 8, 8), strict=True)), dict(zip(LENGTHS, (8, 4, 2), strict=True))
    ref, twin = ([quality.retrieval_rows([Accuracy(n, r, 8) for n, r in f.items()])][0] for f in found)
    versus = {"to": REFERENCE, "positions": 3740, "mean_kl": 5.217, "p99_kl": 12.79, "max_kl": 14.47,
              "top1_agreement": 0.3955, "passed": False, "worst": ["copy-2304-0", "copy-2304-1"],
              "failures": ["mean KL 5.217 > 0.01", "p99 KL 12.79 > 0.1", "top-1 agreement 39.55% < 98%"]}  # fmt: skip
    report.record(doc, _row(REFERENCE, {"window": None, "retrieval": ref, "answers": "quality/a.json",
                                         "reference": True}))  # fmt: skip
    report.record(doc, _row(TWIN, {"window": None, "retrieval": twin, "answers": "quality/b.json",
                                    "compare": versus}))  # fmt: skip
    return doc


def test_matrix_md_has_the_quality_table() -> None:
    text = report.render_markdown(document())
    section = text.split("## Quality: retrieval by length, compared with cpu-long-copy", 1)[1]
    lines = [line for line in section.splitlines() if line.startswith("|")][:4]
    assert lines[0] == (
        "| profile | retrieval @1024 | retrieval @2048 | retrieval @4088 | mean KL | p99 KL | top-1 | verdict |"
    )
    assert lines[2] == "| [cpu-long-copy](#evidence-cpu-long-copy) | 8/8 | 8/8 | 8/8 | reference |  |  |  |"
    assert lines[3] == (
        "| [cpu-long-window](#evidence-cpu-long-window) | 8/8 | 4/8 | 2/8 | 5.217 | 12.79 | 39.55% | DIVERGES |"
    )


@pytest.mark.chromium
def test_the_quality_table_as_chromium_parses_it(chromium: str, tmp_path: Path) -> None:
    page = tmp_path / "matrix.html"
    page.write_text(report.render_html(document()), encoding="utf-8")
    dom = run_chromium(chromium, page, tmp_path, "--dump-dom").stdout
    assert table_cells(dom, "quality") == [
        ["profile", "retrieval @1024", "retrieval @2048", "retrieval @4088", "mean KL", "p99 KL", "top-1",
         "verdict"],
        ["cpu-long-copy", "8/8", "8/8", "8/8", "reference", "", "", ""],
        ["cpu-long-window", "8/8", "4/8", "2/8", "5.217", "12.79", "39.55%", "DIVERGES"],
    ], dom[-3000:]  # fmt: skip
    assert "--compare-to cpu-long-copy</span>" in dom
