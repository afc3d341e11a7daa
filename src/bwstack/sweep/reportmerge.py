"""``bwstack report merge FILE... --out DIR``: many hosts' bundles as one matrix with provenance.

Each cell is one (section, arch, image variant, profile) and holds every verdict seen for it: how many runs,
on which hosts, drivers, image digests and dates, each linked to its evidence (the bundle's own matrix page,
``bundles/<id>/matrix.html#profile-<name>``). A cell whose runs disagree is marked and lists the facts that
differ between the verdicts (driver, image digest, GPU count, topology, …). Sections keep kinds of truth
apart: ``gpu`` (real GPU hosts), ``cpu`` (real SGLang on a CPU: no GPU kernel ran); stand-in rows are
counted and never merged. Everything is built in memory from verified bundles
(:mod:`bwstack.sweep.bundleread`)
and only then written, each file atomically, under ``--out`` alone: ``merged.json``, ``matrix.md``,
``matrix.html`` and, per bundle, ``bundles/<id>.tar.gz`` with its views in ``bundles/<id>/``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

from bwstack import record
from bwstack.errors import UserError
from bwstack.files import atomic_write_bytes, need_folder, refuse_overwrite
from bwstack.host.doctor.record import summary
from bwstack.record import MERGED_FILE, utc_now
from bwstack.record import MERGED_FORMAT as FORMAT
from bwstack.record import MERGED_FORMAT_VERSION as FORMAT_VERSION
from bwstack.record.types import Cell, Document, Merged, Row, Seen
from bwstack.sweep import bundleread, report
from bwstack.sweep.bundleread import Bundle
from healthchecks import untrusted

STANDIN = "stand-in"
#: the section of a GPU row whose bundle bundleread.doubts (0 GPUs and no driver, an H100 called sm120 …)
UNTRUSTED = "untrusted"
BUNDLES_DIR = "bundles"
SECTIONS = {
    "gpu": "GPU hosts: hardware truth",
    "cpu": "real SGLang on the CPU: no GPU kernel ran, not GPU hardware truth",
    UNTRUSTED: "untrusted: the bundle's host facts and verdicts disagree (bwstack report verify says how), "
    "not hardware truth",
}
#: the facts compared between the runs of a cell whose verdicts disagree, in report order
DIFF_FIELDS = (
    "driver",
    "cuda",
    "image_digest",
    "gpu_count",
    "topology",
    "gpu_model",
    "sglang",
    "kernel",
    "cpus",
    "fast",
)


def section_of(doc: Document, row: Row) -> str:
    """``stand-in`` for a stand-in row, ``cpu`` for a CPU stack's, else ``gpu``."""
    if row.get("standin") or doc["mode"].get("standin"):
        return STANDIN
    return "cpu" if doc["stack"].get("gpu_arch") == "cpu" else "gpu"


def _short_digest(image: dict[str, Any]) -> str | None:
    digest = image.get("id")
    return str(digest) if isinstance(digest, str) and digest else None


def _sglang(doc: Document, row: Row) -> str | None:
    version = (row.get("evidence") or {}).get("server_version")
    if version:
        return str(version)
    manifest = doc["variants"].get(str(row["variant"])) or {}
    sglang = manifest.get("sglang") if isinstance(manifest, dict) else None
    return str(sglang.get("version")) if isinstance(sglang, dict) and sglang.get("version") else None


