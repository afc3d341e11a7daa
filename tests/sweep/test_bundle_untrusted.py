"""Issue 37: bundles from strangers are untrusted input. Built from the real shipped bundle with one hostile
change each: a secret in any form is refused by ``verify`` and ``merge`` (the part and field named, the value
never printed); host facts that contradict the verdicts are doubted by ``verify`` and kept apart as untrusted
by ``merge``; a sweep bundled twice counts once; a second archive appended is refused; NaN never passes."""

from __future__ import annotations

import base64
import gzip
import io
import json
import tarfile
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bwstack import record
from bwstack.sweep import bundleread, reportmerge
from support.bundles import GPU_HOST, SHIPPED, base_parts, bundle_of, manifest_for, pack, regular
from support.stack import run_cli

HF = "hf_" + "Qx7" * 12
SK = "sk-" + "Ab3" * 8
PROFILES = next(n for n in base_parts() if n.startswith("profiles/"))
RUN = next(n for n in base_parts() if n.startswith("run/"))


def _json_edit(name: str, edit: Callable[[Any], None]) -> dict[str, bytes]:
    parts = base_parts()
    doc = json.loads(parts[name])
    edit(doc)
    parts[name] = json.dumps(doc).encode()
    return parts


def _text_edit(name: str, extra: str) -> dict[str, bytes]:
    parts = base_parts()
    parts[name] = parts[name] + extra.encode()
    return parts


def _set(key: str, value: Any) -> Callable[[Any], None]:
    def edit(doc: Any) -> None:
        doc[key] = value

    return edit


SECRETS: dict[str, tuple[Callable[[], dict[str, bytes]], str, str]] = {
    "hf token as the host name": (lambda: _json_edit(bundleread.HOST, _set("hostname", HF)), HF, "host.json"),
    "url-encoded token in matrix.md": (
        lambda: _text_edit(bundleread.MARKDOWN, "\n" + urllib.parse.quote(f"t {HF}", safe="") + "\n"),
        "Qx7Qx7",
        "matrix.md",
    ),
    "base64 token in a log line": (
        lambda: _text_edit(RUN, f"\n# {base64.b64encode(f'token {HF}'.encode()).decode()}\n"),
        base64.b64encode(f"token {HF}".encode()).decode(),
        RUN,
    ),
    "token split over two lines": (lambda: _text_edit(RUN, f"\n# {HF[:10]}\n{HF[10:]}\n"), HF[10:], RUN),
    "--api-key sk-... in the profiles": (
        lambda: _text_edit(PROFILES, f"\n# extra_args: [--api-key, {SK}]\n# --api-key {SK}\n"),
        SK,
        PROFILES,
    ),
}


@pytest.mark.parametrize("case", sorted(SECRETS))
def test_a_bundle_carrying_a_secret_is_refused_by_verify_and_merge(tmp_path: Path, case: str) -> None:
    make, value, part = SECRETS[case]
    (tmp_path / "bad.tar.gz").write_bytes(bundle_of(make()))
    verify = run_cli(tmp_path, "report", "verify", "bad.tar.gz")
    assert verify.returncode == 2, verify.stdout
    line = verify.stderr.strip()
    assert "\n" not in line and "carries a secret" in line and part in line, line
    assert value not in verify.stdout + verify.stderr
    merged = run_cli(tmp_path, "report", "merge", str(SHIPPED[0]), "bad.tar.gz", "--out", "out")
    assert merged.returncode == 2 and value not in merged.stderr
    assert not (tmp_path / "out").exists()


def _gpu_claim(**host: Any) -> dict[str, bytes]:
    """The shipped CPU sweep's rows claimed as sm120 GPU verdicts, with ``host`` facts."""
    parts = _json_edit(bundleread.RESULTS, lambda doc: doc["stack"].update(gpu_arch="sm120"))
    facts = json.loads(parts[bundleread.HOST])
    facts.update(host)
    parts[bundleread.HOST] = json.dumps(facts).encode()
    return parts


