"""Issue 37, item 6: a value placed in an argv is validated (an image reference is an image reference, never an
option such as ``--help``), and names are matched with ``\\Z`` (``x\\n`` is no variant name; ``..``, an empty
name or 300 characters are refused as names before they touch the file system)."""

from __future__ import annotations

import pytest

from bwstack.stack import pins
from support.stack import ROOT, run_cli


@pytest.mark.parametrize(
    "args",
    [
        ("audit", "--image=--help"),
        ("audit", "--image=-v"),
        ("audit", "--image=x\n"),
        ("lock", "--inspect", "v0.5.9-cu130", "--image=--help"),
    ],
    ids=["audit-help", "audit-option", "audit-newline", "lock-inspect-help"],
)
def test_an_image_option_takes_only_an_image_reference(args: tuple[str, ...]) -> None:
    done = run_cli(ROOT, *args)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "is not an image reference" in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "ref",
    [
        "lmsysorg/sglang:v0.5.9-cu130",
        "bwstack-sglang:v0.5.23-cu130",
        "localhost:5000/team/sglang:dev",
        "ghcr.io/owner/image@sha256:" + "ab" * 32,
        "sha256:" + "0f" * 32,
        "0f0f0f0f0f0f",
    ],
)
def test_real_image_references_pass(ref: str) -> None:
    assert pins.IMAGE_REF.match(ref)


@pytest.mark.parametrize("ref", ["--help", "-x", "x\n", "Upper/Case", "a b", "x;rm", ""])
def test_anything_else_is_no_image_reference(ref: str) -> None:
    assert not pins.IMAGE_REF.match(ref)


@pytest.mark.parametrize("name", ["x\n", "", "..", "a" * 300, "../escape", "x/y"])
def test_variant_new_refuses_a_bad_name_before_touching_files(name: str) -> None:
    done = run_cli(ROOT, "variant", "new", name, "--sglang", "0.5.23", "--from", "v0.5.23-cu130")
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "invalid variant name" in done.stderr and "exists already" not in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
