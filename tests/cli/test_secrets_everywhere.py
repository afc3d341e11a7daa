"""Issue 37, secrets both ways: ``validate`` refuses a secret in a profile's ``env`` or ``extra_args`` in every
form the issue lists (naming the field, never printing the value), ``classify-log`` (text and ``--json``) never
prints the token of a failing line, and an error line never carries a URL's password (``calibrate --url``)."""

from __future__ import annotations

import base64
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from support.stack import ROOT, edit_yaml, run_cli

HF = "hf_" + "Qx7" * 12
SK = "sk-" + "Ab3" * 8
GHP = "ghp_" + "Zz9" * 12
PLAIN = "opaque-value-1234"  # no shape: only its name gives it away


def _env(name: str, value: str) -> Callable[[Any], None]:
    def edit(doc: Any) -> None:
        doc["profiles"]["dense-fi-bf16"]["env"] = {name: value}

    return edit


def _arg(token: str) -> Callable[[Any], None]:
    def edit(doc: Any) -> None:
        doc["profiles"]["dense-fi-bf16"]["extra_args"] = ["--served-model-name", token]

    return edit


CASES = {
    "GITHUB_TOKEN": (_env("GITHUB_TOKEN", PLAIN), PLAIN),
    "API_KEY": (_env("API_KEY", PLAIN), PLAIN),
    "HUGGINGFACEHUB_API_TOKEN": (_env("HUGGINGFACEHUB_API_TOKEN", PLAIN), PLAIN),
    "HF_HUB_TOKEN": (_env("HF_HUB_TOKEN", PLAIN), PLAIN),
    "bearer-under-an-innocent-name": (_env("EXTRA_HEADER", f"Bearer {SK}"), SK),
    "hf-token-as-a-value": (_env("MODEL_NOTE", HF), HF),
    "base64-basic-header": (
        _env("HEADERS", "Authorization: Basic " + base64.b64encode(f"ops:{PLAIN}".encode()).decode()),
        base64.b64encode(f"ops:{PLAIN}".encode()).decode(),
    ),
    "ghp-password-in-an-extra-args-url": (_arg(f"https://x:{GHP}@example.com/m"), GHP),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_validate_refuses_a_secret_in_env_or_extra_args(case: str, stack_copy: Path) -> None:
    edit, value = CASES[case]
    edit_yaml(stack_copy, edit)
    result = run_cli(stack_copy.parent, "validate", "-f", str(stack_copy))
    assert result.returncode == 2, (result.stdout, result.stderr)
    line = result.stderr.strip().splitlines()[-1]
    assert "profiles.dense-fi-bf16" in line and "secret" in line, line
    assert value not in result.stdout + result.stderr
    assert "Traceback" not in result.stderr


def test_classify_log_never_prints_the_token_of_the_failing_line(tmp_path: Path) -> None:
    source = ROOT / "tests" / "healthchecks" / "logs" / "import_error_vllm.log"
    log = tmp_path / "server.log"
    text = source.read_text(encoding="utf-8").replace(
        "ImportError: cannot import name", f"ImportError: token {HF} cannot import name"
    )
    log.write_text(text, encoding="utf-8")
    for args in ((), ("--json",)):
        result = run_cli(tmp_path, "classify-log", *args, str(log))
        assert result.returncode == 0, result.stderr
        assert HF not in result.stdout and "Qx7Qx7" not in result.stdout
    assert "[redacted]" in result.stdout and "import_error" in result.stdout


def test_an_error_line_never_carries_a_url_password(stack_copy: Path) -> None:
    """calibrate --url http://ops:sk-…@host: the closed port's error names the URL without its password."""
    url = f"http://ops:{SK}@127.0.0.1:9"
    result = run_cli(
        stack_copy.parent, "-f", "profiles.cpu.yaml", "calibrate", "cpu-torch-native", "--url", url
    )
    assert result.returncode != 0
    assert SK not in result.stdout + result.stderr, result.stderr
    assert "127.0.0.1:9" in result.stderr and "Traceback" not in result.stderr
