"""The static fallback against SGLang's own resolution (opt-in ``-m wheels``: runs the pinned SGLang on the CPU).

For a few shipped profiles that exercise the fallback's facts (auto KV on Blackwell, the DSA defaults a dense
profile still resolves, 0.5.9's FlashMLA defaults, an error SGLang raises itself), ``bwstack explain`` is run
once; the prediction must then come from that cached resolution (so :func:`bwstack.know.rules.profile_inputs` builds
the same inputs as ``explain``), agree with the static fallback on every value the fallback claims to know, and
give the same verdict. The venvs are the ones the explain and snapshot tests build under ``$BWSTACK_CACHE``.
"""

from __future__ import annotations

import pytest

from bwstack.know import explain, rules
from bwstack.stack import loader
from support.stack import ROOT

pytestmark = [pytest.mark.wheels, pytest.mark.slow]


@pytest.mark.parametrize(
    "name",
    ["dense-triton-auto", "dsa-trtllm-fp8", "legacy-nsa-default-fp8"],
)
def test_static_fallback_agrees_with_sglangs_own_resolution(name: str) -> None:
    stack = loader.load_stack(ROOT / "profiles.yaml")
    explain.explain(stack, name, arch="sm120", variant=None)  # computes and caches SGLang's own answer
    own = rules.predict(stack, name, "sm120")
    static = rules.predict(stack, name, "sm120", explain_mode="off")
    assert own.config_source == "explain", own.notes
    assert static.config_source == "static"
    for field, value in static.effective.items():
        if value is not None:
            assert own.effective[field] == value, field
    assert own.verdict == static.verdict == stack.profile(name).expect