def entries(bundle: Bundle) -> list[dict[str, Any]]:
    """One entry per decided row of a bundle: the verdict, the host facts, the image, the evidence link."""
    doc, host, images = bundle.results, bundle.host, bundle.images
    doubtful = bool(bundleread.doubts(bundle))
    out = []
    for name in report.decided(doc):
        row = doc["results"][name]
        section = section_of(doc, row)
        if section == "gpu" and doubtful:
            section = UNTRUSTED
        arch = "cpu" if section == "cpu" else str(host.get("gpu_arch") or doc["stack"].get("gpu_arch") or "?")
        variant = str(row["variant"])  # a string: bundleread.check_results
        image = images.get(variant) if isinstance(images.get(variant), dict) else {}
        out.append(
            {
                "section": section,
                "arch": arch,
                "variant": row["variant"],
                "profile": name,
                "expect": row.get("expect"),
                "verdict": row["verdict"],
                "fast": bool(row.get("fast")),
                "requested": (row.get("evidence") or {}).get("requested") or {},
                "model": row.get("model"),
                "bundle": bundle.id,
                "host": host.get("host_id"),
                "hostname": host.get("hostname"),
                "driver": host.get("driver"),
                "cuda": host.get("cuda"),
                "gpu_model": host.get("gpu_model"),
                "gpu_count": host.get("gpu_count"),
                "topology": host.get("topology"),
                "kernel": host.get("kernel"),
                "cpus": host.get("cpus"),
                "image_digest": (row.get("evidence") or {}).get("image_id") or _short_digest(image or {}),
                "sglang": _sglang(doc, row),
                "date": row.get("finished_at") or doc["updated_at"],
                "evidence": f"{BUNDLES_DIR}/{bundle.id}/matrix.html#profile-{name}",
            }
        )
    return out


def _fact(value: Any) -> str:
    return "none" if value is None else str(value)