GOOD_HOST = GPU_HOST
DOUBTS = {
    "sm120 verdicts from a host with 0 GPUs and no driver": (_gpu_claim(), "results.json"),
    "an H100 recorded as sm120": (
        _gpu_claim(**{**GOOD_HOST, "gpu_model": "NVIDIA H100 80GB HBM3"}),
        "gpu_arch",
    ),
    "10**30 GPUs": (_gpu_claim(**{**GOOD_HOST, "gpu_count": 10**30}), "gpu_count"),
}


@pytest.mark.parametrize("case", sorted(DOUBTS))
def test_facts_that_contradict_the_verdicts_are_doubted_and_merged_as_untrusted(
    tmp_path: Path, case: str
) -> None:
    parts, field = DOUBTS[case]
    (tmp_path / "odd.tar.gz").write_bytes(bundle_of(parts))
    verify = run_cli(tmp_path, "report", "verify", "odd.tar.gz")
    assert verify.returncode == 2, verify.stdout
    assert "doubtful" in verify.stderr and field in verify.stderr, verify.stderr
    merged = run_cli(tmp_path, "report", "merge", "odd.tar.gz", "--out", "out")
    assert merged.returncode == 0, merged.stderr
    doc = json.loads((tmp_path / "out" / record.MERGED_FILE).read_text(encoding="utf-8"))
    assert {c["section"] for c in doc["cells"]} == {reportmerge.UNTRUSTED}
    assert reportmerge.SECTIONS["gpu"] not in (tmp_path / "out" / "matrix.md").read_text(encoding="utf-8")
    assert next(iter(doc["bundles"].values()))["doubts"]


def test_a_consistent_gpu_bundle_verifies_and_merges_as_hardware_truth(tmp_path: Path) -> None:
    (tmp_path / "gpu.tar.gz").write_bytes(bundle_of(_gpu_claim(**GOOD_HOST)))
    verify = run_cli(tmp_path, "report", "verify", "gpu.tar.gz")
    assert verify.returncode == 0, verify.stderr
    merged = run_cli(tmp_path, "report", "merge", "gpu.tar.gz", "--out", "out")
    doc = json.loads((tmp_path / "out" / record.MERGED_FILE).read_text(encoding="utf-8"))
    assert merged.returncode == 0 and {c["section"] for c in doc["cells"]} == {"gpu"}


def test_a_row_with_verdict_twice_is_refused(tmp_path: Path) -> None:
    parts = base_parts()
    first = next(iter(json.loads(parts[bundleread.RESULTS])["results"]))
    text = parts[bundleread.RESULTS].decode()
    at = text.index(f'"{first}": {{') + len(f'"{first}": {{')
    parts[bundleread.RESULTS] = (text[:at] + '"verdict": "healthy", ' + text[at:]).encode()
    (tmp_path / "twice.tar.gz").write_bytes(bundle_of(parts))
    verify = run_cli(tmp_path, "report", "verify", "twice.tar.gz")
    assert verify.returncode == 2 and "'verdict' appears twice" in verify.stderr, verify.stderr


def test_a_row_field_of_another_type_than_the_records_is_refused(tmp_path: Path) -> None:
    """``scores`` is checked by no bundle-specific rule: the record's type (the one reader) refuses it."""

    def edit(doc: Any) -> None:
        doc["results"][next(iter(doc["results"]))]["scores"] = "high"

    (tmp_path / "typed.tar.gz").write_bytes(bundle_of(_json_edit(bundleread.RESULTS, edit)))
    verify = run_cli(tmp_path, "report", "verify", "typed.tar.gz")
    assert verify.returncode == 2, verify.stderr
    assert ".scores: malformed sweep report: expected dict, got str" in verify.stderr, verify.stderr


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "1e309"])
def test_nan_and_infinity_are_refused(tmp_path: Path, literal: str) -> None:
    parts = base_parts()
    parts[bundleread.HOST] = parts[bundleread.HOST].replace(b'"cpus": 2', f'"cpus": {literal}'.encode())
    assert literal.encode() in parts[bundleread.HOST]
    (tmp_path / "nan.tar.gz").write_bytes(bundle_of(parts))
    verify = run_cli(tmp_path, "report", "verify", "nan.tar.gz")
    assert verify.returncode == 2 and "finite" in verify.stderr, verify.stderr


