"""``bwstack report verify`` and ``report merge`` on bundles that are corrupted, truncated, oversized or hostile:
each refused with one line and exit status 2, nothing written, nothing outside ``--out`` touched.

The base is a real bundle the project ships (``evidence/bundles/*.tar.gz``: a real CPU sweep); each case
rebuilds it with one thing wrong. A clean rebuild of the same parts verifies, so every refusal below is the
hostile part's doing.
"""

from __future__ import annotations

import json
import subprocess
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest

from bwstack.sweep import bundleread
from support.bundles import MIB, SHIPPED, base_parts, bundle_of, pack, regular, special, with_part
from support.stack import ROOT, run_cli


def bwstack(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(cwd, *args)


def tampered() -> bytes:
    parts = base_parts()
    manifest = parts.pop(bundleread.MANIFEST)
    parts[bundleread.RESULTS] = parts[bundleread.RESULTS].replace(b'"healthy"', b'"nan"')
    return pack([regular(bundleread.MANIFEST, manifest), *(regular(n, d) for n, d in parts.items())])


def flipped() -> bytes:
    data = bytearray(SHIPPED[0].read_bytes())
    data[len(data) // 2] ^= 0xFF
    return bytes(data)


def nested_json() -> bytes:
    return with_part(bundleread.RESULTS, b"[" * 200_000 + b"]" * 200_000)


def bad_verdict() -> bytes:
    doc = json.loads(base_parts()[bundleread.RESULTS])
    first = next(iter(doc["results"]))
    doc["results"][first]["verdict"] = {"<script>": 1}
    return with_part(bundleread.RESULTS, json.dumps(doc).encode())


def odd_host() -> bytes:
    host = json.loads(base_parts()[bundleread.HOST])
    host["host_id"] = ["not", "a", "name"]
    return with_part(bundleread.HOST, json.dumps(host).encode())


def pax_bomb() -> bytes:
    info, data = regular("run/compose.extra.yaml", b"x")
    info.pax_headers = {"comment": "A" * (40 * MIB)}  # a header, not a member: the reader must bound it too
    return bundle_of(base_parts(), (info, data))


def many_members() -> bytes:
    parts = base_parts()
    parts.update({f"run/m{i}.yaml": b"x" for i in range(bundleread.MAX_MEMBERS + 5)})
    return bundle_of(parts)


def zeros_total() -> bytes:
    parts = base_parts()
    parts.update({f"run/z{i}.yaml": bytes(7 * MIB) for i in range(5)})  # each under the member limit
    return bundle_of(parts)


CASES: dict[str, tuple[Callable[[], bytes], str]] = {
    "path escaping the folder": (
        lambda: bundle_of(base_parts(), regular("../escape.txt", b"x")),
        "plain relative",
    ),
    "absolute path": (lambda: bundle_of(base_parts(), regular("/tmp/abs.txt", b"x")), "plain relative"),
    "deep path": (lambda: bundle_of(base_parts(), regular("a/b/c.txt", b"x")), "plain relative"),
    "symlink": (
        lambda: bundle_of(base_parts(), special("run/link.yaml", tarfile.SYMTYPE, "/etc/passwd")),
        "link",
    ),
    "hard link": (
        lambda: bundle_of(base_parts(), special("run/hard.yaml", tarfile.LNKTYPE, "results.json")),
        "link",
    ),
    "folder member": (lambda: bundle_of(base_parts(), special("run", tarfile.DIRTYPE)), "folder"),
    "device": (lambda: bundle_of(base_parts(), special("run/dev", tarfile.CHRTYPE)), "device"),
    "huge member": (lambda: bundle_of(base_parts(), regular("run/big.yaml", bytes(9 * MIB))), "per member"),
    "members over the total": (zeros_total, "MiB"),
    "header bomb": (pax_bomb, "more than"),
    "too many members": (many_members, "more than"),
    "duplicate member": (lambda: bundle_of(base_parts(), regular(bundleread.RESULTS, b"{}")), "twice"),
    "member not in the manifest": (
        lambda: bundle_of(base_parts(), regular("run/extra.yaml", b"x")),
        "not in the",
    ),
    "no manifest first": (lambda: bundle_of(base_parts(), manifest=False), "first member"),
    "tampered part": (tampered, "sha256"),
    "truncated": (lambda: SHIPPED[0].read_bytes()[: len(SHIPPED[0].read_bytes()) // 2], "truncated"),
    "flipped byte": (flipped, "corrupt"),
    "not a tar.gz": (lambda: b"just some text\n" * 10, "corrupt"),
    "empty file": (lambda: b"", "corrupt"),
    "nested JSON": (nested_json, "not JSON"),
    "malformed row": (bad_verdict, "verdict"),
    "host facts of the wrong type": (odd_host, "host_id"),
}


def test_a_clean_rebuild_of_the_shipped_parts_verifies(tmp_path: Path) -> None:
    (tmp_path / "clean.tar.gz").write_bytes(bundle_of(base_parts()))
    done = bwstack(tmp_path, "report", "verify", "clean.tar.gz")
    assert done.returncode == 0, done.stderr
    assert "ok: bundle" in done.stdout


@pytest.mark.parametrize("case", list(CASES))
def test_hostile_or_broken_bundles_are_refused_and_nothing_is_written(tmp_path: Path, case: str) -> None:
    make, words = CASES[case]
    work = tmp_path / "work"
    work.mkdir()
    bad = work / "bad.tar.gz"
    bad.write_bytes(make())
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    verify = bwstack(work, "report", "verify", "bad.tar.gz")
    assert verify.returncode == 2, (verify.stdout, verify.stderr)
    lines = verify.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bwstack: bad.tar.gz: "), verify.stderr
    assert words in lines[0], lines[0]
    assert "Traceback" not in verify.stderr
    merged = bwstack(work, "report", "merge", str(SHIPPED[0]), "bad.tar.gz", "--out", "out")
    assert merged.returncode == 2, merged.stderr
    assert len(merged.stderr.strip().splitlines()) == 1
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before  # no --out, nothing else
    assert not (tmp_path / "escape.txt").exists() and not (work.parent.parent / "escape.txt").exists()


def test_an_oversized_file_is_refused_before_it_is_read(tmp_path: Path) -> None:
    big = tmp_path / "big.tar.gz"
    with big.open("wb") as fh:
        fh.truncate(bundleread.MAX_BUNDLE_BYTES + 1)  # sparse: nothing of it is ever read
    done = bwstack(tmp_path, "report", "verify", "big.tar.gz")
    assert done.returncode == 2
    assert "over the 16 MiB limit" in done.stderr


def test_merge_refuses_a_symlinked_folder_in_the_way_out(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    (out / "bundles").symlink_to(elsewhere, target_is_directory=True)
    done = bwstack(tmp_path, "report", "merge", str(SHIPPED[0]), "--out", "out")
    assert done.returncode == 2, done.stdout
    assert "outside --out" in done.stderr
    assert list(elsewhere.iterdir()) == [] and sorted(p.name for p in out.iterdir()) == ["bundles"]


def test_missing_file_is_one_line(tmp_path: Path) -> None:
    done = bwstack(tmp_path, "report", "verify", "nope.tar.gz")
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "cannot read the bundle" in done.stderr


def test_bundle_of_a_folder_without_a_report_or_of_another_stack_is_one_line(tmp_path: Path) -> None:
    missing = bwstack(ROOT, "-f", "profiles.cpu.yaml", "report", "bundle", str(tmp_path / "nope"))
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1
    assert "no sweep report here (results.json missing)" in missing.stderr
    folder = tmp_path / "report"
    folder.mkdir()
    (folder / "results.json").write_bytes(base_parts()[bundleread.RESULTS])
    doc = json.loads(base_parts()[bundleread.RESULTS])
    doc["stack"]["file"] = "profiles.elsewhere.yaml"
    (folder / "results.json").write_text(json.dumps(doc), encoding="utf-8")
    other = bwstack(ROOT, "report", "bundle", str(folder), "-o", str(tmp_path / "b.tar.gz"))  # profiles.yaml
    assert other.returncode == 2 and other.stderr.count("\n") == 1
    assert (
        "made from profiles.elsewhere.yaml, not profiles.yaml, and no profiles.elsewhere.yaml lies"
        in other.stderr
    )
    assert "pass -f PATH/profiles.elsewhere.yaml" in other.stderr
    assert not (tmp_path / "b.tar.gz").exists()


def test_bundle_takes_the_profiles_file_its_report_names(tmp_path: Path) -> None:
    """A CPU sweep's report names profiles.cpu.yaml; bundled without -f (profiles.yaml), it is bundled with
    profiles.cpu.yaml, which lies beside, and says so (no Docker: the image part records its absence)."""
    folder = tmp_path / "report"
    folder.mkdir()
    (folder / "results.json").write_bytes(base_parts()[bundleread.RESULTS])
    assert json.loads((folder / "results.json").read_text())["stack"]["file"] == "profiles.cpu.yaml"
    out = tmp_path / "b.tar.gz"
    done = run_cli(ROOT, "report", "bundle", str(folder), "-o", str(out), env={"PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(
        "bwstack: this report was made from profiles.cpu.yaml: bundling it with profiles.cpu.yaml, not "
        "profiles.yaml\n"
    ), done.stdout
    parts = bundleread.read_bundle(out).parts
    assert parts["profiles/profiles.cpu.yaml"] == (ROOT / "profiles.cpu.yaml").read_bytes()
    assert "profiles/profiles.yaml" not in parts


def test_a_bundle_made_from_this_checkout_names_its_commit() -> None:
    """The manifest's bwstack commit is this checkout's HEAD (it was None when the module moved a floor down
    and its path to the checkout went one folder short)."""
    from bwstack.sweep import bundle

    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True)
    found = bundle.source_commit()
    assert found["commit"] == head.stdout.strip()
    assert isinstance(found["dirty"], bool)