def _differs(seen: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The facts whose values differ between the verdicts of one cell."""
    verdicts = sorted({e["verdict"] for e in seen})
    if len(verdicts) < 2:
        return []
    out = []
    for field in DIFF_FIELDS:
        by_verdict = {v: sorted({_fact(e.get(field)) for e in seen if e["verdict"] == v}) for v in verdicts}
        if len({tuple(values) for values in by_verdict.values()}) > 1:
            out.append({"field": field, "by_verdict": by_verdict})
    return out


def distinct(bundles: Sequence[Bundle]) -> list[Bundle]:
    """The bundles, each sweep once (by content: :func:`bundleread.content_key`), in the order given."""
    found: dict[str, Bundle] = {}
    for bundle in bundles:
        found.setdefault(bundleread.content_key(bundle), bundle)
    return list(found.values())


def merge(bundles: Sequence[Bundle]) -> Merged:
    """The merged document (``merged.json``): bundles, cells, stand-in rows left out."""
    unique = distinct(bundles)
    cells: dict[tuple[str, str, str, str], list[dict[str, Any]]] = {}
    standin = 0
    for bundle in unique:
        for entry in entries(bundle):
            if entry["section"] == STANDIN:
                standin += 1
                continue
            key = (entry["section"], entry["arch"], entry["variant"], entry["profile"])
            cells.setdefault(key, []).append(entry)
    out_cells: list[Cell] = []
    for (section, arch, variant, profile), seen in sorted(cells.items()):
        seen.sort(key=lambda e: (str(e["date"]), e["bundle"]))
        counts: dict[str, int] = {}
        for e in seen:
            counts[e["verdict"]] = counts.get(e["verdict"], 0) + 1
        out_cells.append(
            {
                "section": section,
                "arch": arch,
                "variant": variant,
                "profile": profile,
                "expect": sorted({str(e["expect"]) for e in seen}),
                "requested": seen[-1]["requested"],
                "model": seen[-1]["model"],
                "verdicts": dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))),
                "agree": len(counts) == 1,
                "hosts": sorted({str(e["host"]) for e in seen}),
                "drivers": sorted({str(e["driver"]) for e in seen if e["driver"]}),
                "image_digests": sorted({str(e["image_digest"]) for e in seen if e["image_digest"]}),
                "dates": [str(seen[0]["date"]), str(seen[-1]["date"])],
                "differs": _differs(seen),
                "seen": cast(
                    list[Seen],
                    [{k: v for k, v in e.items() if k not in ("requested", "model")} for e in seen],
                ),
            }
        )
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "generated_at": utc_now(),
        "bundles": {
            b.id: {
                "file": f"{BUNDLES_DIR}/{b.id}.tar.gz",
                "view": f"{BUNDLES_DIR}/{b.id}/matrix.html",
                "host": b.host.get("host_id"),
                "host_summary": host_summary(b.host),
                "host_redacted": bool(b.manifest.get("host_redacted")),
                "report": (b.manifest.get("report") or {}).get("name"),
                "created_at": b.manifest.get("created_at"),
                "bwstack": b.manifest.get("bwstack"),
                "source": b.results["mode"].get("source"),
                "sections": sorted({section_of(b.results, r) for r in b.results["results"].values()}),
                "doubts": [f"{field}: {why}" for field, why in bundleread.doubts(b)],
            }
            for b in unique
        },
        "cells": out_cells,
        "standin_rows_left_out": standin,
    }


def host_summary(facts: dict[str, Any]) -> str:
    """One line on a bundle's host (doctor.record's words)."""

    return summary(facts)


def verdict_words(cell: Cell) -> str:
    """``healthy x2 on 2 hosts`` / ``healthy x1, timeout x1 on 2 hosts: disagree``."""
    counts = ", ".join(f"{v} x{n}" for v, n in cell["verdicts"].items())
    hosts = len(cell["hosts"])
    return f"{counts} on {hosts} host{'s' if hosts != 1 else ''}" + ("" if cell["agree"] else ": disagree")


def differs_words(cell: Cell) -> list[str]:
    """``driver: healthy 580.82.07; nan 595.58.03`` per differing fact."""
    return [
        f"{d['field']}: " + "; ".join(f"{v} {', '.join(values)}" for v, values in d["by_verdict"].items())
        for d in cell["differs"]
    ]


def _tone(cell: Cell) -> str:
    if not cell["agree"]:
        return "warn"
    return report.verdict_tone(next(iter(cell["verdicts"])))


def grids(doc: Merged) -> list[dict[str, Any]]:
    """Per section and arch, today's grid (report.grids: backend combination x varied field, per variant)
    whose entries are merged cells."""
    out = []
    for section, words in SECTIONS.items():
        for arch in sorted({c["arch"] for c in doc["cells"] if c["section"] == section}):
            chosen = {
                f"c{i}": c
                for i, c in enumerate(doc["cells"])
                if c["section"] == section and c["arch"] == arch
            }
            shaped = {
                "plan": list(chosen),
                "results": {
                    key: {
                        "variant": c["variant"],
                        "model": c["model"],
                        "verdict": next(iter(c["verdicts"])) if c["agree"] else "disagree",
                        "expect": "/".join(c["expect"]),
                        "match": c["agree"] and list(c["verdicts"]) == c["expect"],
                        "evidence": {"requested": c["requested"]},
                    }
                    for key, c in chosen.items()
                },
            }
            for grid in report.grids(cast(Document, shaped)):
                for row in grid["rows"]:
                    row["cells"] = [[chosen[e["profile"]] for e in entries] for entries in row["cells"]]
                out.append({**grid, "section": section, "section_words": words, "arch": arch})
    return out


# --- views --------------------------------------------------------------------------------------------------


def render_markdown(doc: Merged) -> str:
    """matrix.md of the merge: the grids (cells link to evidence), every cell's runs, the bundles."""
    hosts = {b["host"] for b in doc["bundles"].values()}
    out = [
        "# bwstack merged matrix",
        "",
        f"- {len(doc['bundles'])} bundle(s) from {len(hosts)} host(s), merged {doc['generated_at']}",
        f"- stand-in rows left out (never hardware truth): {doc['standin_rows_left_out']}",
    ]
    for grid in grids(doc):
        out += ["", f"## {grid['section_words']}: {grid['arch']}, variant {grid['variant']}", ""]
        out.append(f"| backends \\ {grid['column']} | " + " | ".join(grid["columns"]) + " |")
        out.append("| --- |" + " --- |" * len(grid["columns"]))
        for row in grid["rows"]:
            label = ", ".join(f"{k}={v}" for k, v in row["label"]) or "(one combination)"
            cells = []
            for cell_list in row["cells"]:
                cells.append(
                    "<br>".join(
                        f"**{verdict_words(c)}** {c['profile']}: "
                        + " ".join(f"[{i + 1}]({e['evidence']})" for i, e in enumerate(c["seen"]))
                        for c in cell_list
                    )
                    or "-"
                )
            out.append(f"| {label} | " + " | ".join(cells) + " |")
    out += ["", "## Cells", ""]
    for cell in doc["cells"]:
        where = f"{cell['section']}, {cell['arch']}, {cell['variant']}"
        out.append(f"### {cell['profile']} ({where}): {verdict_words(cell)}")
        out.append("")
        out += [f"- differs: {line}" for line in differs_words(cell)]
        for e in cell["seen"]:
            out.append(
                f"- [{e['verdict']}]({e['evidence']}) on {e['host']} ({e['hostname'] or 'name redacted'}), "
                f"{e['date']}, image {e['image_digest'] or '?'}, SGLang {e['sglang'] or '?'}"
                + (f", driver {e['driver']}" if e["driver"] else "")
                + f", bundle {e['bundle']}"
            )
        out.append("")
    out += ["## Bundles", ""]
    for bundle_id, b in doc["bundles"].items():
        out.append(
            f"- [{bundle_id}]({b['view']}) ([archive]({b['file']})): {b['host']}: {b['host_summary']}; "
            f"{b['source']}; made {b['created_at']}"
        )
    return "\n".join(out).rstrip() + "\n"