def test_the_same_sweep_bundled_twice_counts_once(tmp_path: Path) -> None:
    parts = base_parts()
    manifest = json.loads(manifest_for(parts))
    manifest["created_at"] = "2026-12-04T00:00:00Z"  # bundled again later: another bundle id, the same sweep
    members = [regular(bundleread.MANIFEST, json.dumps(manifest).encode())]
    members += [regular(n, d) for n, d in parts.items() if n != bundleread.MANIFEST]
    (tmp_path / "again.tar.gz").write_bytes(pack(members))
    second = bundleread.read_bundle(tmp_path / "again.tar.gz")
    first = bundleread.read_bundle(SHIPPED[0])
    assert second.id != first.id
    merged = run_cli(tmp_path, "report", "merge", str(SHIPPED[0]), "again.tar.gz", "--out", "out")
    assert merged.returncode == 0, merged.stderr
    doc = json.loads((tmp_path / "out" / record.MERGED_FILE).read_text(encoding="utf-8"))
    assert len(doc["bundles"]) == 1
    assert all(sum(c["verdicts"].values()) == 1 for c in doc["cells"])


def _second_archive() -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for name, data in (("../escape.txt", b"x"), ("run/token.txt", HF.encode())):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return raw.getvalue()


@pytest.mark.parametrize("how", ["second gzip member", "inside the same gzip stream"])
def test_an_archive_appended_after_the_end_is_refused(tmp_path: Path, how: str) -> None:
    clean = bundle_of(base_parts())
    if how == "second gzip member":
        data = clean + gzip.compress(_second_archive())
    else:
        data = gzip.compress(gzip.decompress(clean) + _second_archive())
    (tmp_path / "two.tar.gz").write_bytes(data)
    verify = run_cli(tmp_path, "report", "verify", "two.tar.gz")
    assert verify.returncode == 2, verify.stdout
    assert "after the end of the archive" in verify.stderr and HF not in verify.stderr
    merged = run_cli(tmp_path, "report", "merge", "two.tar.gz", "--out", "out")
    assert merged.returncode == 2 and not (tmp_path / "out").exists()


def test_pack_of_a_clean_bundle_still_verifies(tmp_path: Path) -> None:
    """The control: the cases above fail for their change only."""
    (tmp_path / "clean.tar.gz").write_bytes(pack([regular(n, d) for n, d in base_parts().items()]))
    assert run_cli(tmp_path, "report", "verify", "clean.tar.gz").returncode == 0


def test_verify_and_merge_agree_on_deep_json(tmp_path: Path) -> None:
    """JSON 977 deep: verify accepted it and merge crashed (RecursionError); both now refuse it alike."""
    parts = base_parts()
    doc = json.loads(parts[bundleread.HOST])
    doc["topology"] = None
    text = json.dumps(doc).replace('"topology": null', '"topology": ' + "[" * 977 + "]" * 977)
    parts[bundleread.HOST] = text.encode()
    (tmp_path / "deep.tar.gz").write_bytes(bundle_of(parts))
    verify = run_cli(tmp_path, "report", "verify", "deep.tar.gz")
    merged = run_cli(tmp_path, "report", "merge", "deep.tar.gz", "--out", "out")
    for done in (verify, merged):
        assert done.returncode == 2 and "levels deep" in done.stderr and "Traceback" not in done.stderr
