"""Drift check for the stand-in contract: re-record real SGLang now and compare with the committed recordings.

``tests/standin/test_contract.py`` holds the stand-in to ``tests/standin/data/real/<version>/<case>.json``.
Here the same probes go to real SGLang of every pinned CPU variant (host venv of its wheelhouse.lock), and the
live answers must have the committed structure and facts. A difference means the recordings are stale (a pin
moved, or SGLang behaves differently than when they were recorded): re-record with
``python tests/standin/record_real.py`` and let the contract test show what the stand-in must learn.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bwstack.stack import pins
from support import contract
from support.realsglang import CPU_VARIANTS, ROOT

pytestmark = [pytest.mark.real, pytest.mark.slow]


@pytest.mark.parametrize("case", list(contract.PROBES))
@pytest.mark.parametrize("variant", CPU_VARIANTS)
def test_real_sglang_still_answers_like_its_recording(variant: str, case: str, tmp_path: Path) -> None:
    version = pins.load_variant(ROOT / "images", variant).sglang_version
    committed = contract.load(version, case)
    live = contract.record_real(variant, case, tmp_path)
    assert live["sglang_version"] == committed["sglang_version"] == version
    problems = contract.compare(committed, live, label="live")
    assert problems == [], (
        f"real SGLang {version} ({variant}, {case}) no longer answers like its recording; re-record with "
        "'python tests/standin/record_real.py':\n" + "\n".join(problems)
    )
