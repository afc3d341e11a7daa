"""The bundle's redactor: secrets by value (secrets/ files, secret-named environment variables) and by pattern,
host identity on request, and no damage to the ordinary words of a log (tiktoken=, max_total_tokens=)."""

from __future__ import annotations

import base64
import json
import urllib.parse
from pathlib import Path

import pytest

from bwstack.sweep import redact

HF = "hf_" + "Qx7" * 12  # the shape of a Hugging Face token
KEY = "plainvalue-without-any-shape-91"  # no pattern knows this one: only its value in secrets/ gives it away


@pytest.fixture()
def secrets_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "secrets"
    folder.mkdir()
    (folder / "api_key").write_text(KEY + "\n", encoding="utf-8")
    (folder / "hf_token").write_text("", encoding="utf-8")  # empty: nothing to redact
    (folder / "README.md").write_text("# secrets/\nCompose mounts these files.\n", encoding="utf-8")
    return folder


def test_values_come_from_the_secrets_folder_and_the_environment(secrets_dir: Path) -> None:
    values = redact.secret_values(secrets_dir, {"MY_SERVICE_TOKEN": "env-token-value-123", "HOME": "/home/x"})
    assert KEY in values and "env-token-value-123" in values
    assert "/home/x" not in values and "" not in values
    assert not any("Compose" in v for v in values)  # README.md is documentation, not a secret


@pytest.mark.parametrize(
    ("text", "gone"),
    [
        (f"Can't load tokenizer for '/nonexistent/{HF}/x'", HF),
        ("--api-key sk-abcdefghijklmnopqrstuv", "sk-abcdefghijklmnopqrstuv"),
        ("--admin-api-key=opaque-admin-secret", "opaque-admin-secret"),
        ("Authorization: Bearer abc.def-ghi_jkl", "abc.def-ghi_jkl"),
        ("HF_TOKEN=abcdefgh123 python3 -m sglang", "abcdefgh123"),
        ('{"access_token": "zzzzzzzzzz"}', "zzzzzzzzzz"),
        ("password: hunter2hunter2", "hunter2hunter2"),
        ("ghp_" + "a" * 36, "ghp_" + "a" * 36),
        ("AKIAABCDEFGHIJKLMNOP", "AKIAABCDEFGHIJKLMNOP"),
        ("-----BEGIN RSA PRIVATE KEY-----\nMIIB\n-----END RSA PRIVATE KEY-----", "MIIB"),
    ],
)
def test_patterns_catch_secrets_nobody_declared(text: str, gone: str) -> None:
    redactor = redact.Redactor(values=[])
    out = redactor.text(text)
    assert gone not in out and redact.MARK in out
    assert redactor.counts and not redactor.leaks(out.encode())


@pytest.mark.parametrize(
    "text",
    [
        "tiktoken=0.12.0",
        "max_total_tokens=409600",
        "api_key=None, admin_api_key=None",
        "api_key='***'",
        "SGLANG_OPT_USE_GUMBEL_SAMPLE=0",
        "Uvicorn running on http://0.0.0.0:30000",
        "tokenizer_path='/root/.cache/huggingface/tiny'",
    ],
)
def test_ordinary_log_words_survive(text: str) -> None:
    redactor = redact.Redactor(values=[])
    assert redactor.text(text) == text
    assert redactor.counts == {}


def test_a_declared_value_goes_everywhere_in_data_and_keys(secrets_dir: Path) -> None:
    redactor = redact.Redactor(values=redact.secret_values(secrets_dir, {}))
    data = {"log_tail": [f"loading /m/{KEY}/w", "ok"], KEY: 1, "env": {"HF_TOKEN": "short1"}, "n": 3}
    out = redactor.data(data)
    assert KEY not in repr(out)
    assert out["env"]["HF_TOKEN"] == redact.MARK  # a secret-named key loses its value whatever it looks like
    assert out["n"] == 3 and out["log_tail"][1] == "ok"
    assert redactor.leaks(repr(data).encode()) and not redactor.leaks(repr(out).encode())


def test_host_redaction_drops_names_addresses_and_users() -> None:
    redactor = redact.Redactor(
        values=[], host=True, host_names=["gpu-node-17.example.org"], user_names=["alice"]
    )
    text = (
        "gpu-node-17.example.org listening on 10.1.2.3 and fe80::1ff:fe23:4567:890a, mac 00:1a:2b:3c:4d:5e; "
        "/home/bob/models by alice; loopback 127.0.0.1 stays; 12:01:02 stays; driver 580.82.07 stays"
    )
    out = redactor.text(text)
    for gone in ("gpu-node-17", "10.1.2.3", "fe80::1ff", "00:1a:2b", "/home/bob", "alice"):
        assert gone not in out, gone
    for kept in ("127.0.0.1", "12:01:02", "580.82.07", redact.HOST_MARK, redact.IP_MARK, redact.USER_MARK):
        assert kept in out, kept
    plain = redact.Redactor(values=[])
    assert plain.text(text) == text  # without --redact-host the host stays named


def test_a_key_with_quotes_is_found_and_redacted_in_its_json_escaped_form() -> None:
    """results.json holds argv as JSON: a key with a backslash and a quote is escaped there, so redaction and the
    last leak check use every printed form of a value (healthchecks.common.printed_forms), not its bytes alone."""
    key = 'sk-a\\b"c\tend'
    redactor = redact.Redactor(values=[key])
    doc = json.dumps({"argv": ["--tokenizer-path", f"/x/{key}"]})
    assert key not in doc and json.dumps(key)[1:-1] in doc
    assert redactor.leaks(doc.encode())
    out = redactor.text(doc)
    assert json.dumps(key)[1:-1] not in out and not redactor.leaks(out.encode())


@pytest.mark.parametrize(
    ("text", "gone"),
    [
        ("Authorization: Basic " + base64.b64encode(f"ops:{KEY}".encode()).decode(), "b3BzOnBsYWlu"),
        (f"loading {HF[:9]}\n{HF[9:]} done", HF[9:]),
        (f"loading {HF[:9]}\n{HF[9:]} done", HF[:9]),
        (
            "x " + base64.b64encode(f"token {HF}".encode()).decode(),
            base64.b64encode(f"token {HF}".encode()).decode(),
        ),
        ("u=" + urllib.parse.quote(f"key {HF}", safe="").replace("_", "%5F"), "Qx7Qx7"),
    ],
    ids=["basic-header", "split-second-half", "split-first-half", "base64", "url-encoded"],
)
def test_the_bundle_keeps_no_encoded_or_split_secret(text: str, gone: str) -> None:
    """Issue 37: report bundle kept a key base64-encoded in a Basic header and both halves of a split token."""
    redactor = redact.Redactor(values=[])
    out = redactor.text(text)
    assert gone not in out and redact.MARK in out
    assert not redactor.leaks(out.encode())


def test_a_bundled_file_is_read_within_the_part_limit(tmp_path: Path) -> None:
    """A symlinked 64 MiB compose file is refused unread (it was read whole before its size check)."""
    from bwstack.errors import UserError
    from bwstack.sweep import bundle

    huge = tmp_path / "huge.yaml"
    with huge.open("wb") as fh:
        fh.truncate(64 * 1024 * 1024)
    (tmp_path / "compose.sweep.yaml").symlink_to(huge)
    with pytest.raises(UserError, match="larger than"):
        bundle._read(tmp_path / "compose.sweep.yaml")
