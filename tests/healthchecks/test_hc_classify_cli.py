"""``bwstack classify-log`` on the excerpts: the class, the --json object, and bad input as exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_hc_signatures import EXPECTED, HEALTHY

from bwstack import classify
from bwstack.cli import main
from bwstack.errors import UserError

LOGS = Path(__file__).resolve().parent / "logs"


@pytest.mark.parametrize("name", sorted(EXPECTED) + HEALTHY)
def test_cli_prints_the_class(name: str) -> None:
    expected = EXPECTED[name][0] if name in EXPECTED else "healthy"
    result = CliRunner().invoke(main, ["classify-log", str(LOGS / name)])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[0] == expected  # the startup's backends follow on later lines


def test_cli_json_object() -> None:
    result = CliRunner().invoke(
        main, ["classify-log", "--json", str(LOGS / "nan_multinomial_dense_fp8kv.log")]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["class"] == "nan"
    assert data["line"] == 5
    assert "probability tensor contains either" in data["text"]
    assert data["also"] == ["device_assert", "crash"]


def test_cli_json_for_a_clean_log() -> None:
    result = CliRunner().invoke(main, ["classify-log", "--json", str(LOGS / "healthy_0.5.23_dsa.log")])
    data = json.loads(result.output)
    assert {k: data[k] for k in ("class", "line", "text", "also")} == {
        "class": "healthy",
        "line": None,
        "text": "",
        "also": [],
    }
    assert data["startup"]["effective"]["dsa_decode_backend"]["value"] == "flashinfer_sparse_mla"


def test_classify_text_helper_has_the_same_shape() -> None:
    text = (LOGS / "oom_cuda_graph_capture.log").read_text()
    assert classify.classify_text(text) == classify.classify_log_file(LOGS / "oom_cuda_graph_capture.log")
    # issue 11: a log without the ready line is "starting", never "healthy" (this said "healthy" before)
    assert classify.classify_text("all good\n")["class"] == "starting"
    assert classify.classify_text("x\n[t] The server is fired up and ready to roll!\n")["class"] == "healthy"


def test_missing_file_or_folder_is_a_user_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope.log"
    result = CliRunner().invoke(main, ["classify-log", str(missing)])
    assert result.exit_code == 2
    assert result.output.strip() == f"bwstack: {missing}: no such log file"
    with pytest.raises(UserError):
        classify.classify_log_file(tmp_path)


def test_read_error_is_a_user_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "server.log"
    log.write_text("x\n")

    def denied(path: str) -> None:
        raise PermissionError(13, "Permission denied", path)

    monkeypatch.setattr("healthchecks.signatures.scan_file", denied)
    result = CliRunner().invoke(main, ["classify-log", str(log)])
    assert result.exit_code == 2
    assert result.output.strip() == f"bwstack: {log}: cannot read the log: Permission denied"


CORPUS = Path(__file__).resolve().parent / "corpus"


def test_cli_prints_the_logs_structure() -> None:
    """Real pastes (sgl-project/sglang#12421 on a B200; the corpus's scheduler watchdog log): the last
    traceback with its type, innermost frame and message; the process that died and its exit, as text and in
    --json."""
    log = CORPUS / "sglang12421_b200_bench_speculative_server_exit_9.log"
    text = CliRunner().invoke(main, ["classify-log", str(log)]).output.splitlines()
    assert text[0] == "crash"
    assert text[1].startswith("last traceback: Exception in ") and "sglang/test/test_utils.py" in text[1]
    assert text[1].endswith("Server process exited with code -9. Check server logs for errors.")
    data = json.loads(CliRunner().invoke(main, ["classify-log", "--json", str(log)]).output)
    assert data["structure"]["exception"] == "Exception" and data["structure"]["exception_line"] == 10
    died = CORPUS / "sglang_health_then_scheduler_watchdog_exit6.log"
    text = CliRunner().invoke(main, ["classify-log", str(died)]).output.splitlines()
    assert text[1].startswith("process ended: exit -6 (line 3): Subprocess scheduler_0")


def test_cli_structure_of_a_log_without_one_is_empty() -> None:
    """A healthy log has no traceback, death or error to show: only where its HTTP server answered."""
    data = json.loads(
        CliRunner().invoke(main, ["classify-log", "--json", str(LOGS / "healthy_0.5.9_dense.log")]).output
    )
    assert set(data["structure"]) <= {"answered_line", "failed_line"}
    assert data["structure"]["answered_line"] > 0
