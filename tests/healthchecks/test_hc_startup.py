"""The startup parse (healthchecks/startup.py) on real server logs, each with an expected parse written by hand.

Corpus: ``startup_corpus/*.log`` with ``*.expected.json`` next to it; sources in ``startup_corpus/SOURCES.md``.
The CPU-server logs come with the same server's ``/server_info`` answer (``*.server_info.json``): the parse
of the log must agree with what the server itself reported as resolved.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from healthchecks import startup, vocabulary
from support.stack import ROOT

CORPUS = Path(__file__).resolve().parent / "startup_corpus"
LOGS = sorted(p for p in CORPUS.glob("*.log") if p.with_suffix(".expected.json").exists())


def _reduced(parsed: startup.Startup) -> dict[str, Any]:
    data = parsed.to_dict()
    server_args = data["server_args"]
    return {
        "version": data["version"],
        "version_line": data["version_line"],
        "server_args": (
            {k: server_args[k] for k in ("line", "format", "truncated")} if server_args is not None else None
        ),
        "argv_line": data["argv_line"],
        "effective": {k: [v["value"], v["line"], v["origin"]] for k, v in data["effective"].items()},
        "auto_set": data["auto_set"],
        "notes": [[n["kind"], n["line"]] for n in data["notes"]],
        "overrides_from_argv": [
            [e["kind"], e["field"], e["effective"], e["line"]] for e in startup.compare(parsed)
        ],
    }


def test_the_corpus_has_three_versions() -> None:
    assert len(LOGS) >= 4
    sources = (CORPUS / "SOURCES.md").read_text()
    for log in LOGS:
        assert f"`{log.name}`" in sources, f"{log.name} has no source reference in SOURCES.md"


@pytest.mark.parametrize("log", LOGS, ids=[p.stem for p in LOGS])
def test_parse_matches_the_hand_written_expectation(log: Path) -> None:
    expected = json.loads(log.with_suffix(".expected.json").read_text())
    got = _reduced(startup.read_file(str(log)))
    for key, value in expected.items():
        if key.startswith("_"):
            continue
        assert got[key] == value, f"{log.name}: {key}"


@pytest.mark.parametrize(
    "log", [p for p in LOGS if p.with_suffix(".server_info.json").exists()], ids=lambda p: p.stem
)
def test_parse_agrees_with_the_servers_own_server_info(log: Path) -> None:
    info = json.loads(log.with_suffix(".server_info.json").read_text())
    effective = startup.read_file(str(log)).effective()
    for field in vocabulary.REPORT_FIELDS:
        names = vocabulary.KEY_ALIASES.get(field, (field,))
        reported = next((info[n] for n in names if info.get(n) is not None), None)
        if reported is None:
            assert field not in effective, field
            continue
        assert effective[field].value == vocabulary.semantic_value(reported), field


def test_the_seed_case_triton_requested_dsa_backends_set_by_sglang() -> None:
    parsed = startup.read_file(str(CORPUS / "rocm-v0.5.9_glm5-fp8_triton.log"))
    evidence = startup.compare(parsed, {"attention_backend": "triton", "kv_cache_dtype": "fp8_e4m3"})
    assert [(e["kind"], e["field"], e["effective"], e["line"]) for e in evidence] == [
        ("dsa_auto", "dsa_prefill_backend", "flashmla_auto", 98),
        ("dsa_auto", "dsa_decode_backend", "flashmla_kv", 98),
    ]
    assert all(e["class"] == "backend_override" for e in evidence)
    assert (
        "attention_backend=triton was requested, yet SGLang set dsa_decode_backend=flashmla_kv"
        in (evidence[1]["message"])
    )
    assert "Set NSA backends for fp8_e4m3 KV Cache" in evidence[1]["text"]


def test_expect_mismatch_names_the_warning_line() -> None:
    parsed = startup.read_file(str(CORPUS / "sglang-29562_glm52-nvfp4_sm120.log"))
    evidence = startup.compare(parsed, {"kv_cache_dtype": "bf16", "attention_backend": "nsa", "tp_size": "8"})
    assert [(e["field"], e["requested"], e["effective"], e["line"]) for e in evidence] == [
        ("kv_cache_dtype", "bfloat16", "fp8_e4m3", 5)
    ]
    assert evidence[0]["origin"] == "sglang"


def test_auto_in_a_request_asks_for_nothing() -> None:
    parsed = startup.read_file(str(CORPUS / "sglang-29562_glm52-nvfp4_sm120.log"))
    assert startup.compare(parsed, {"kv_cache_dtype": "auto", "moe_runner_backend": None}) == []


# --- formats the corpus does not cover: wrapped records, prefixes, colours, dict repr -----------------------


def _wrap(text: str, width: int) -> list[str]:
    return [text[i : i + width] for i in range(0, len(text), width)]


def test_a_terminal_wrapped_record_with_compose_prefixes_and_colours() -> None:
    record = (
        "server_args=ServerArgs(model_path='m', kv_cache_dtype='bf16', tp_size=2, attention_backend='nsa', "
        "nsa_prefill_backend='flashmla_sparse', nsa_decode_backend='fa3', json_model_override_args='{\"a\": "
        "[1, 2]}', cuda_graph_bs=[1, 2, 4], fp4_gemm_runner_backend='flashinfer_cutlass', "
        "moe_runner_backend='auto', note='a, b) c', other=<Enum.X: 1>)"
    )
    lines = [
        "glm-1  | \x1b[32mbwstack-serve: starting python3 -m sglang.launch_server --model-path m --tp 2\x1b[0m",
        "glm-1  | [2026-02-26 05:43:36] WARNING server_args.py:1172: Set NSA backends for bfloat16 KV Cache: "
        "prefill=flashmla_sparse, decode=fa3.",
        *_wrap("glm-1  | [2026-02-26 05:43:36] " + record, 37),
        "glm-1  | [2026-02-26 05:43:37 TP0] Load weight begin.",
    ]
    parsed = startup.StartupReader().feed_all(lines)
    effective = {k: (v.value, v.line) for k, v in parsed.effective().items()}
    assert effective == {
        "attention_backend": ("dsa", 3),
        "dsa_prefill_backend": ("flashmla_sparse", 3),
        "dsa_decode_backend": ("fa3", 3),
        "kv_cache_dtype": ("bfloat16", 3),
        "moe_runner_backend": ("auto", 3),
        "fp4_gemm_backend": ("flashinfer_cutlass", 3),
        "tp_size": ("2", 3),
    }
    assert parsed.server_args is not None and parsed.server_args["truncated"] is False
    assert parsed.origin("tp_size") == "flag"
    assert parsed.origin("dsa_decode_backend") == "sglang"
    assert parsed.to_dict()["effective"]["attention_backend"]["logged"] == "nsa"


def test_dict_format_with_nested_values() -> None:
    line = (
        "[2026-10-31 08:00:03] server_args={'model_path': 'x', 'attention_backend': 'dsa', "
        "'cuda_graph_config': {'decode': {'backend': 'full', 'bs': [1, 2]}}, 'dsa_prefill_backend': "
        "'flashinfer_sparse_mla', 'dsa_decode_backend': 'flashinfer_sparse_mla', 'kv_cache_dtype': 'fp8_e4m3', "
        "'tp_size': 8, 'api_key': '[REDACTED]'}"
    )
    parsed = startup.read_text(line + "\n")
    assert parsed.server_args is not None and parsed.server_args["format"] == "dict"
    assert parsed.effective()["dsa_decode_backend"].value == "flashinfer_sparse_mla"
    assert parsed.version_hint() == "dsa_* fields, logged as dict: SGLang 0.5.15 or later"


def test_glm_sm12x_line_implies_fp8_kv_and_deprecated_alias_marks_a_flag() -> None:
    text = (
        "[2026-10-31 08:00:01] '--nsa-prefill-backend' is deprecated and will be removed in a future release. "
        "Use '--dsa-prefill-backend' instead.\n"
        "[2026-10-31 08:00:02] Set DSA backends for GLM FP8 KV Cache on SM120/SM121: "
        "prefill=flashinfer_sparse_mla, decode=flashinfer_sparse_mla.\n"
    )
    parsed = startup.read_text(text)
    assert parsed.effective()["kv_cache_dtype"].value == "fp8_e4m3"
    assert parsed.origin("dsa_prefill_backend") == "flag"
    assert parsed.origin("dsa_decode_backend") == "unknown"
    assert parsed.notes[1].get("glm_sm12x") is True


def test_a_log_without_a_startup_says_nothing() -> None:
    parsed = startup.read_text('[2026-01-01 00:00:00] INFO: 127.0.0.1 - "GET /health HTTP/1.1" 200 OK\n')
    assert not parsed.found
    assert parsed.to_dict()["effective"] == {}
    assert startup.compare(parsed, {"attention_backend": "triton"}) == []


@pytest.mark.parametrize(
    ("line", "version"),
    [
        ("sglang: 0.5.9", "0.5.9"),  # python3 -m sglang.check_env
        ("sglang version: 0.5.23", "0.5.23"),  # sglang version
        ("docker run lmsysorg/sglang:v0.5.17-cu130 sglang serve", "0.5.17"),
        ("image: lmsysorg/sglang-rocm:v0.5.10rc0-rocm700-mi35x-20260417", "0.5.10rc0"),
        ("pip install sglang==0.5.12.post1", "0.5.12.post1"),
    ],
)
def test_the_version_when_the_log_names_it(line: str, version: str) -> None:
    parsed = startup.read_text(f"x\n{line}\n")
    assert (parsed.version, parsed.version_line) == (version, 2)


def test_a_pasted_multi_line_command_is_the_request() -> None:
    text = (
        "$ python3 -m sglang.launch_server \\\n"
        "    --model-path zai-org/GLM-5-FP8 \\\n"
        "    --tp 8 --nsa-decode-backend=flashmla_kv \\\n"
        "    --attention-backend nsa\n"
        "[2026-02-26 05:43:36] WARNING server_args.py:1172: Set NSA backends for fp8_e4m3 KV Cache: "
        "prefill=flashmla_auto, decode=trtllm.\n"
    )
    parsed = startup.read_text(text)
    assert {k: v.value for k, v in parsed.argv.items()} == {
        "tp_size": "8",
        "dsa_decode_backend": "flashmla_kv",
        "attention_backend": "dsa",
    }
    assert parsed.argv_line == 1
    assert parsed.origin("dsa_prefill_backend") == "sglang" and parsed.origin("dsa_decode_backend") == "flag"
    evidence = startup.compare(parsed)
    assert [(e["kind"], e["field"], e["requested"], e["effective"], e["line"]) for e in evidence] == [
        ("mismatch", "dsa_decode_backend", "flashmla_kv", "trtllm", 5)
    ]


def test_a_command_line_without_backend_flags_makes_sglang_the_origin() -> None:
    text = (
        "bwstack-serve: starting python3 -m sglang.launch_server --model-path m --host 0.0.0.0\n"
        "[2026-10-31 08:00:02] Use dsa attention backend for DeepSeek with DSA.\n"
        "[2026-10-31 08:00:02] Set DSA backends for fp8_e4m3 KV Cache: prefill=trtllm, decode=trtllm.\n"
    )
    parsed = startup.read_text(text)
    assert parsed.argv_line == 1 and parsed.argv == {}
    assert parsed.auto_set() == ["attention_backend", "dsa_prefill_backend", "dsa_decode_backend"]
    assert parsed.origin("kv_cache_dtype") == "default"


@pytest.mark.parametrize("variant", ["v0.5.9-cu130", "v0.5.23-cu130"])
def test_flags_and_server_args_fields_map_to_the_same_profile_field(variant: str) -> None:
    """Each flag the parse reads from a command line has, in that SGLang's own parser (the committed snapshot),
    the dest that the parse reads from its server_args record: both land on the same profile field."""
    from bwstack.stack import snapshots

    snapshot = snapshots.load_snapshot(ROOT / "images" / variant / "sglang-args.json")
    for field in vocabulary.REPORT_FIELDS:
        flags = vocabulary.SEMANTIC_FLAGS.get(field, vocabulary.TP_FLAGS)
        known = [found for found in map(snapshot.flag, flags) if found is not None]
        assert known, f"{variant} has no flag for {field}"
        for flag in known:
            # 0.5.9's from_cli_args renames the argparse dest tensor_parallel_size to the field tp_size
            # (sglang 0.5.9 wheel, srt/server_args.py ServerArgs.from_cli_args); 0.5.23 uses the field name
            dest = "tp_size" if flag.dest == "tensor_parallel_size" else flag.dest
            assert vocabulary.field_for_name(dest) == field, (variant, flag.name, flag.dest)
            for option in flag.option_strings:
                if option.startswith("--") and vocabulary.field_for_flag(option) is not None:
                    assert vocabulary.field_for_flag(option) == field


def test_an_unclosed_record_is_bounded_and_marked_truncated() -> None:
    reader = startup.StartupReader()
    reader.feed(
        "[2026-01-01 00:00:00] server_args=ServerArgs(model_path='m', attention_backend='triton', x=["
    )
    for _ in range(10_000):
        reader.feed("1, 2, 3, " * 50)
    reader.feed("[2026-01-01 00:00:01] Load weight begin.")
    parsed = reader.result()
    assert parsed.server_args is not None and parsed.server_args["truncated"] is True
    assert parsed.effective()["attention_backend"].value == "triton"


def test_the_last_start_of_a_restarted_container_counts() -> None:
    log = (CORPUS / "cpu-v0.5.9_tiny-llama.log").read_text()
    second = log.replace("--kv-cache-dtype bf16", "--kv-cache-dtype fp8_e4m3").replace(
        "kv_cache_dtype='bf16'", "kv_cache_dtype='fp8_e4m3'"
    )
    parsed = startup.read_text(log + second)
    lines = len(log.splitlines())
    assert parsed.argv_line == lines + 1
    assert parsed.effective()["kv_cache_dtype"].value == "fp8_e4m3"
    assert parsed.effective()["kv_cache_dtype"].line == lines + 11
    assert parsed.origin("kv_cache_dtype") == "flag"


@pytest.mark.parametrize(
    ("name", "prefill", "decode", "line"),
    [
        ("rocm-v0.5.9_glm5-fp8_triton.log", "flashmla_auto", "flashmla_kv", 98),
        ("sim-sm120-v0.5.9_glm5_triton.log", "flashmla_auto", "flashmla_kv", 12),
        ("sim-sm120-v0.5.23_glm5_triton.log", "flashinfer_sparse_mla", "flashinfer_sparse_mla", 13),
    ],
)
def test_triton_requested_dsa_set_by_sglang_in_both_pinned_versions(
    name: str, prefill: str, decode: str, line: int
) -> None:
    parsed = startup.read_file(str(CORPUS / name))
    evidence = startup.compare(parsed, {"attention_backend": "triton"})
    assert [(e["kind"], e["field"], e["effective"], e["line"]) for e in evidence] == [
        ("dsa_auto", "dsa_prefill_backend", prefill, line),
        ("dsa_auto", "dsa_decode_backend", decode, line),
    ]
