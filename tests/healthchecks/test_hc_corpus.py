"""The failure catalog against real-world logs: >= 97% of the corpus named right, no dead server read as healthy.

The corpus (``corpus/*.log``, sources and expected classes in ``corpus/EXPECTED.json``) is real SGLang output
pasted in public issues; its classes were decided before the classifier was run on it (see corpus/README.md).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bwstack.classify import classify_log_file
from healthchecks import signatures
from support import logscore
from support.stack import ROOT

CORPUS = Path(__file__).resolve().parent / "corpus"
EXPECTED: dict[str, dict[str, str]] = json.loads((CORPUS / "EXPECTED.json").read_text(encoding="utf-8"))
MIN_ACCURACY = 0.97


def _classified() -> dict[str, str]:
    """Each file's class, by the one scorer of labelled folders (support/logscore.py)."""
    return {name: got for name, (_expected, got) in logscore.score(CORPUS).results.items()}


def test_corpus_is_complete_and_sourced() -> None:
    files = {p.name for p in CORPUS.glob("*.log")}
    assert files == set(EXPECTED)
    assert len(files) >= 80
    for name, entry in EXPECTED.items():
        assert entry["class"] in signatures.CLASSES, name
        assert entry["source"].strip(), name


def test_corpus_accuracy_and_no_dead_server_reads_healthy() -> None:
    got = _classified()
    wrong = {
        name: (EXPECTED[name]["class"], cls) for name, cls in got.items() if cls != EXPECTED[name]["class"]
    }
    accuracy = 1 - len(wrong) / len(got)
    assert accuracy >= MIN_ACCURACY, f"{accuracy:.1%} right; wrong (expected, got): {wrong}"
    dead_as_healthy = [n for n, cls in got.items() if cls == "healthy" and EXPECTED[n]["class"] != "healthy"]
    assert dead_as_healthy == []


@pytest.mark.parametrize("name", sorted(n for n, e in EXPECTED.items() if e["class"] != "healthy"))
def test_no_failure_or_unfinished_start_is_healthy(name: str) -> None:
    assert classify_log_file(CORPUS / name)["class"] != "healthy"


def test_the_corpus_covers_what_operators_meet() -> None:
    covered = {e["class"] for e in EXPECTED.values()}
    assert covered >= {
        "kernel_compile",
        "peer_access",
        "import_error",
        "gpu_fault",
        "unsupported_arch",
        "no_kernel_image",
        "illegal_memory",
        "device_assert",
        "assertion",
        "model_load",
        "nccl",
        "timeout",
        "oom",
        "warmup_failed",
        "crash",
        "starting",
        "healthy",
    }


# --- one catalog: every list of classes is derived from healthchecks/signatures/__init__.py -------------------------------

TABLE_START = "<!-- class-table: rendered from healthchecks/signatures/__init__.py"
TABLE_END = "<!-- /class-table -->"


@pytest.mark.parametrize("doc", ["docs/healthcheck.md"])
def test_docs_class_table_is_the_catalogs(doc: str) -> None:
    text = (ROOT / doc).read_text(encoding="utf-8")
    start = text.index(TABLE_START)
    body = text[text.index("\n", start) + 1 : text.index(TABLE_END, start)]
    assert body == signatures.class_table()
    for info in signatures.CLASS_INFO:
        assert f"| `{info.name}` |" in body and info.fix.strip() and info.meaning.strip()


def test_every_class_list_is_derived_from_the_catalog() -> None:
    from bwstack.know import rules
    from bwstack.stack import schema

    # a profile may expect any class but "starting" (a state, not a verdict)
    assert "starting" not in schema.EXPECT_CLASSES
    assert {"healthy", "nan", "crash", "backend_override"} <= set(schema.EXPECT_CLASSES)
    # the rules schema (a JSON file) lists the catalog's failure classes
    enum = rules.rules_schema()["$defs"]["failure_class"]["enum"]
    assert set(enum) == set(signatures.CLASSES) - {"starting", "healthy"}
    # no other source file spells out the catalog's classes as a list of its own
    lists = 0
    for path in [*ROOT.joinpath("src").rglob("*.py"), *ROOT.joinpath("healthchecks").glob("*.py")]:
        if path.parent == ROOT / "healthchecks" and path.name.startswith("signatures"):
            continue  # the catalog itself: signatures.py and its parts, signatures_*.py
        text = path.read_text(encoding="utf-8")
        lists += all(f'"{c}"' in text for c in ("kernel_compile", "illegal_memory", "oom"))
    assert lists == 0
