"""``bwstack compare`` refusals, run as a user would (a subprocess): one line, no traceback, exit 2 for bad
input and exit 1 when a server does not answer. The comparison itself runs against real SGLang in
tests/real/test_real_compare.py."""

from __future__ import annotations

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
