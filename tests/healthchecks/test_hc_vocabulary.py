"""The SGLang vocabulary (``healthchecks/vocabulary.py``): its tables against the parser snapshots, the
alias helpers, the arch table's derived views and the DSA defaults' rows (each reachable, each citing wheels
of the releases it holds for)."""

from __future__ import annotations

import itertools
import json
import re

import pytest

from healthchecks import vocabulary
from support.stack import ROOT

OLD, NEW = "v0.5.9-cu130", "v0.5.23-cu130"  # the first and the last release bwstack pins


def choices(variant: str) -> dict[str, tuple[str, ...]]:
    snapshot = json.loads((ROOT / "images" / variant / "sglang-args.json").read_text(encoding="utf-8"))
    return {
        option: tuple(flag["choices"] or ())
        for flag in snapshot["flags"]
        for option in flag["option_strings"]
    }


def test_every_semantic_flag_is_a_flag_of_a_pinned_release() -> None:
    known = set(choices(OLD)) | set(choices(NEW))
    for field, flags in vocabulary.SEMANTIC_FLAGS.items():
        assert set(flags) & known, field
    assert set(vocabulary.DSA_SIDES) < set(vocabulary.BACKEND_FIELDS)


def test_renamed_values_are_what_the_old_and_the_new_parser_accept() -> None:
    """``nsa`` is the only DSA spelling of 0.5.9; 0.5.23 takes ``dsa`` (``nsa`` still as an alias)."""
    for field, renamed in vocabulary.RENAMED_VALUES.items():
        flag = vocabulary.SEMANTIC_FLAGS[field][0]
        for old, new in renamed.items():
            assert old in choices(OLD)[flag] and new not in choices(OLD)[flag]
            assert new in choices(NEW)[flag]
    for field, synonyms in vocabulary.SYNONYM_VALUES.items():
        flag = vocabulary.SEMANTIC_FLAGS[field][0]
        for spelling, value in synonyms.items():
            assert {spelling, value} <= set(choices(OLD)[flag]) & set(choices(NEW)[flag])


def test_alias_helpers() -> None:
    assert vocabulary.canonical_value("attention_backend", "nsa") == "dsa"
    assert vocabulary.canonical_value("kv_cache_dtype", "bf16") == "bfloat16"
    assert vocabulary.canonical_value("kv_cache_dtype", "nsa") == "nsa"  # aliases belong to one field
    assert vocabulary.same_value("attention_backend", "dsa", "nsa")
    assert not vocabulary.same_value("attention_backend", "dsa", "flashinfer")
    assert vocabulary.spellings("attention_backend", "nsa") == ("dsa", "nsa")
    assert vocabulary.spellings("kv_cache_dtype", "bf16") == ("bf16",)  # a synonym is emitted as written
    assert vocabulary.semantic_value(" NSA ") == "dsa" and vocabulary.semantic_value(None) == "none"


def test_arch_views_derive_from_the_one_table() -> None:
    assert vocabulary.PROFILE_ARCHES == ("sm120", "sm121", "sm100", "sm103", "sm90")
    assert set(vocabulary.ARCH_CAPABILITY) == set(vocabulary.DEVICE_NAMES) == set(vocabulary.ARCHS)
    assert len(set(vocabulary.ARCH_CAPABILITY.values())) == len(vocabulary.ARCHS)
    for name, arch in vocabulary.ARCHS.items():
        assert name == f"sm{arch.capability[0]}{arch.capability[1]}"
    assert vocabulary.archs_with_major(vocabulary.BLACKWELL_MAJORS) == ("sm100", "sm103", "sm120", "sm121")


RELEASES = [(0, 5, minor) for minor in range(8, 25)]
MAJORS = sorted(vocabulary.HOPPER_MAJORS | vocabulary.BLACKWELL_MAJORS)
MODELS = ("GlmMoeDsaForCausalLM", "DeepseekV32ForCausalLM")


def test_every_dsa_default_row_is_reachable() -> None:
    """First match wins: no row may hide behind an earlier one."""
    used = {
        id(row)
        for version, kv, major, model in itertools.product(RELEASES, ("fp8_e4m3", "bfloat16"), MAJORS, MODELS)
        if (row := vocabulary.dsa_default(version, kv, major, model)) is not None
    }
    assert used == {id(row) for row in vocabulary.DSA_DEFAULTS}


def test_dsa_defaults_cover_every_pinned_release_and_nothing_older() -> None:
    for version, kv, major in itertools.product(RELEASES, ("fp8_e4m3", "bfloat16"), MAJORS):
        row = vocabulary.dsa_default(version, kv, major, "DeepseekV32ForCausalLM")
        assert (row is None) == (version < (0, 5, 9)), (version, kv, major)


@pytest.mark.parametrize("row", vocabulary.DSA_DEFAULTS, ids=lambda r: f"{r.first}-{r.kv}-{r.prefill}")
def test_each_dsa_default_cites_wheels_of_releases_it_holds_for(row: vocabulary.DsaDefault) -> None:
    assert row.evidence
    for evidence in row.evidence:
        found = re.fullmatch(r"read in sglang (\d+)\.(\d+)\.(\d+) wheel sglang/\S+\.py:\d+-\d+", evidence)
        assert found, evidence
        assert row.holds_for(tuple(int(part) for part in found.groups())), evidence


def test_dsa_defaults_settled_from_the_wheels() -> None:
    """0.5.11-0.5.14 on Blackwell with an FP8 KV cache: trtllm on both sides (0.5.12 wheel
    server_args.py _set_default_nsa_backends L1721-1726), SM120 included; GLM on SM12x moves to
    flashinfer_sparse_mla from 0.5.17 only."""
    for minor in (11, 12, 13, 14, 15, 16):
        row = vocabulary.dsa_default((0, 5, minor), "fp8_e4m3", 12, "GlmMoeDsaForCausalLM")
        assert row is not None and (row.prefill, row.decode) == ("trtllm", "trtllm"), minor
    glm = vocabulary.dsa_default((0, 5, 17), "fp8_e4m3", 12, "GlmMoeDsaForCausalLM")
    assert glm is not None and glm.prefill == "flashinfer_sparse_mla" and glm.glm_sm12_log
