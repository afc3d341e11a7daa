"""Hostile and broken inputs: every reader answers in bounded time with one line and exit 2, or works.

Property-based (hypothesis) where the input space is large: a real sweep report (made by the sweep's own code
on the CPU stand-in) with any value replaced, any key removed or its text cut short, read by ``report diff``
and ``list``'s speed reader; a real bisect state mutated the same way, read by ``bisect --resume``'s replay;
arbitrary text through the YAML loader. Each example is bounded in time by hypothesis' deadline. Then the
commands a user runs, on what must not hang: a FIFO where a file is expected, a tag on a YAML sequence, a
seed out of range.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import os
import socket
import struct
import subprocess
import sys
import threading
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bwstack import record, textlayout
from bwstack.bisect import search
from bwstack.errors import ExternalError, UserError
from bwstack.host import calibrate
from bwstack.know import fatbin
from bwstack.know import inventory as sources
from bwstack.ops import choose
from bwstack.stack import loader
from bwstack.stack.yamlload import parse_yaml
from bwstack.sweep import reportdiff, streams
from support.stack import copy_stack
from support.standin_sweep import sweep_without_docker

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
FUZZ = settings(
    max_examples=150,
    deadline=2000,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
    derandomize=True,
)


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path into a JSON value (keys and indices), the root included."""
    found = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            found += paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += paths(item, (*prefix, index))
    return found


def mutate(doc: Any, path: tuple[Any, ...], how: str, new: Any) -> Any:
    """``doc`` with the value at ``path`` replaced by ``new`` (``how`` = "set") or removed ("drop")."""
    if not path:
        return new
    out = copy.deepcopy(doc)
    parent = out
    for step in path[:-1]:
        parent = parent[step]
    if how == "drop":
        del parent[path[-1]]
    else:
        parent[path[-1]] = new
    return out


@pytest.fixture(scope="module")
def stack_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hostile-stack")
    copy_stack(root)
    return root


@pytest.fixture(scope="module")
def real_report(stack_root: Path) -> dict[str, Any]:
    out = stack_root / "real-report"
    sweep_without_docker(stack_root / "profiles.yaml", out, ["dense-fi-bf16", "dense-triton-auto"])
    doc: dict[str, Any] = json.loads((out / record.RESULTS_FILE).read_text())
    return doc


def read_like_the_commands(path: Path, good: dict[str, Any]) -> None:
    """What ``report diff`` and ``list`` do with a report file; UserError is the only allowed failure."""
    doc = reportdiff.load(path)
    for result in (reportdiff.diff(doc, good), reportdiff.diff(good, doc)):
        for line in reportdiff.render_text(result, 80):
            assert "\x1b" not in line and "\r" not in line


@FUZZ
@given(data=st.data())
def test_report_readers_refuse_any_mutation_in_one_line(
    real_report: dict[str, Any], stack_root: Path, data: st.DataObject
) -> None:
    folder = stack_root / "reports" / "mutated"
    folder.mkdir(parents=True, exist_ok=True)
    path = data.draw(st.sampled_from(paths(real_report)))
    how = data.draw(st.sampled_from(["set", "drop"])) if path else "set"
    hostile = mutate(real_report, path, how, data.draw(JSON))
    text = json.dumps(hostile)
    if data.draw(st.booleans()):
        text = text[: data.draw(st.integers(0, len(text)))]  # truncated, as by a full disk
    (folder / record.RESULTS_FILE).write_text(text)
    try:
        read_like_the_commands(folder, real_report)
    except UserError as exc:
        assert "\n" not in str(exc)
    stack = loader.load_stack(stack_root / "profiles.yaml")
    choose.measured(stack, "sm120")  # list reads every report: a bad one is skipped, never fatal


def test_a_control_character_in_a_report_is_printed_escaped(
    real_report: dict[str, Any], tmp_path: Path
) -> None:
    hostile = copy.deepcopy(real_report)
    name = next(iter(hostile["results"]))
    hostile["results"][name]["reason"] = "\x1b[2J\x1b[Hall fine\rOK\x07"
    hostile["results"][name]["verdict"] = "nan"
    (tmp_path / record.RESULTS_FILE).write_text(json.dumps(hostile))
    lines = reportdiff.render_text(reportdiff.diff(real_report, reportdiff.load(tmp_path)), 200)
    assert any("\\x1b[2J\\x1b[Hall fine\\x0dOK\\x07" in line for line in lines), lines
    assert textlayout.printable("a\u009bb\u2028") == "a\\x9bb\\u2028"


