"""The quality probe of warmup.py: passage scoring by teacher forcing and the baseline-free decode checks.

The response shapes here are the ones real SGLang 0.5.23 returned on the CPU (a tiny model trained on the
passage, see tests/real/test_real_quality.py): ``input_token_logprobs`` with ``logprob_start_len: 0`` is one
``[logprob, id, null]`` per prompt token, the first ``null``; without it 0.5.23 returns ``[]``; 0.5.9 returns
only the first entry. Real-server behaviour itself is tested in tests/real/.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from test_hc_warmup import assert_unhealthy, run_hc

from healthchecks import common, judging, settings, signatures
from support.hc_fakes import FakeSGLang, generate_body

# real 0.5.23, trained tiny model, first and last entries of the 93-token passage
REAL_GOOD = [
    [None, 369, None],
    [-0.019672872498631477, 485, None],
    [-0.017615415155887604, 270, None],
    [-0.0174971092492342, 270, None],
    [-0.015521440654993057, 16, None],
]
UNIFORM = -math.log(512)  # SGLANG_SANITIZE_NAN_LOGITS on a 512-token vocab


def triples(values: list[float | None]) -> list[list[object]]:
    return [[v, 300 + i, None] for i, v in enumerate(values)]


def test_passage_logprobs_skip_the_first_null_and_score_the_rest() -> None:
    values = judging.passage_logprobs({"input_token_logprobs": REAL_GOOD})
    assert values == [e[0] for e in REAL_GOOD[1:]]


@pytest.mark.parametrize(
    "shape", [[], [[None, 151331, None]], None], ids=["0.5.23-default", "0.5.9", "absent"]
)
def test_no_prompt_logprobs_is_no_verdict(shape: object) -> None:
    values = judging.passage_logprobs({"input_token_logprobs": shape})
    assert values == []
    assert judging.judge_passage(values, ("x", -1.0), 1.0).startswith("passage not scored")


def test_a_later_null_is_nan() -> None:
    with pytest.raises(judging.Unhealthy) as err:
        judging.passage_logprobs({"input_token_logprobs": triples([None, -0.5, None, -0.2])})
    assert err.value.cls == "nan" and "prompt token 2" in err.value.reason


def test_flat_prompt_logprobs_are_garbage_without_a_baseline() -> None:
    with pytest.raises(judging.Unhealthy) as err:
        judging.judge_passage([UNIFORM] * 92, None, 1.0)
    assert err.value.cls == "garbage"
    assert "-6.2383" in err.value.reason and "-ln 512" in err.value.reason


def test_below_baseline_minus_margin_is_garbage_with_the_numbers() -> None:
    baseline = (judging.PASSAGE_ID, -0.02)
    with pytest.raises(judging.Unhealthy) as err:
        judging.judge_passage([-3.0, -2.0, -4.0, -3.0], baseline, 1.0)
    assert err.value.cls == "garbage"
    assert "score -3.000" in err.value.reason and "baseline -0.020 - margin 1 = -1.020" in err.value.reason


def test_within_the_margin_is_fine_and_says_so() -> None:
    summary = judging.judge_passage([-0.5, -0.9, -1.0, -0.1], (judging.PASSAGE_ID, -0.02), 1.0)
    assert "score -0.625" in summary and "baseline -0.020, margin 1" in summary
    assert "no calibrated baseline" in judging.judge_passage([-0.5, -0.9, -1.0, -0.1], None, 1.0)


def test_a_baseline_of_another_passage_is_not_applied() -> None:
    summary = judging.judge_passage([-5.0, -6.0, -4.0, -5.5], ("gettysburg-00000000", -0.02), 1.0)
    assert "recalibrate" in summary


def test_degenerate_decode_flat_and_loop_but_not_a_real_healthy_decode() -> None:
    flat = judging.degenerate_decode(triples([UNIFORM] * 8))
    assert flat is not None and "flat distribution" in flat
    loop = judging.degenerate_decode([[-0.0001, 0, None]] * 8)
    assert loop is not None and "token id 0 sampled 8 times" in loop
    # real 0.5.23, trained tiny model, temperature 0.7: confident, near 0, but moving
    real = [-0.0447, -0.0144, -0.00129, -0.00103, -0.0015, -0.000514, -0.00106, -0.303]
    assert judging.degenerate_decode(triples(real)) is None  # type: ignore[arg-type]
    assert judging.degenerate_decode(triples([-6.0] * 3)) is None  # too few to judge


def test_parse_baseline() -> None:
    assert settings.parse_baseline("gettysburg-1a2b3c4d=-0.25") == ("gettysburg-1a2b3c4d", -0.25)
    assert settings.parse_baseline("") is None
    for bad in ("-0.25", "p=abc", "p=0.5", "p=nan"):
        with pytest.raises(settings.UsageError):
            settings.parse_baseline(bad)


def test_garbage_is_in_the_catalog_and_fatal() -> None:
    assert "garbage" in signatures.CLASSES and "garbage" in signatures.DESCRIPTIONS
    assert "garbage" in signatures.FAIL_FAST_CLASSES


# --- the whole healthcheck against the fake server ------------------------------------------------------------


def _flat_prompt(fake: FakeSGLang, value: float) -> None:
    body = generate_body()
    body["meta_info"]["input_token_logprobs"] = [[None, 1, None], *triples([value] * 20)]
    fake.set_json("POST", "/generate", body)


def test_flat_passage_is_garbage_end_to_end(tmp_path: Path) -> None:
    with FakeSGLang() as fake:
        _flat_prompt(fake, UNIFORM)
        reason = assert_unhealthy(run_hc(tmp_path, fake.url), "garbage")
    assert "flat distribution" in reason


def test_baseline_from_the_environment_is_applied(tmp_path: Path) -> None:
    with FakeSGLang() as fake:
        body = generate_body()
        body["meta_info"]["input_token_logprobs"] = [[None, 1, None], *triples([-2.5, -3.1, -2.2, -2.9])]
        fake.set_json("POST", "/generate", body)
        env = {common.ENV_HC_BASELINE: f"{judging.PASSAGE_ID}=-0.05"}
        reason = assert_unhealthy(run_hc(tmp_path, fake.url, env=env), "garbage")
        assert "baseline -0.050 - margin 1 = -1.050" in reason
        ok = run_hc(tmp_path, fake.url, "--margin", "5", env=env)
    assert ok.code == 0 and "baseline -0.050, margin 5" in ok.last


def test_bad_baseline_is_a_misconfiguration_line(tmp_path: Path) -> None:
    with FakeSGLang() as fake:
        reason = assert_unhealthy(run_hc(tmp_path, fake.url, "--baseline", "oops"), "warmup_failed")
    assert "--baseline wants PASSAGE_ID=SCORE" in reason
