"""The derived hang bound (bwstack.stack.hangbound) on the shipped stacks, and what moves it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from bwstack import launch
from bwstack.stack import hangbound, loader
from healthchecks import judging
from support.stack import ROOT, copy_stack, edit_yaml


def bound(root: Path, name: str, profile: str) -> hangbound.HangBound:
    return launch.launch_spec(loader.load_stack(root / name), profile).hang_bound


def rendered_env(path: Path, service: str) -> dict[str, str]:
    return dict(YAML(typ="safe").load(path.read_text())["services"][service]["environment"])


def test_the_shipped_gpu_profiles_get_50_s_from_one_8192_token_chunk_at_418_tok_s() -> None:
    """GLM-5 on SM120: context 32768 (the profiles' --context-length), SGLang's default chunk on a 96 GB card
    8192, no calibrated speed: 8192 / 418 = 19.6 s; x2 + 10 s = 49.2 s -> 50 s. The committed compose.yaml
    carries it for every GPU service, with the arithmetic in a comment."""
    stack = loader.load_stack(ROOT / "profiles.yaml")
    text = (ROOT / "compose.yaml").read_text()
    for name in stack.profiles:
        found = launch.launch_spec(stack, name).hang_bound
        assert found.seconds == 50, (name, found)
        assert "8192 tokens" in found.why and "418 tok/s (the gpu default) = 19.6 s" in found.why
        assert rendered_env(ROOT / "compose.yaml", name)["BWSTACK_HC_HANG_AFTER"] == "50"
        assert f"# {found.line()}" in text


def test_the_shipped_cpu_profiles_sit_on_the_30_s_floor() -> None:
    stack = loader.load_stack(ROOT / "profiles.cpu.yaml")
    for name in stack.profiles:
        found = launch.launch_spec(stack, name).hang_bound
        assert found.seconds == hangbound.FLOOR_S == 30, (name, found)
        copy = stack.tiny_models[stack.model_path_for(name)].kind == "copy"  # the copy model: 4096 positions
        assert found.context == (4096 if copy else 8192) and "-> the floor 30 s" in found.why
        assert rendered_env(ROOT / "compose.cpu.yaml", name)["BWSTACK_HC_HANG_AFTER"] == "30"


@pytest.mark.parametrize(
    ("extra", "seconds", "words"),
    [
        (["--chunked-prefill-size", "16384"], 89, "16384 tokens"),  # 16384 / 418 x2 + 10 = 88.4
        (["--context-length", "4096"], 30, "4096 tokens"),  # shorter than a chunk: 19.6 -> floor
        (["--chunked-prefill-size", "-1"], 167, "32768 tokens"),  # no chunking: 32768 / 418 x2 + 10 = 166.8
        (["--chunked-prefill-size", "-1", "--context-length", "262144"], 600, "the ceiling 600 s"),
    ],
)
def test_the_profiles_flags_move_the_bound(
    tmp_path: Path, extra: list[str], seconds: int, words: str
) -> None:
    copy_stack(tmp_path)
    edit_yaml(tmp_path / "profiles.yaml", lambda data: data["model"]["extra_args"].extend(extra))
    stack = loader.load_stack(tmp_path / "profiles.yaml")
    found = launch.launch_spec(stack, next(iter(stack.profiles))).hang_bound
    assert found.seconds == seconds, found
    assert words in found.line(), found


def test_a_calibrated_prefill_speed_replaces_the_default(tmp_path: Path) -> None:
    copy_stack(tmp_path)
    stack = loader.load_stack(tmp_path / "profiles.yaml")
    entry = {
        "score": -1.0,
        "margin": 1.0,
        "tokens": 60,
        "profile": "p",
        "sglang": "0.5.23",
        "calibrated": "t",
    }
    models = {"models": {stack.model.path: {
        judging.PASSAGE_ID: entry, "repeat-2304": {**entry, "score": -0.5, "prefill_tok_s": 4000.0}}}}  # fmt: skip
    (tmp_path / "baselines.json").write_text(json.dumps({"schema": "bwstack.baselines/1", **models}))
    found = bound(tmp_path, "profiles.yaml", next(iter(stack.profiles)))
    assert found.prefill_tok_s == 4000.0 and "measured by bwstack calibrate" in found.why
    assert found.seconds == 30  # 8192 / 4000 = 2.0 s; x2 + 10 = 14.1 s -> the floor


def test_the_stack_files_env_wins_and_says_so(tmp_path: Path) -> None:
    copy_stack(tmp_path)
    edit_yaml(
        tmp_path / "profiles.cpu.yaml",
        lambda data: data["profiles"]["cpu-torch-native"].update(env={"BWSTACK_HC_HANG_AFTER": "12"}),
    )
    found = bound(tmp_path, "profiles.cpu.yaml", "cpu-torch-native")
    assert found.seconds == 12 and "set in the stack file's env" in found.why
