"""``report merge`` at scale: cost per row and per bundle against one bundle, measured in the same run.

The bundles are the project's real shipped bundle (``evidence/bundles/*.tar.gz``: a real CPU sweep) rebuilt
with N rows (its first row copied under new profile names) or as M bundles of distinct hosts, each written to
a scratch folder as a real bundle file. Each case runs what ``bwstack report merge`` runs, in process: read
and verify every bundle (``bundleread.read_bundle``: bounds, manifest digests, the secret scan, the shapes),
then build every output in memory (``reportmerge.outputs``: merged.json, matrix.md, matrix.html and each
bundle's own page). Printed per case: the median of --repeat runs; per bundle count, the cost per bundle and
its ratio to one bundle merged alone in this run (1.0 = linear); per row count, the cost per row beyond the
one bundle's and its ratio to the smallest row count's (1.0 = linear). Nothing asserts on speed. Run from the
repository root:

    .venv/bin/python benchmarks/merge_scale.py [--repeat N]
"""

from __future__ import annotations

import argparse
import copy
import gzip
import hashlib
import io
import json
import statistics
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from _common import add_smoke

ROOT = Path(__file__).resolve().parents[1]
#: row counts; the larger stays under the bundle reader's 8 MiB per member (bundleread.MAX_MEMBER_BYTES) with
#: the shipped bundle's rows (about 3 KiB of results.json each): 3000 rows were 9.3 MB, a bundle it refuses
ROWS = (1000, 2000)
BUNDLES = (100, 500)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per case (median printed)")
    add_smoke(parser)
    args = parser.parse_args(argv)
    if args.smoke:  # one run of the smallest row and bundle counts
        args.repeat = 1
    return args


def shipped_parts() -> dict[str, bytes]:
    from bwstack.sweep import bundleread

    source = sorted((ROOT / "evidence" / "bundles").glob("*.tar.gz"))[0]
    return dict(bundleread.read_bundle(source).parts)


def pack(parts: dict[str, bytes], created: str) -> bytes:
    manifest = json.loads(parts["manifest.json"])
    manifest["created_at"] = created
    manifest["parts"] = [
        {"name": n, "sha256": hashlib.sha256(d).hexdigest(), "bytes": len(d)}
        for n, d in parts.items()
        if n != "manifest.json"
    ]
    members = {"manifest.json": json.dumps(manifest).encode()}
    members.update((n, d) for n, d in parts.items() if n != "manifest.json")
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return gzip.compress(raw.getvalue(), mtime=0)


def with_rows(parts: dict[str, bytes], rows: int) -> dict[str, bytes]:
    doc = json.loads(parts["results.json"])
    first = next(iter(doc["results"].values()))
    tail = first["evidence"].get("log_tail")
    first["evidence"]["log_tail"] = (
        tail[-1:] if isinstance(tail, list) else str(tail or "")[-200:]
    )  # not 4 KB
    doc["results"], doc["plan"] = {}, []
    for i in range(rows):
        name = f"p{i:05d}"
        row = copy.deepcopy(first)
        row["profile"] = name
        doc["results"][name] = row
        doc["plan"].append(name)
    return {**parts, "results.json": json.dumps(doc).encode()}


def with_host(parts: dict[str, bytes], index: int) -> dict[str, bytes]:
    host = json.loads(parts["host.json"])
    host["host_id"] = f"host-{index:06d}"
    return {**parts, "host.json": json.dumps(host).encode()}


def timed_merge(paths: list[Path], repeat: int) -> float:
    from bwstack import record
    from bwstack.sweep import bundleread, reportmerge

    runs = []
    for _ in range(repeat):
        started = time.perf_counter()
        bundles = [bundleread.read_bundle(p) for p in paths]
        files = reportmerge.outputs(bundles)
        runs.append(time.perf_counter() - started)
        assert record.MERGED_FILE in files
    return statistics.median(runs)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    sys.path.insert(0, str(ROOT / "src"))
    parts = shipped_parts()
    base_rows = len(json.loads(parts["results.json"])["results"])
    with tempfile.TemporaryDirectory(prefix="bwstack-merge-") as scratch:
        folder = Path(scratch)
        one = folder / "one.bundle.tar.gz"
        one.write_bytes(pack(parts, "2026-12-04T00:00:00Z"))
        timed_merge([one], 1)  # warm: imports and the compiled templates are paid once per process
        base = timed_merge([one], args.repeat)
        print(f"1 bundle, {base_rows} rows: {base * 1000:.1f} ms ({base / base_rows * 1000:.2f} ms per row)")
        first_per_row = 0.0
        for rows in ROWS[:1] if args.smoke else ROWS:
            path = folder / f"rows{rows}.bundle.tar.gz"
            path.write_bytes(pack(with_rows(parts, rows), "2026-12-04T00:00:00Z"))
            took = timed_merge([path], args.repeat)
            per_row = (took - base) / rows  # the rows' own cost, the one bundle's fixed cost taken off
            first_per_row = first_per_row or per_row
            size = path.stat().st_size // 1024
            print(f"1 bundle, {rows} rows ({size} KiB): {took:.2f} s ({per_row * 1000:.2f} ms per row, "
                  f"x{per_row / first_per_row:.2f} the {ROWS[0]}-row cost per row)")  # fmt: skip
        for count in BUNDLES[:1] if args.smoke else BUNDLES:
            paths = []
            for i in range(count):
                path = folder / f"host{i}.bundle.tar.gz"
                path.write_bytes(pack(with_host(parts, i), f"2026-12-04T00:{i // 60:02d}:{i % 60:02d}Z"))
                paths.append(path)
            took = timed_merge(paths, args.repeat)
            ratio = (took / count) / base
            each = took / count * 1000
            print(f"{count} bundles of {base_rows} rows: {took:.2f} s ({each:.1f} ms per bundle, "
                  f"x{ratio:.2f} the one-bundle cost)")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
