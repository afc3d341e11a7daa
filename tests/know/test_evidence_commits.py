"""The shipped evidence cites bwstack commits that exist in this repository's history.

Every bundle records the bwstack commit that made it (``manifest.json`` ``bwstack.commit``, copied into
``evidence/merged.json``); each must be a commit ``git cat-file -e`` finds here. A shallow clone may lack an
old commit: the test then fails saying so (``git fetch --unshallow``), never passes on a guess.
"""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from support.stack import ROOT

EVIDENCE = ROOT / "evidence"


def _cited() -> dict[str, str]:
    """bundle id -> cited commit, from every bundle manifest and merged.json (which must agree)."""
    out: dict[str, str] = {}
    for manifest in sorted(EVIDENCE.glob("bundles/*/manifest.json")):
        out[manifest.parent.name] = json.loads(manifest.read_text(encoding="utf-8"))["bwstack"]["commit"]
    merged = json.loads((EVIDENCE / "merged.json").read_text(encoding="utf-8"))
    for bundle, entry in merged["bundles"].items():
        assert out.get(bundle, entry["bwstack"]["commit"]) == entry["bwstack"]["commit"], bundle
        out.setdefault(bundle, entry["bwstack"]["commit"])
    return out


def _git(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)


def _exists(commit: str) -> bool:
    return _git("cat-file", "-e", f"{commit}^{{commit}}").returncode == 0


CITED = _cited()


def test_there_is_shipped_evidence() -> None:
    assert CITED


@pytest.mark.parametrize("bundle", sorted(CITED))
def test_each_cited_commit_is_in_the_history(bundle: str) -> None:
    commit = CITED[bundle]
    assert re.fullmatch(r"[0-9a-f]{40}", commit), f"bundle {bundle} cites {commit!r}, not a full commit id"
    if _exists(commit):
        return
    shallow = _git("rev-parse", "--is-shallow-repository").stdout.strip() == "true"
    hint = " (this clone is shallow: run 'git fetch --unshallow' and test again)" if shallow else ""
    pytest.fail(f"evidence/bundles/{bundle} cites bwstack commit {commit}, which this repository lacks{hint}")