def bisect_state() -> dict[str, Any]:
    tags = [search.parse_tag(f"nightly-dev-cu13-202607{d:02d}-{d:07x}a") for d in (1, 2, 3, 4)]
    inputs = {"profile": "p", "repo": "r", "good": tags[0].name, "bad": tags[-1].name}
    state = search.new_state(inputs, search.Candidates(tags, "test", []))
    state["steps"].append(
        {"tag": tags[1].name, "side": "good", "verdict": "healthy", "reason": "ok", "started_at": "t",
         "elapsed_s": 1.0}
    )  # fmt: skip
    return state


@FUZZ
@given(data=st.data())
def test_bisect_resume_refuses_any_mutation_in_one_line(
    tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
) -> None:
    state = bisect_state()
    folder = tmp_path_factory.mktemp("bisect")
    path = data.draw(st.sampled_from(paths(state)))
    how = data.draw(st.sampled_from(["set", "drop"])) if path else "set"
    text = json.dumps(mutate(state, path, how, data.draw(JSON)))
    if data.draw(st.booleans()):
        text = text[: data.draw(st.integers(0, len(text)))]
    (folder / search.STATE_FILE).write_text(text)
    try:
        loaded = search.load_state(folder, state["inputs"])
        search.Search(search.tags_of(loaded), search.steps_of(loaded)).next_index()
        search.result_of(loaded, "healthy")
    except UserError as exc:
        assert "\n" not in str(exc)


YAML_PIECES = [*"ab:- []{}!&*|>'\"\n\t#%@`,?0.", "!!str ", "!x ", "&a ", "*a", "<<: ", "- ", "\n  "]


@settings(max_examples=300, deadline=2000, derandomize=True)
@given(st.lists(st.sampled_from(YAML_PIECES), max_size=60).map("".join))
def test_yaml_loader_answers_any_text_with_data_or_one_line(text: str) -> None:
    try:
        parse_yaml(text, "fuzz.yaml")
    except UserError as exc:
        assert "\n" not in str(exc)


# --- the commands, as a user runs them ------------------------------------------------------------------


def run(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bwstack.cli", *args], capture_output=True, text=True, timeout=60, cwd=cwd
    )


def assert_one_line_exit_2(done: subprocess.CompletedProcess[str], expect: str) -> None:
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    errors = [ln for ln in done.stderr.splitlines() if not ln.startswith("bwstack: warning:")]
    assert len(errors) == 1 and "Traceback" not in done.stderr, done.stderr
    assert expect in errors[0], errors[0]


