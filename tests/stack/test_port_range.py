"""stack.port against the kernel's ephemeral range: SGLang 0.5.23 takes its distributed-init port by binding
port 0 before uvicorn binds the serving port, so a serving port in that range can be taken from under it (seen
in this project's CI as "[Errno 98] ... address already in use"). ``validate`` warns; the shipped files do not
trip it."""

from __future__ import annotations

from pathlib import Path

import pytest

from bwstack.stack import loader
from support.stack import ROOT, edit_yaml, run_cli


def _port_warnings(warnings: list[str]) -> list[str]:
    return [w for w in warnings if "ephemeral range" in w]


@pytest.mark.parametrize("name", ["profiles.yaml", "profiles.cpu.yaml"])
def test_shipped_ports_are_below_the_ephemeral_range(name: str) -> None:
    assert _port_warnings(loader.load_stack(ROOT / name).warnings) == []


@pytest.mark.parametrize(("port", "warned"), [(30000, False), (32767, False), (32768, True), (60999, True),
                                              (61000, False)])  # fmt: skip
def test_a_port_in_the_range_is_named_with_its_line(stack_copy: Path, port: int, warned: bool) -> None:
    edit_yaml(stack_copy, lambda d: d["stack"].__setitem__("port", port))
    found = _port_warnings(loader.load_stack(stack_copy).warnings)
    assert bool(found) == warned
    if warned:
        line = next(n for n, text in enumerate(stack_copy.read_text().splitlines(), 1) if "port:" in text)
        assert found[0].startswith(f"{stack_copy}:{line}: stack.port {port} is in Linux's ephemeral range")


def test_validate_prints_it_as_a_warning_and_still_exits_0(stack_copy: Path) -> None:
    edit_yaml(stack_copy, lambda d: d["stack"].__setitem__("port", 40000))
    result = run_cli(stack_copy.parent, "validate", "-f", str(stack_copy))
    assert result.returncode == 0, result.stderr
    assert next(ln for ln in result.stderr.splitlines() if "ephemeral" in ln).startswith("bwstack: warning: ")
