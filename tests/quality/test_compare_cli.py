"""``bwstack compare`` refusals, run as a user would (a subprocess): one line, no traceback, exit 2 for bad
input and exit 1 when a server does not answer. The comparison itself runs against real SGLang in
tests/real/test_image_compare.py."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

from support.stack import ROOT


def bwstack(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bwstack", *args], capture_output=True, text=True, timeout=60, cwd=ROOT
    )


def one_line(done: subprocess.CompletedProcess[str]) -> str:
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    return lines[0]


def test_an_unknown_profile_is_named_with_the_valid_ones() -> None:
    done = bwstack("compare", "cpu-long-copy", "nope", "-f", "profiles.cpu.yaml")
    assert done.returncode == 2
    line = one_line(done)
    assert "unknown profile 'nope'" in line and "cpu-long-window" in line, line


def test_both_sides_on_one_url_is_refused() -> None:
    done = bwstack("compare", "cpu-long-copy", "cpu-long-window", "-f", "profiles.cpu.yaml")
    assert done.returncode == 2
    assert "A and B are both at http://127.0.0.1:" in one_line(done)


def test_a_server_that_does_not_answer_is_one_line_and_exit_1(tmp_path: Path) -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    done = bwstack("compare", "cpu-long-copy", "cpu-long-window", "-f", "profiles.cpu.yaml",
                   "--url-a", f"http://127.0.0.1:{port}", "--url-b", f"http://127.0.0.1:{port + 0}/")  # fmt: skip
    assert done.returncode == 1, done.stderr
    line = one_line(done)
    assert line.startswith("bwstack: cpu-long-copy: /v1/models failed:") and "is the server up" in line, line


def test_b_or_save_a_is_needed_and_the_two_a_sources_exclude_each_other(tmp_path: Path) -> None:
    done = bwstack("compare", "cpu-long-copy", "-f", "profiles.cpu.yaml", "--url-a", "http://127.0.0.1:1")
    assert done.returncode == 2 and "B: name B, or pass --save-a FILE" in one_line(done)
    done = bwstack("compare", "cpu-long-copy", "cpu-long-window", "-f", "profiles.cpu.yaml", "--save-a",
                   str(tmp_path / "a.json"), "--a-from", str(tmp_path / "a.json"))  # fmt: skip
    assert done.returncode == 2 and "--save-a: --save-a records A from its server" in one_line(done)
    done = bwstack("compare", "cpu-long-copy", "cpu-long-window", "-f", "profiles.cpu.yaml", "--a-from",
                   str(tmp_path / "missing.json"), "--url-b", "http://127.0.0.1:1")  # fmt: skip
    assert done.returncode == 2 and one_line(done).endswith("missing.json: --a-from: no such file")


def test_a_malformed_recording_is_one_line_naming_the_field(tmp_path: Path) -> None:
    """The recorded answers are untrusted input: each fault is named by its field, exit 2."""
    good = {"format": "bwstack-answers", "format_version": 1, "window": None, "top_k": 20,
            "facts": {"label": "cpu-long-copy", "sglang": "0.5.23", "model_path": "copy", "context": 4096},
            "prompts": [{"id": "copy-64-0", "length": 64, "distance": 32,
                         "positions": [[32, -0.5, [[100, -0.5], [7, -1.2]]]]}],
            "retrieval": [{"length": 1024, "right": 8, "asked": 8}]}  # fmt: skip
    faults = {
        "format: must be 'bwstack-answers' (a file written by compare --save-a or a sweep)": {
            **good, "format": "other"},
        "prompts[0].positions[0][1]: must be a finite logprob": {
            **good, "prompts": [{**good["prompts"][0], "positions": [[32, "x", []]]}]},
        "prompts[0].positions[0][2][0]: must be [id, logprob]": {
            **good, "prompts": [{**good["prompts"][0], "positions": [[32, -0.5, [[1]]]]}]},
        "retrieval[0].right: must be at most asked (8)": {
            **good, "retrieval": [{"length": 1024, "right": 9, "asked": 8}]},
    }  # fmt: skip
    for message, doc in faults.items():
        path = tmp_path / "a.json"
        path.write_text(json.dumps(doc), encoding="utf-8")
        done = bwstack("compare", "cpu-long-copy", "cpu-long-window", "-f", "profiles.cpu.yaml", "--a-from",
                       str(path), "--url-b", "http://127.0.0.1:1")  # fmt: skip
        assert done.returncode == 2, done.stderr
        assert one_line(done) == f"bwstack: {path}: not a recording of answers: {message}", message
    path.write_text("{" * 100, encoding="utf-8")
    done = bwstack("compare", "cpu-long-copy", "cpu-long-window", "-f", "profiles.cpu.yaml", "--a-from",
                   str(path), "--url-b", "http://127.0.0.1:1")  # fmt: skip
    assert done.returncode == 2 and "cannot read recorded answers" in one_line(done)
    path.write_text(json.dumps(good), encoding="utf-8")  # a good file: then B's server is asked
    done = bwstack("compare", "cpu-long-copy", "cpu-long-window", "-f", "profiles.cpu.yaml", "--a-from",
                   str(path), "--url-b", "http://127.0.0.1:1")  # fmt: skip
    assert done.returncode == 1 and one_line(done).startswith("bwstack: cpu-long-window: /v1/models failed:")


def test_sweep_compare_to_refuses_an_unknown_profile_and_the_stand_in(tmp_path: Path) -> None:
    done = bwstack("-f", "profiles.cpu.yaml", "sweep", "--compare-to", "nope", "--out", str(tmp_path / "r"))
    assert done.returncode == 2 and "unknown profile 'nope'" in one_line(done)
    done = bwstack("sweep", "--standin", "--compare-to", "dense-fi-bf16", "--out", str(tmp_path / "r"))
    assert done.returncode == 2 and "Traceback" not in done.stderr  # after the GPU stack's lock warnings:
    last = done.stderr.strip().splitlines()[-1]
    assert last == "bwstack: --compare-to: the stand-in serves no logprobs to compare; drop --standin"
    done = bwstack("sweep", "--standin", "--retrieval", "--out", str(tmp_path / "r"))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "--retrieval: the stand-in serves no logprobs" in done.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "r").exists()  # refused before any report or container
