"""The held-out rounds: their logs and labels are pinned, their recorded scores are the catalog's.

Round 3 (issue 36, ``heldout/README.md``): 45 public logs labelled and committed before the classifier saw
them. Their bytes and labels are pinned by sha256 here, wherever the files now live (the held-out folder, or
the corpus once the round is over), so no label or excerpt can be edited after its score was recorded. The
score before the round's rule changes is ``heldout/SCORE-before.json``; docs/healthcheck.md keeps the table.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from support import logscore
from support.stack import ROOT

HERE = Path(__file__).resolve().parent
HELDOUT = HERE / "heldout"
CORPUS = HERE / "corpus"

#: sha256 over the round's files, one ``name sha256`` line each, sorted by name
ROUND3_FILES = "afdebed98a1575c39bb9f6291dbe7a5dd3c6085cddbe8674a99dd126c2c3bc06"
#: sha256 of the round's labels: json.dumps({name: {"class", "source"}}, sort_keys=True)
ROUND3_LABELS = "9679bb5a90ee28f46e1679352481df3b555801f509aeddd3c0712238b1c04742"
ROUND3_SIZE = 45


def _round3() -> tuple[Path, dict[str, dict[str, str]]]:
    """Where the round's files live now, and their label entries (from that folder's EXPECTED.json)."""
    for folder in (HELDOUT, CORPUS):
        entries = logscore.labels(folder) if (folder / "EXPECTED.json").exists() else {}
        held = {n: e for n, e in entries.items() if folder is HELDOUT or e.get("added") == "issue 36"}
        if held:
            return folder, held
    raise AssertionError("the round-3 held-out logs are neither in heldout/ nor in corpus/")


def _files_digest(folder: Path, names: list[str]) -> str:
    lines = "".join(f"{name} {digest}\n" for name, digest in logscore.digests(folder, names).items())
    return hashlib.sha256(lines.encode()).hexdigest()


def test_round3_logs_and_labels_are_the_ones_scored() -> None:
    folder, entries = _round3()
    assert len(entries) == ROUND3_SIZE
    labels = {n: {"class": e["class"], "source": e["source"]} for n, e in entries.items()}
    assert hashlib.sha256(json.dumps(labels, sort_keys=True).encode()).hexdigest() == ROUND3_LABELS
    assert _files_digest(folder, sorted(entries)) == ROUND3_FILES, logscore.digests(folder, sorted(entries))


def test_round3_sources_are_new_to_the_corpus() -> None:
    _folder, entries = _round3()
    corpus = logscore.labels(CORPUS)
    older = {e["source"].split()[0] for n, e in corpus.items() if n not in entries}
    assert not {e["source"].split()[0] for e in entries.values()} & older


def test_round3_recorded_score_before_is_in_the_scores_table() -> None:
    before = json.loads((HELDOUT / "SCORE-before.json").read_text(encoding="utf-8"))
    assert before["total"] == ROUND3_SIZE
    doc = (ROOT / "docs/healthcheck.md").read_text(encoding="utf-8")
    row = next(line for line in doc.splitlines() if line.startswith("| 3 (issue 36)"))
    assert f"{before['right']}/{before['total']}" in row
