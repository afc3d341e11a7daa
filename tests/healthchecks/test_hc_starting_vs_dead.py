"""Starting vs dead without Docker's help: what the healthcheck says while the port refuses (issue 11).

The logs here are real: a real Python process dying at import time writes its own traceback, and the corpus
files are real SGLang output from public issues (corpus/README.md).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_hc_warmup import assert_unhealthy, run_hc

from bwstack.classify import classify_log_file
from healthchecks import signatures, warmup
from support.hc_fakes import FakeSGLang, free_port

CORPUS = Path(__file__).resolve().parent / "corpus"
EXPECTED: dict[str, dict[str, str]] = json.loads((CORPUS / "EXPECTED.json").read_text(encoding="utf-8"))
READY = "[2026-03-02 10:21:27] The server is fired up and ready to roll!\n"
#: corpus pastes whose error line sits above the launch command (issue 27: classify-log reads it, see below)
PASTED_ABOVE_THE_COMMAND = {"sglang7227_fp8e4nv_not_supported_in_this_architecture.log"}
#: corpus pastes that hold only a clean stop (SIGTERM handled, "exiting normally"): no ready line, no batch, no
#: error. classify-log reads a stopped server (healthy); live, a refused port with no ready line and no serving
#: evidence yet is a server still starting, bounded by the start period
ONLY_A_CLEAN_STOP = {"sglang16484_tp8_sigterm_graceful_shutdown.log"}


def refused_url() -> str:
    return f"http://127.0.0.1:{free_port()}"


def real_import_crash(tmp_path: Path) -> Path:
    """Run a real server entry point that dies at import, its stderr going to the server log."""
    entry = tmp_path / "launch_server.py"
    entry.write_text("import sglang_kernel_that_is_not_installed\n", encoding="utf-8")
    log = tmp_path / "server.log"
    with open(log, "wb") as fh:
        proc = subprocess.run([sys.executable, str(entry)], stdout=fh, stderr=subprocess.STDOUT, check=False)
    assert proc.returncode == 1
    assert "ModuleNotFoundError: No module named" in log.read_text(encoding="utf-8")
    return log


def test_import_time_traceback_and_refused_port_is_dead_at_once(tmp_path: Path) -> None:
    log = real_import_crash(tmp_path)
    first = run_hc(tmp_path, refused_url(), timeout=10)
    reason = assert_unhealthy(first, "import_error")  # the specific class of this crash
    assert "connection refused" in reason and "ModuleNotFoundError" in reason
    assert first.elapsed < 10
    again = run_hc(tmp_path, refused_url(), timeout=10)  # the incremental scan keeps it
    assert_unhealthy(again, "import_error")
    assert classify_log_file(log)["class"] == "import_error"


def test_a_traceback_cut_before_its_exception_line_is_still_dead(tmp_path: Path) -> None:
    text = real_import_crash(tmp_path).read_text(encoding="utf-8")
    (tmp_path / "server.log").write_text(text.split("ModuleNotFoundError")[0], encoding="utf-8")
    reason = assert_unhealthy(run_hc(tmp_path, refused_url()), "crash")
    assert "Traceback" in reason or "File" in reason


def test_a_quiet_log_while_refused_is_starting_until_the_stall_bound(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("[2026-03-02 10:14:55] server_args=ServerArgs(model_path='m')\nLoading weights\n")
    assert_unhealthy(run_hc(tmp_path, refused_url()), "starting")
    two_hours_ago = time.time() - 7200
    os.utime(log, (two_hours_ago, two_hours_ago))
    reason = assert_unhealthy(run_hc(tmp_path, refused_url()), "crash")
    assert "has not changed for" in reason and "--stall-after 900s" in reason
    assert_unhealthy(run_hc(tmp_path, refused_url(), "--stall-after", "86400"), "starting")
    env = {"BWSTACK_HC_STALL_AFTER": "3600"}
    assert "3600s" in assert_unhealthy(run_hc(tmp_path, refused_url(), env=env), "crash")


def test_a_log_that_reached_the_ready_line_and_a_refused_port_is_dead(tmp_path: Path) -> None:
    (tmp_path / "server.log").write_text("Load weight end.\n" + READY)
    reason = assert_unhealthy(run_hc(tmp_path, refused_url()), "crash")
    assert "ready line" in reason


def test_a_new_start_banner_forgets_the_previous_run(tmp_path: Path) -> None:
    old_run = real_import_crash(tmp_path).read_text(encoding="utf-8")
    (tmp_path / "server.log").write_text(
        old_run + "bwstack-serve: starting python3 -m sglang.launch_server\n"
    )
    assert_unhealthy(run_hc(tmp_path, refused_url()), "starting")


def test_a_handled_traceback_does_not_fail_a_live_server(tmp_path: Path) -> None:
    handled = (
        READY
        + "ERROR:    Exception in ASGI application\nTraceback (most recent call last):\n"
        + '  File "/sgl/http_server.py", line 10, in generate\n'
        + "ValueError: the request has no text\n"
    )
    (tmp_path / "server.log").write_text(handled)
    with FakeSGLang(era="0.5.23") as fake:
        assert run_hc(tmp_path, fake.url).code == 0
    # the same log once nothing answers any more: dead, and the traceback is the evidence
    assert_unhealthy(run_hc(tmp_path, refused_url()), "crash")


def _in_container(tmp_path: Path, url: str, capsys: pytest.CaptureFixture[str]) -> str:
    code = warmup.main(
        [
            "--url",
            url,
            "--timeout",
            "5",
            "--log",
            str(tmp_path / "server.log"),
            "--state",
            str(tmp_path / "s"),
        ]
    )
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert code == (0 if last.startswith("healthy") else 1)
    return "healthy" if code == 0 else last.split(":", 2)[1].strip()


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_classify_log_and_the_in_container_scan_agree(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Same file, two readers: ``bwstack classify-log`` and warmup.py's incremental scan (two runs, the log
    growing in between) while the port refuses. A log at the ready line with a refused port is dead."""
    data = (CORPUS / name).read_bytes()
    cut = data.rfind(b"\n", 0, len(data) // 2) + 1
    log = tmp_path / "server.log"
    log.write_bytes(data[:cut])
    url = refused_url()
    _in_container(tmp_path, url, capsys)
    with open(log, "ab") as fh:
        fh.write(data[cut:])
    in_container = _in_container(tmp_path, url, capsys)
    found = classify_log_file(CORPUS / name)
    host = found["class"]
    if not data.endswith(b"\n"):
        # the paste ends in an unfinished line (round 5: an excerpt cut mid-line, a lone error body; round 6: the
        # decode batch line that made it serve): a finished file is read whole, a live scan waits for the line's
        # end and reads what comes before it
        finished = tmp_path / "finished.log"
        finished.write_bytes(data[: data.rfind(b"\n") + 1])
        before = classify_log_file(finished)["class"]
        assert in_container == ("crash" if before == "healthy" else before)
        return
    if name in PASTED_ABOVE_THE_COMMAND:
        # a finished log whose last run logged nothing after its banner: classify-log reads the error above it;
        # live, a fresh banner is a new run starting (a restarted container appends to the old log)
        assert in_container == "starting"
        return
    if host in signatures.NOT_FATAL_WHILE_ALIVE:
        # a readiness wait that ran out (round 14: a launcher's, a router's) is no verdict live, also once the
        # port refuses (an old health-check line is not why a server died); a fresh log reads starting
        assert in_container == "starting"
        return
    if name in ONLY_A_CLEAN_STOP:
        assert host == "healthy"  # a stopped server, read from its log alone (issue 36)
        assert in_container == "starting"
        return
    if signatures.scan_file(str(CORPUS / name)).ended_in_error() is not None:
        # a paste that ends in a failure report is read whole as the dead server it ends with (round 17); live,
        # a starting server may log an error it goes on from: starting until its log stalls (--stall-after)
        assert in_container == "starting"
        return
    assert in_container == ("crash" if host == "healthy" else host)
    shutil.rmtree(tmp_path)


def test_a_scan_saved_by_another_catalog_is_read_again_from_the_start(tmp_path: Path) -> None:
    """A state file kept across an image upgrade: its signature indexes number another catalog's entries.
    The healthcheck reads the log again instead of naming whatever entry the old index now points at."""
    real_import_crash(tmp_path)
    assert_unhealthy(run_hc(tmp_path, refused_url()), "import_error")
    state_file = tmp_path / "state.json"
    state = json.loads(state_file.read_text(encoding="utf-8"))
    saved = state["log"]["scanner"]
    other = next(i for i, s in enumerate(signatures.SIGNATURES) if s.cls == "nan" and not s.weak)
    for key in ("best", "strong"):  # what the old numbering's entries are in this catalog
        saved[key] = {"index": other, "line": 1, "text": "an entry of the old catalog"}
    saved["seen"] = saved["seen_strong"] = {"nan": [10, 1]}
    saved["catalog"] = "0123456789abcdef"
    state_file.write_text(json.dumps(state), encoding="utf-8")
    assert_unhealthy(run_hc(tmp_path, refused_url()), "import_error")
    saved["catalog"] = signatures.CATALOG_ID  # the same tampered state, claimed by this catalog, is believed
    state_file.write_text(json.dumps(state), encoding="utf-8")
    assert_unhealthy(run_hc(tmp_path, refused_url()), "nan")
