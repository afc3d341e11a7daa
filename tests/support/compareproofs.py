"""The copying model against its sliding-window twin, judged (imported as ``support.compareproofs``): the
assertions on ``bwstack compare --json``'s report that real SGLang in the CPU image must meet
(tests/real/test_image_compare.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bwstack.quality import compare, retrieval
from bwstack.tiny import tinycopy, tinymodel, tinytrain

#: the planted drift: noise of this fraction of each weight tensor's std
DRIFT = 0.01


def assert_twin_diverges_past_its_window(code: int, report: dict[str, Any]) -> None:
    """Every prompt copying from within the twin's window agrees exactly; every one further back diverges,
    from a position past the window; those are the worst prompts; exit 1 past all three gates."""
    assert code == 1 and report["passed"] is False
    assert len(report["failures"]) == 3, report["failures"]
    near = [p for p in report["prompts"] if p["distance"] <= tinycopy.BROKEN_WINDOW]
    far = [p for p in report["prompts"] if p["distance"] > tinycopy.BROKEN_WINDOW]
    assert near and far
    for p in near:  # same weights, same engine: the twin's window changes nothing within it
        assert p["max_kl"] < 1e-3 and p["top1_agreement"] == 1.0, p
        assert p["first_position_over_p99_threshold"] is None, p
    for p in far:
        assert p["mean_kl"] > 1.0 and p["top1_agreement"] < 0.5, p
        assert p["first_position_over_p99_threshold"] > tinycopy.BROKEN_WINDOW, p
        assert p["score_a"] > -1.0 > -5.0 > p["score_b"], p  # the good model copies; the twin cannot
    assert set(report["worst"][: len(far)]) == {p["id"] for p in far}


def assert_twin_retrieval(report: dict[str, Any]) -> None:
    """The good model finds every needle at every length; the twin exactly those within its window."""
    rows = report["retrieval"]
    context = min(c for c in (report["a"]["context"], report["b"]["context"]) if c)
    assert [r["length"] for r in rows["a"]] == retrieval.lengths_for(None, context)
    assert all(r["right"] == r["asked"] for r in rows["a"]), rows["a"]
    for row in rows["b"]:  # every needle within the window is found, none further back
        within = sum(1 for n in retrieval.needles(row["length"]) if n.distance <= tinycopy.BROKEN_WINDOW)
        assert row["right"] == within, (row, within)
    assert rows["b"][0]["accuracy"] == 1.0 > rows["b"][-1]["accuracy"]


def drift(good: Path, target: Path) -> Path:
    """The copying model's weights with Gaussian noise of :data:`DRIFT` x each tensor's std added (the tiny
    models' ``noise`` fault, at a small scale): planted numerics drift of a known size."""
    from safetensors.numpy import load_file

    spec = tinymodel.TinySpec(**{**tinycopy.SPEC.__dict__, "fault": "noise", "noise_scale": DRIFT})
    weights = load_file(str(good / "model.safetensors"))
    return tinymodel.write(target, spec, weights=weights, corpus=tinytrain.corpus())


def assert_drift_caught(code: int, report: dict[str, Any], health: tuple[int, str]) -> None:
    """The drifted model is past the KL gate (mean and p99) while its healthcheck, judged against the good
    model's calibrated baselines, stays healthy."""
    status, line = health
    assert status == 0 and line.startswith("healthy"), (
        line
    )  # the passage and the long probe: within the margin
    assert line.count("(baseline ") == 2, line  # judged against the good model's calibrated baselines
    assert code == 1 and not report["passed"], report
    assert report["mean_kl"] > compare.MAX_MEAN_KL and report["p99_kl"] > compare.MAX_P99_KL, report