def render_html(doc: Merged) -> str:
    """matrix.html of the merge: one self-contained page (inline CSS, no script, no external asset)."""
    return str(
        report.template("merged.html.j2").render(
            doc=doc,
            css=report.asset("matrix.css"),
            grids=grids(doc),
            hosts=len({b["host"] for b in doc["bundles"].values()}),
            verdict_words=verdict_words,
            differs_words=differs_words,
            tone=_tone,
        )
    )


def outputs(bundles: Sequence[Bundle]) -> dict[str, bytes]:
    """Every file the merge writes, relative to --out, built in memory (a bundle that cannot be shown is
    refused here, before anything is written)."""
    doc = merge(bundles)
    files: dict[str, bytes] = {
        MERGED_FILE: (untrusted.dumps(doc, indent=2) + "\n").encode(),
        record.MARKDOWN_FILE: render_markdown(doc).encode(),
        record.HTML_FILE: render_html(doc).encode(),
    }
    for bundle in distinct(bundles):
        try:
            view = report.render_html(bundle.results)
        except Exception as exc:  # a verified but odd results.json: refuse the bundle, write nothing
            raise UserError(
                f"bundle refused: its results.json cannot be shown ({type(exc).__name__}: {exc})",
                file=bundle.path,
            ) from None
        files[f"{BUNDLES_DIR}/{bundle.id}.tar.gz"] = bundle.data
        files[f"{BUNDLES_DIR}/{bundle.id}/matrix.html"] = view.encode()
        for part in ("manifest.json", "host.json", "images.json"):
            files[f"{BUNDLES_DIR}/{bundle.id}/{part}"] = bundle.parts[part]
    return files


def write(out: Path, files: dict[str, bytes], reads: Sequence[Path] = ()) -> list[Path]:
    """Write ``files`` under ``out`` only: a path that would leave it (a symlink) or that names a file the
    merge read (``reads``: its input bundles) is refused first, before anything is written; a file already
    there byte for byte is left alone (an input bundle merged again into its own folder)."""
    need_folder(out, "--out")
    root = out.resolve()
    targets: list[tuple[Path, bytes]] = []
    for rel, data in files.items():
        target = out / rel
        parent = target.parent
        while parent != out and not parent.exists():
            parent = parent.parent
        linked = (parent != out and parent.is_symlink()) or target.is_symlink()
        if linked or not parent.resolve().is_relative_to(root):
            raise UserError("refusing to write outside --out (a symbolic link in the way)", file=target)
        if target.is_file() and target.stat().st_size == len(data) and target.read_bytes() == data:
            continue  # already there byte for byte (an input bundle re-merged into its own evidence/)
        refuse_overwrite(target, reads, "--out")
        targets.append((target, data))
    for target, data in targets:
        atomic_write_bytes(target, data)
    return [target for target, _ in targets]
