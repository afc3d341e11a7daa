"""The parser rebuilt from a snapshot accepts and refuses exactly what the pinned SGLang's argparse does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bwstack.stack import snapshot_argparse
from support.standin_helpers import DATA, load_json, snapshot_path

MODEL = ["--model-path", "nvidia/GLM-5-NVFP4"]


@pytest.fixture(scope="module")
def raw0523() -> dict[str, Any]:
    return load_json(snapshot_path("0.5.23"))


@pytest.fixture(scope="module")
def raw059() -> dict[str, Any]:
    return load_json(snapshot_path("0.5.9"))


@pytest.fixture(scope="module")
def raw0515() -> dict[str, Any]:
    return load_json(DATA / "sglang-args-0.5.15.json")


def error_of(snapshot: dict[str, Any], argv: list[str]) -> str:
    namespace, error, _ = snapshot_argparse.check_argv(snapshot, argv)
    assert namespace is None, f"{argv} was accepted"
    return error


def test_unknown_flag_is_unrecognized(raw0523: dict[str, Any]) -> None:
    assert error_of(raw0523, [*MODEL, "--bogus-flag"]) == "unrecognized arguments: --bogus-flag"


def test_flags_removed_in_0523_are_unrecognized_but_fine_in_059(
    raw0523: dict[str, Any], raw059: dict[str, Any]
) -> None:
    for old in (["--nsa-decode-backend", "trtllm"], ["--enable-nan-detection"]):
        assert error_of(raw0523, [*MODEL, *old]).startswith("unrecognized arguments: " + old[0])
        namespace, error, _ = snapshot_argparse.check_argv(raw059, [*MODEL, *old])
        assert namespace is not None, error


def test_ambiguous_prefix_in_0523(raw0523: dict[str, Any]) -> None:
    error = error_of(raw0523, [*MODEL, "--cuda-graph-max-bs", "256"])
    assert error == (
        "ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill"
    )


def test_bad_choice(raw0523: dict[str, Any], raw059: dict[str, Any]) -> None:
    error = error_of(raw0523, [*MODEL, "--kv-cache-dtype", "fp16"])
    assert error.startswith("argument --kv-cache-dtype: invalid choice: 'fp16' (choose from ")
    # a 0.5.17+ backend is not a choice of 0.5.9
    assert "invalid choice: 'flashinfer_sparse_mla'" in error_of(
        raw059, [*MODEL, "--nsa-decode-backend", "flashinfer_sparse_mla"]
    )


def test_missing_model_path(raw0523: dict[str, Any]) -> None:
    assert "the following arguments are required: --model-path" in error_of(raw0523, ["--port", "1"])


def test_bad_int(raw0523: dict[str, Any]) -> None:
    assert error_of(raw0523, [*MODEL, "--port", "x"]) == "argument --port: invalid int value: 'x'"


def test_prefix_alias_store_true_and_defaults(raw0523: dict[str, Any]) -> None:
    namespace, error, _ = snapshot_argparse.check_argv(
        raw0523, ["--model", "m", "--tp", "8", "--trust-remote-code"]
    )
    assert namespace is not None, error
    assert namespace.model_path == "m"
    assert namespace.tp_size == 8  # --tp works through argparse prefix matching only
    assert namespace.trust_remote_code is True
    assert namespace.skip_server_warmup is False
    assert namespace.kv_cache_dtype == "auto"
    assert namespace.port == 30000


def test_json_and_load_format_dummy(raw0523: dict[str, Any]) -> None:
    argv = [*MODEL, "--load-format", "dummy", "--json-model-override-args", '{"num_hidden_layers": 4}']
    namespace, error, _ = snapshot_argparse.check_argv(raw0523, argv)
    assert namespace is not None, error
    assert namespace.load_format == "dummy"
    assert namespace.json_model_override_args == '{"num_hidden_layers": 4}'


def test_deprecated_alias_warns_with_sglang_text(raw0515: dict[str, Any]) -> None:
    namespace, error, warnings = snapshot_argparse.check_argv(
        raw0515, [*MODEL, "--nsa-prefill-backend", "flashmla_kv"]
    )
    assert namespace is not None, error
    assert namespace.dsa_prefill_backend == "flashmla_kv"
    assert warnings == [
        "'--nsa-prefill-backend' is deprecated and will be removed in a future release. "
        "Use '--dsa-prefill-backend' instead."
    ]


def test_deprecated_boolean_and_const(raw0523: dict[str, Any]) -> None:
    namespace, error, warnings = snapshot_argparse.check_argv(raw0523, [*MODEL, "--disable-cuda-graph"])
    assert namespace is not None, error
    assert namespace.disable_cuda_graph is True
    assert warnings == [
        "'--disable-cuda-graph' is deprecated and will be removed in a future release. "
        "Use '--cuda-graph-backend-{decode,prefill}=disabled' instead."
    ]
    const_flag = next((f for f in raw0523["flags"] if "--monokernel-backend" in f["option_strings"]), None)
    if const_flag is not None:
        namespace, error, warnings = snapshot_argparse.check_argv(
            raw0523, [*MODEL, "--monokernel-backend", "amd"]
        )
        assert namespace is not None, error
        assert getattr(namespace, const_flag["dest"]) is True
        assert len(warnings) == 1


def test_deprecated_action_059_only_warns(raw059: dict[str, Any]) -> None:
    flag = next((f for f in raw059["flags"] if f["action"] == "DeprecatedAction"), None)
    if flag is None:
        pytest.skip("this 0.5.9 snapshot has no DeprecatedAction flag")
    option = flag["option_strings"][0]
    namespace, error, warnings = snapshot_argparse.check_argv(raw059, [*MODEL, option])
    assert namespace is not None, error
    assert warnings == [
        f"The command line argument '{option}' is deprecated and will be removed in future versions."
    ]


def test_boolean_optional_action(raw0523: dict[str, Any]) -> None:
    flag = next((f for f in raw0523["flags"] if f["action"] == "BooleanOptionalAction"), None)
    if flag is None:
        pytest.skip("this snapshot has no BooleanOptionalAction flag")
    positive = next(o for o in flag["option_strings"] if not o.startswith("--no-"))
    negative = "--no-" + positive[2:]
    for option, expected in ((positive, True), (negative, False)):
        namespace, error, _ = snapshot_argparse.check_argv(raw0523, [*MODEL, option])
        assert namespace is not None, error
        assert getattr(namespace, flag["dest"]) is expected


def test_parse_argv_exits_2_with_argparse_text(
    raw0523: dict[str, Any], raw059: dict[str, Any], capsys: Any
) -> None:
    with pytest.raises(SystemExit) as exc:
        snapshot_argparse.parse_argv(raw0523, [*MODEL, "--bogus"])
    assert exc.value.code == 2
    assert "sglang serve: error: unrecognized arguments: --bogus" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        snapshot_argparse.parse_argv(raw059, [*MODEL, "--bogus"])
    assert "launch_server.py: error: unrecognized arguments: --bogus" in capsys.readouterr().err


def test_human_readable_int() -> None:
    assert snapshot_argparse.human_readable_int("8k") == 8000
    assert snapshot_argparse.human_readable_int("25.6k") == 25600
    assert snapshot_argparse.human_readable_int("1Ki") == 1024
    assert snapshot_argparse.human_readable_int("4096") == 4096
    with pytest.raises(Exception, match="Decimals are not allowed"):
        snapshot_argparse.human_readable_int("1.5Ki")
    with pytest.raises(Exception, match="Invalid integer value: 'lots'"):
        snapshot_argparse.human_readable_int("lots")


def test_converter_names_match_argparse_messages() -> None:
    snapshot = {
        "schema": snapshot_argparse.SNAPSHOT_SCHEMA,
        "sglang_version": "0.5.23",
        "flags": [
            {
                "dest": "model_path",
                "option_strings": ["--model-path"],
                "action": "store",
                "type": "str",
                "required": True,
            },
            {"dest": "cfg", "option_strings": ["--cfg"], "action": "store", "type": "json"},
            {"dest": "odd", "option_strings": ["--odd"], "action": "store", "type": "some_custom_parser"},
        ],
    }
    assert "invalid loads value: '{'" in error_of(snapshot, [*MODEL, "--cfg", "{"])
    namespace, error, _ = snapshot_argparse.check_argv(snapshot, [*MODEL, "--cfg", '{"a": 1}', "--odd", "x"])
    assert namespace is not None, error
    assert namespace.cfg == {"a": 1}
    assert namespace.odd == "x"


def test_load_snapshot_errors(tmp_path: Path) -> None:
    with pytest.raises(snapshot_argparse.SnapshotError, match="not found"):
        snapshot_argparse.load_snapshot(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": "other", "flags": []}', encoding="utf-8")
    with pytest.raises(snapshot_argparse.SnapshotError, match="schema is 'other'"):
        snapshot_argparse.load_snapshot(bad)
    broken = tmp_path / "broken.json"
    broken.write_text("{", encoding="utf-8")
    with pytest.raises(snapshot_argparse.SnapshotError, match="malformed JSON"):
        snapshot_argparse.load_snapshot(broken)


def test_version_helpers(raw059: dict[str, Any]) -> None:
    assert snapshot_argparse.version_tuple("0.5.23") == (0, 5, 23)
    assert snapshot_argparse.version_tuple("0.5.14.dev3+g754524d8") == (0, 5, 14)
    assert snapshot_argparse.version_tuple("") is None
    assert snapshot_argparse.default_prog(raw059) == "launch_server.py"
    assert snapshot_argparse.default_prog({"sglang_version": "0.5.10"}) == "sglang serve"
    assert snapshot_argparse.option_for(raw059, "nsa_decode_backend") == "--nsa-decode-backend"


def test_merge_config_reads_the_key_file_serve_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stand-in merges ``--config`` as SGLang does, so the key serve.py passes there guards it too."""
    from healthchecks import serve

    monkeypatch.setenv(serve.ENV_RUN_DIR, str(tmp_path))
    key = "sk-\\a'b\"c\td-é"
    path = serve.write_key_config(key)
    merged = snapshot_argparse.merge_config(["--model-path", "m", "--config", path, "--port", "1"])
    assert merged == ["--api-key", key, "--model-path", "m", "--port", "1"]
    (tmp_path / "flags.yaml").write_text("enable-x: true\ndisable-y: false\ntp-size: 2\n# note\n")
    assert snapshot_argparse.merge_config(["--config", str(tmp_path / "flags.yaml")]) == [
        "--enable-x",
        "--tp-size",
        "2",
    ]
    (tmp_path / "nested.yaml").write_text("a: [1, 2]\n")
    with pytest.raises(ValueError, match="only scalar values"):
        snapshot_argparse.merge_config(["--config", str(tmp_path / "nested.yaml")])