@pytest.mark.parametrize(
    "args",
    [
        ("validate", "-f", "{fifo}"),
        ("list", "-f", "{fifo}"),
        ("report", "diff", "{fifo}", "{fifo}"),  # refused as "no sweep results here", before any read
        ("classify-log", "--profile", "dense-fi-bf16", "-f", "{fifo}", "server.log"),
        (
            "bisect",
            "dense-fi-bf16",
            "--tags",
            "{fifo}",
            "--out",
            "b",
            "--good",
            "nightly-dev-cu13-20260701-754524d8",
            "--bad",
            "nightly-dev-cu13-20260705-754524d9",
        ),
    ],
    ids=["validate", "list", "report-diff", "classify-log-profile", "bisect-tags"],
)
def test_a_fifo_where_a_file_is_expected_is_refused_not_waited_on(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    copy_stack(tmp_path)
    fifo = tmp_path / "input"
    os.mkfifo(fifo)
    (tmp_path / "server.log").write_text("hello\n")
    done = run(tmp_path, *(a.replace("{fifo}", str(fifo)) for a in args))
    assert_one_line_exit_2(done, "no sweep results here" if args[0] == "report" else "not a regular file")


@pytest.mark.parametrize(
    ("old", "new", "expect"),
    [
        ("  tp_size: 8", "  tp_size: !custom [8]", "YAML tag '!custom' on a sequence is not supported"),
        ("  tp_size: 8", "  tp_size: !!str {a: 8}", "on a mapping is not supported"),
        ("  tp_size: 8", "  tp_size: 99999999999999999999999999999999999", "model.tp_size"),
        ("  port: 30000", "  port: 1e999", "stack.port"),
    ],
)
def test_tags_and_absurd_numbers_are_one_line(tmp_path: Path, old: str, new: str, expect: str) -> None:
    profiles = copy_stack(tmp_path)
    text = profiles.read_text()
    assert old in text
    profiles.write_text(text.replace(old, new, 1))
    assert_one_line_exit_2(run(tmp_path, "validate", "-f", str(profiles)), expect)


@pytest.mark.parametrize("seed", ["-1", str(2**64)])
def test_a_seed_out_of_range_is_one_line(tmp_path: Path, seed: str) -> None:
    done = run(tmp_path, "tiny-model", str(tmp_path / "m"), "--seed", seed)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "--seed" in done.stderr and not (tmp_path / "m").exists()


# --- binaries: every loop over untrusted structure makes progress or stops -------------------------------


def test_a_16_byte_fatbin_with_a_zero_header_ends_with_its_error(tmp_path: Path) -> None:
    (tmp_path / "spin.fatbin").write_bytes(struct.pack("<IHHQ", fatbin.FATBIN_MAGIC, 1, 0, 0))
    done = subprocess.run(
        [sys.executable, "-m", "bwstack.cli", "audit", "--path", str(tmp_path), "--reader", "python", "--json"],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert "Traceback" not in done.stderr
    files = json.loads(done.stdout)["files"]
    assert [f["error"] for f in files] == ["bad fatbin header size 0 at offset 0"]


@settings(max_examples=200, deadline=1000, derandomize=True)
@given(st.binary(min_size=16, max_size=256))
def test_the_fatbin_reader_ends_on_any_bytes(blob: bytes) -> None:
    data = struct.pack("<I", fatbin.FATBIN_MAGIC) + blob
    # returns (targets, an error or None) within the deadline
    fatbin.scan_stream(io.BytesIO(data), "x.fatbin")


def test_a_wheel_member_is_inflated_only_up_to_its_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sources, "MAX_CUBIN_BYTES", 1 << 20)
    monkeypatch.setattr(sources, "MAX_MEMBER_BYTES", 2 << 20)
    wheel = tmp_path / "bomb-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("bomb-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\n")
        archive.writestr("bomb/k.cubin", b"\0" * (8 << 20))  # 8 MiB of zeros: a few KiB in the archive
        archive.writestr("bomb/libk.so", fatbin.ELF_MAGIC + b"\0" * (8 << 20))
    inv = sources.inventory_wheel(wheel, "python")
    errors = sorted((f.path, f.error) for f in inv.files)
    assert errors == [
        ("bomb/k.cubin", "inflates to more than 1 MiB: not scanned (zip bomb?)"),
        ("bomb/libk.so", "inflates to more than 2 MiB: not scanned (zip bomb?)"),
    ]


# --- network waits: a deadline that holds when the server trickles -------------------------------------------


@pytest.fixture
def trickler() -> Iterator[str]:
    """An HTTP server that answers every request one header byte at a time, one byte every 0.2 s, forever."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    stop = threading.Event()

    def drip(conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\n")
            while not stop.wait(0.2):
                conn.sendall(b"X")

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=drip, args=(conn,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        listener.close()


def test_calibrate_ends_within_its_budget_against_a_trickling_server(trickler: str) -> None:
    started = time.monotonic()
    with pytest.raises(ExternalError, match="did not answer within the 2s budget"):
        calibrate.measure(trickler, timeout=2.0)
    assert time.monotonic() - started < 5


def test_the_sweeps_server_info_ends_against_a_trickling_server(trickler: str) -> None:
    port = int(trickler.rsplit(":", 1)[1])
    started = time.monotonic()
    assert streams.fetch_server_info("127.0.0.1", port, None, timeout=0.5) is None
    assert time.monotonic() - started < 4


def test_an_error_about_a_hostile_key_prints_its_control_characters_escaped(
    real_report: dict[str, Any], tmp_path: Path
) -> None:
    hostile = copy.deepcopy(real_report)
    hostile["results"]["\x1b]0;owned\x07name"] = "not a row"
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / record.RESULTS_FILE).write_text(json.dumps(hostile))
    done = run(tmp_path, "report", "diff", str(tmp_path / "a"), str(tmp_path / "a"))
    assert_one_line_exit_2(done, "results.\\x1b]0;owned\\x07name: malformed sweep report: expected a mapping")
    assert "\x1b" not in done.stderr and "\x07" not in done.stderr
