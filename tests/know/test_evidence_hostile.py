"""Issue 37: the shipped ``evidence/merged.json`` is read by ``list``, ``validate`` and ``up --dry-run`` on every
host, so it is untrusted input: nesting, digits, wrong types and size are one line and exit 2 (never a
traceback, never hundreds of MB), and escapes recorded in a verdict never reach the terminal raw."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from support.stack import ROOT, run_cli

COMMANDS = (("validate",), ("list",), ("up", "--dry-run", "cpu-torch-native"))


@pytest.fixture()
def evidence_stack(stack_copy: Path) -> Path:
    """A scratch copy of the stack (the CPU profiles among it) with the shipped evidence/merged.json."""
    root = stack_copy.parent
    (root / "evidence").mkdir()
    shutil.copy2(ROOT / "evidence" / "merged.json", root / "evidence" / "merged.json")
    return root


def _cli(root: Path, *args: str) -> Any:
    return run_cli(root, "-f", "profiles.cpu.yaml", *args, timeout=60)


def _edit(edit: Callable[[dict[str, Any]], None]) -> Callable[[Path], None]:
    def write(path: Path) -> None:
        doc = json.loads(path.read_text(encoding="utf-8"))
        edit(doc)
        path.write_text(json.dumps(doc), encoding="utf-8")

    return write


def _raw(text: str) -> Callable[[Path], None]:
    return lambda path: path.write_text(text, encoding="utf-8")


def _first_cell(doc: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in doc["cells"] if c["profile"] == "cpu-torch-native")


def _digits(path: Path) -> None:
    """A count of 5000 digits (past Python's own 4300-digit conversion limit)."""
    _edit(lambda doc: _first_cell(doc).update(verdicts={"healthy": 987654321}))(path)
    path.write_text(path.read_text(encoding="utf-8").replace("987654321", "9" * 5000), encoding="utf-8")


def _symlink_to_huge(path: Path) -> None:
    huge = path.parent / "huge.json"
    with huge.open("wb") as fh:
        fh.truncate(200 * 1024 * 1024)  # sparse: never read whole
    path.unlink()
    path.symlink_to(huge)


BROKEN: dict[str, tuple[Callable[[Path], None], str]] = {
    "100k-deep nesting": (_raw('{"a":' * 100_000 + "1" + "}" * 100_000), "levels deep"),
    "5000-digit count": (_digits, "digits"),
    "verdicts a number": (_edit(lambda doc: _first_cell(doc).update(verdicts=7)), "verdicts"),
    "host a list": (_edit(lambda doc: _first_cell(doc)["seen"][0].update(host=["a", "b"])), "host"),
    "symlink to 200 MiB": (_symlink_to_huge, "larger than"),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_broken_evidence_is_one_line_exit_2(
    evidence_stack: Path, case: str, command: tuple[str, ...]
) -> None:
    mutate, words = BROKEN[case]
    mutate(evidence_stack / "evidence" / "merged.json")
    done = _cli(evidence_stack, *command)
    assert done.returncode == 2, (done.stdout[-500:], done.stderr[-500:])
    errors = [ln for ln in done.stderr.splitlines() if not ln.startswith("bwstack: warning:")]
    assert len(errors) == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert "evidence" in errors[0] and words in errors[0], errors[0]


ESCAPES = {"ansi": "\x1b[2J\x1b[31mhealthy", "osc": "\x1b]0;owned\x07healthy", "rtl": "healthy\u202edeen"}


@pytest.mark.parametrize("escape", sorted(ESCAPES))
@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_escapes_in_a_recorded_verdict_never_reach_the_terminal(
    evidence_stack: Path, escape: str, command: tuple[str, ...]
) -> None:
    verdict = ESCAPES[escape]

    def plant(doc: dict[str, Any]) -> None:
        cell = _first_cell(doc)
        cell["verdicts"] = {verdict: 1}
        for run in cell["seen"]:
            run["verdict"] = verdict

    _edit(plant)(evidence_stack / "evidence" / "merged.json")
    done = _cli(evidence_stack, *command)
    out = done.stdout + done.stderr
    assert "\x1b" not in out and "\u202e" not in out and "\x07" not in out, out[-800:]
    assert "Traceback" not in out
