"""The sweep report: ``results.json`` (the record), ``matrix.md`` and ``matrix.html`` (views of it).

``results.json`` is the single source of truth. It is rewritten atomically after every decided profile, so
a sweep killed at any moment (even with SIGKILL) keeps every verdict it reached, and ``--resume`` continues
from it. The Markdown and HTML matrices are regenerated from it each time. The HTML page is one
self-contained file: inline CSS, no script, no external asset (a Content-Security-Policy forbids loading
any), evidence per profile in a ``<details>`` element, and the pins of every image variant in the header.

The document and its rows are typed in :mod:`bwstack.record.types` (a docstring per field; the JSON schema
``data/schemas/results.schema.json`` is generated from them); :mod:`bwstack.record.read` is their one reader.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, cast

from bwstack.files import atomic_write
from bwstack.record import (
    HTML_FILE,
    MARKDOWN_FILE,
    RESULTS_FILE,
    SCHEMA_VERSION,
    types,
    utc_now,
)
from bwstack.sweep import bench, qualityview, soak
from healthchecks import judging, phases, untrusted, vocabulary

#: keys of a row that change from run to run for the same outcome (ignored by :func:`decided_content`)
VOLATILE_ROW_KEYS = (
    "started_at", "finished_at", "elapsed_s", "reason", "next_try", "speed", "soak", "start", "quality",
)  # fmt: skip
#: evidence keys that are stable for the same outcome
STABLE_EVIDENCE_KEYS = ("exit_code", "oom_killed", "requested", "effective", "server_version", "timeout_s")

Document = types.Document


def new_document(
    *,
    stack: Mapping[str, Any],
    mode: Mapping[str, Any],
    variants: Mapping[str, Any],
    plan: Sequence[str],
    generated_by: str,
) -> Document:
    """A fresh report document with no decided profile yet."""
    now = utc_now()
    doc: Document = {
        "schema_version": SCHEMA_VERSION,
        "generated_by": generated_by,
        "started_at": now,
        "updated_at": now,
        "stack": cast(types.StackFacts, dict(stack)),
        "mode": cast(types.Mode, dict(mode)),
        "variants": dict(variants),
        "plan": list(plan),
        "results": {},
        "summary": {"planned": 0, "decided": 0, "matching": 0, "mismatching": 0},
    }
    doc["summary"] = summarize(doc)
    return doc


def summarize(doc: Document) -> types.Summary:
    """Counts over the planned profiles: decided, matching their ``expect``, not matching."""
    rows = [doc["results"][name] for name in doc["plan"] if name in doc["results"]]
    matching = sum(1 for row in rows if row.get("match"))
    return {
        "planned": len(doc["plan"]),
        "decided": len(rows),
        "matching": matching,
        "mismatching": len(rows) - matching,
    }


def record(doc: Document, row: Mapping[str, Any]) -> None:
    """Add (or replace) one profile's row and refresh the summary."""
    name = str(row["profile"])
    doc["results"][name] = cast(types.Row, dict(row))
    if name not in doc["plan"]:
        doc["plan"].append(name)
    doc["updated_at"] = utc_now()
    doc["summary"] = summarize(doc)


def all_match(doc: Document) -> bool:
    """True when every planned profile is decided and matches its ``expect``."""
    summary = summarize(doc)
    return summary["decided"] == summary["planned"] and summary["mismatching"] == 0


def decided(doc: Document) -> list[str]:
    """Names of the planned profiles that already have a verdict."""
    return [name for name in doc["plan"] if name in doc["results"]]


# --- files --------------------------------------------------------------------------------------------------


def write_report(out: Path, doc: Document) -> None:
    """Write results.json first (the record), then the two matrices; each file atomically."""
    atomic_write(out / RESULTS_FILE, untrusted.dumps(doc, indent=2, sort_keys=False) + "\n")
    atomic_write(out / MARKDOWN_FILE, render_markdown(doc))
    atomic_write(out / HTML_FILE, render_html(doc))


def decided_content(doc: Document) -> dict[str, Any]:
    """What a sweep decided, without timestamps, durations and per-run log text: equal for equal outcomes."""
    rows = {}
    for name in decided(doc):
        row = doc["results"][name]
        stable: dict[str, Any] = {
            k: v for k, v in row.items() if k not in VOLATILE_ROW_KEYS and k != "evidence"
        }
        evidence: dict[str, Any] = dict(row.get("evidence") or {})
        log_match = evidence.get("log_match")
        stable["evidence"] = {k: evidence.get(k) for k in STABLE_EVIDENCE_KEYS}
        stable["evidence"]["log_class_also"] = sorted(log_match.get("also", [])) if log_match else None
        rows[name] = stable
    return {
        "schema_version": doc["schema_version"],
        "stack": doc["stack"],
        "mode": doc["mode"],
        "variants": doc["variants"],
        "plan": doc["plan"],
        "results": rows,
    }


# --- the grid: backend combination x KV dtype, per variant ---------------------------------------------

#: the grid's column field when it varies within a variant; else the first requested field that varies
GRID_COLUMN_FIELD = "kv_cache_dtype"
#: requested keys that are not backend choices (the same for every profile of a stack)
_NOT_BACKENDS = ("tp_size",)
_UNSET = "(default)"


def grids(doc: Document) -> list[dict[str, Any]]:
    """Per variant: the decided profiles laid out as backend combination (rows) x one varied field (columns).

    Each cell lists the profiles that requested exactly that combination, with verdict, colour and the anchor
    of their evidence. Fields equal for every profile of the variant are left out of the row labels and
    returned as ``common``. The grid is computed from what each profile requested (``evidence.requested``).
    """
    by_variant: dict[str, list[tuple[str, dict[str, str]]]] = {}
    for name in decided(doc):
        row = doc["results"][name]
        requested = (row.get("evidence") or {}).get("requested") or {}
        fields = {str(k): str(v) for k, v in requested.items() if k not in _NOT_BACKENDS}
        by_variant.setdefault(str(row.get("variant")), []).append((name, fields))
    for members in by_variant.values():  # a CPU stack's profiles may serve different checkpoints
        models = [str(doc["results"][name].get("model") or "") for name, _ in members]
        if len(set(models)) > 1:
            for (_, fields), served in zip(members, models, strict=True):
                fields["model"] = served
    out = []
    for variant, members in by_variant.items():
        keys = list(dict.fromkeys(k for _, fields in members for k in fields))
        keys.sort(key=lambda k: k != "attention_backend")  # stable: otherwise in the order first requested
        values = {k: {fields.get(k, _UNSET) for _, fields in members} for k in keys}
        varied = [k for k in keys if len(values[k]) > 1]
        column = GRID_COLUMN_FIELD if GRID_COLUMN_FIELD in varied or not varied else varied[0]
        row_keys = [k for k in varied if k != column]
        common = [(k, next(iter(values[k]))) for k in keys if k not in varied and k != column]
        columns = list(dict.fromkeys(fields.get(column, _UNSET) for _, fields in members))
        rows: dict[tuple[str, ...], dict[str, list[dict[str, Any]]]] = {}
        labels: dict[tuple[str, ...], list[tuple[str, str]]] = {}
        for name, fields in members:
            key = tuple(fields.get(k, _UNSET) for k in row_keys)
            labels[key] = [(k, v) for k, v in zip(row_keys, key, strict=True) if v != _UNSET]
            result = doc["results"][name]
            verdict = str(result.get("verdict"))
            rows.setdefault(key, {}).setdefault(fields.get(column, _UNSET), []).append(
                {
                    "profile": name,
                    "verdict": verdict,
                    "tone": verdict_tone(verdict),
                    "expect": result.get("expect"),
                    "match": bool(result.get("match")),
                    "anchor": f"profile-{name}",
                    "speed": bench.short_words(result.get("speed")),
                }
            )
        origins = {
            "stand-in" if doc["results"][name].get("standin") else "real SGLang" for name, _ in members
        }
        out.append(
            {
                "variant": variant,
                "origin": " + ".join(sorted(origins)),
                "column": column,
                "columns": columns,
                "common": common,
                "rows": [
                    {"label": labels[key], "cells": [cells.get(value, []) for value in columns]}
                    for key, cells in rows.items()
                ],
            }
        )
    return out


def _grid_label(label: Sequence[tuple[str, str]]) -> str:
    return ", ".join(f"{k}={v}" for k, v in label) or "(one combination)"


# --- Markdown -----------------------------------------------------------------------------------------------


def _cell(text: Any, limit: int = 160) -> str:
    value = " ".join(str(text if text is not None else "").split())
    if len(value) > limit:
        value = value[: limit - 1] + "…"
    return value.replace("|", "\\|")


def origin(row: Mapping[str, Any]) -> str:
    """Where a row's verdict came from, short: ``real SGLang 0.5.23`` or ``stand-in (fault nan)``."""
    mode = "fast, " if row.get("fast") else ""
    if row.get("standin"):
        return f"{mode}stand-in (fault {row.get('fault')})"
    version = (row.get("evidence") or {}).get("server_version")
    return f"{mode}real SGLang" + (f" {version}" if version else "")


def _mode_words(doc: Document) -> str:
    mode = doc["mode"]
    if mode.get("kind") == "mixed":
        return "; ".join(str(part["source"]) for part in doc.get("parts", []))
    words = [str(mode.get("source") or ("CPU stand-in" if mode.get("standin") else "real hardware"))]
    if mode.get("fast"):
        words.append("fast (dummy weights, fewer layers)")
    if mode.get("variant"):
        words.append(f"every profile on variant {mode['variant']}")
    return ", ".join(words)


def pins_summary(manifest: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The pins worth a glance, as (label, value) pairs, from a versions.json manifest."""
    sglang = manifest.get("sglang") or {}
    base = manifest.get("base") or {}
    cuda = manifest.get("cuda") or {}
    pairs = [
        ("sglang", str(sglang.get("version") or f"git {sglang.get('commit') or '?'}")),
        ("base image", str(base.get("ref") or base.get("image") or "?")),
    ]
    if manifest.get("device") == "cpu":
        pairs += [
            ("device", "cpu (no CUDA; Python closure from a hash-locked wheelhouse)"),
            ("base built", "locally (mmdebstrap, Debian bookworm), no registry digest"),
        ]
    else:
        pairs += [
            ("locked", "yes" if manifest.get("locked") else "no (base image without digest)"),
            ("CUDA toolkit", str(cuda.get("toolkit") or "?")),
            ("TORCH_CUDA_ARCH_LIST", str(cuda.get("torch_cuda_arch_list") or "?")),
            ("GPU archs", ", ".join(cuda.get("gpu_archs") or []) or "?"),
        ]
    for package, version in (manifest.get("python") or {}).items():
        pairs.append((str(package), str(version)))
    for name, source in (manifest.get("sources") or {}).items():
        pairs.append((f"source {name}", f"{source.get('repo')}@{source.get('ref')}"))
    return pairs


def render_markdown(doc: Document) -> str:
    """matrix.md: header, pins per variant, one table row per planned profile, then the evidence lines."""
    stack = doc["stack"]
    summary = summarize(doc)
    out = [
        f"# bwstack compatibility matrix: {stack.get('model')} on {stack.get('gpu_arch')}",
        "",
        f"- model: {stack.get('model')} @ {stack.get('revision') or 'unpinned (no model.revision)'}",
        f"- mode: {_mode_words(doc)}",
        f"- started {doc['started_at']}, updated {doc['updated_at']} ({doc['generated_by']})",
        f"- {summary['decided']}/{summary['planned']} decided, {summary['matching']} matching the "
        f"expectation, {summary['mismatching']} not",
        "",
    ]
    for name, manifest in doc["variants"].items():
        pins = "; ".join(f"{label} {value}" for label, value in pins_summary(manifest))
        out.append(f"- variant **{name}**: {_cell(pins, 600)}")
    out += _markdown_grids(doc)
    out += _markdown_speed(doc)
    out += qualityview.markdown(doc)
    out += [
        "",
        "## Profiles",
        "",
        "| profile | variant | expect | verdict | matches | mode | time | speed | why |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name in doc["plan"]:
        row = doc["results"].get(name)
        if row is None:
            out.append(f"| {_cell(name)} | | | not decided yet | | | | | |")
            continue
        mode = origin(row)
        out.append(
            f"| {_cell(name)} | {_cell(row.get('variant'))} | {_cell(row.get('expect'))} | "
            f"**{_cell(row.get('verdict'))}** | {'yes' if row.get('match') else '**NO**'} | {mode} | "
            f"{float(row.get('elapsed_s') or 0):.1f} s | {_cell(bench.short_words(row.get('speed')))} | "
            f"{_cell(row.get('reason'))}{_next_cell(row, doc)} |"
        )
    out += ["", "## Evidence", ""]
    facts = long_facts(doc)  # one pass over the rows, not one per row
    for name in decided(doc):
        out += _markdown_evidence(name, doc["results"][name], facts.get(name))
    return "\n".join(out).rstrip() + "\n"


def _next_cell(row: Mapping[str, Any], doc: Document) -> str:
    following = row.get("next_try")
    if not following:
        return ""
    name = following.get("profile")
    if name in doc["results"]:  # its evidence is in this report
        return f"; next to try: [{_cell(name)}](#evidence-{name})"
    return f"; next to try: {_cell(name or 'nothing')}"


def speed_rows(doc: Document) -> list[dict[str, Any]]:
    """The measured rows (``--bench``), in plan order: profile, the figures as text, client, host."""
    out = []
    for name in decided(doc):
        speed = doc["results"][name].get("speed")
        if not isinstance(speed, Mapping):
            continue
        figures = {key: bench.figure(speed.get(key)) for key in bench.FIGURES}
        out.append(
            {
                "profile": name,
                "figures": figures,
                "measured": bench.has_figures(speed),
                "error": speed.get("error"),
                "done": f"{speed.get('completed', 0)} completed, {speed.get('failed', 0)} failed"
                + (", time limit reached" if speed.get("timed_out") else ""),
                "client": speed.get("client"),
                "note": speed.get("client_note"),
                "host": speed.get("host"),
                "words": bench.speed_words(speed),
            }
        )
    return out


#: column titles of the speed table, one per :data:`bench.FIGURES`
SPEED_TITLES = ("output tok/s", "req/s", "TTFT p50 ms", "TTFT p99 ms", "ITL p50 ms")


def _markdown_speed(doc: Document) -> list[str]:
    rows = speed_rows(doc)
    if not rows:
        return []
    out = ["", "## Speed (`--bench`)", ""]
    out.append("| profile | " + " | ".join(SPEED_TITLES) + " | requests | client | measured on |")
    out.append("| --- |" + " --- |" * (len(SPEED_TITLES) + 3))
    for row in rows:
        figures = " | ".join(row["figures"][key] for key in bench.FIGURES)
        done = row["done"] if row["measured"] else f"bench failed: {row['error']}"
        out.append(
            f"| [{_cell(row['profile'])}](#evidence-{row['profile']}) | {figures} | {_cell(done, 300)} | "
            f"{_cell(row['client'])} | {_cell(row['host'], 300)} |"
        )
    return out


def _markdown_grids(doc: Document) -> list[str]:
    """One table per variant: backend combinations down, the varied field across; cells link to evidence."""
    out: list[str] = []
    for grid in grids(doc):
        out += ["", f"## Matrix: variant {grid['variant']} ({grid['origin']})", ""]
        if grid["common"]:
            out.append("all rows: " + _cell(", ".join(f"{k}={v}" for k, v in grid["common"]), 600))
            out.append("")
        head = " | ".join(_cell(c) for c in grid["columns"])
        out.append(f"| backends \\ {grid['column']} | {head} |")
        out.append("| --- |" + " --- |" * len(grid["columns"]))
        for row in grid["rows"]:
            cells = []
            for entries in row["cells"]:
                cells.append(
                    "<br>".join(
                        f"**{_cell(e['verdict'])}** [{_cell(e['profile'])}](#evidence-{e['profile']})"
                        + ("" if e["match"] else f" (expected {_cell(e['expect'])})")
                        + (f" {_cell(e['speed'])}" if e["speed"] else "")
                        for e in entries
                    )
                    or "-"
                )
            out.append(f"| {_cell(_grid_label(row['label']), 400)} | " + " | ".join(cells) + " |")
    return out


def score_words(scores: Mapping[str, Any]) -> str:
    """The row's probe scores in words: short passage and long context (nats/token)."""
    parts = []
    if scores.get("short") is not None:
        parts.append(f"short {scores['short']:.3f}")
    if scores.get("long") is not None:
        parts.append(f"long ({scores.get('long_tokens')} tokens) {scores['long']:.3f}")
    return ", ".join(parts) + " nats/token" if parts else ""


def long_facts(doc: Document, margin: float = judging.DEFAULT_MARGIN) -> dict[str, str]:
    """profile -> ``healthy, long context -X nats/token vs PROFILE`` where a healthy profile scores lower
    at length than the best other healthy profile of the same model by more than the margin (a fact for
    choosing, not a failure)."""
    healthy = [
        (name, row) for name, row in doc["results"].items()
        if row.get("verdict") == "healthy" and (row.get("scores") or {}).get("long") is not None
    ]  # fmt: skip
    facts: dict[str, str] = {}
    for name, row in healthy:
        same = [(other, o) for other, o in healthy if other != name and o.get("model") == row.get("model")]
        if not same:
            continue
        best_name, best = max(same, key=lambda item: float(item[1]["scores"]["long"]))
        gap = float(best["scores"]["long"]) - float(row["scores"]["long"])
        if gap > margin:
            facts[name] = f"healthy, long context -{gap:.2f} nats/token vs {best_name}"
    return facts


def _markdown_evidence(name: str, row: Mapping[str, Any], fact: str | None = None) -> list[str]:
    evidence = row.get("evidence") or {}
    lines = [
        f'<a id="evidence-{name}"></a>',
        "",
        f"### {name}: {row.get('verdict')} (decided by {row.get('decided_by')})",
        "",
    ]
    log_match = evidence.get("log_match")
    if log_match:
        lines.append(f"- server log line {log_match.get('line')}: `{_cell(log_match.get('text'), 300)}`")
        if log_match.get("source"):
            lines.append(f"- signature source: {_cell(log_match['source'], 300)}")
    following = row.get("next_try")
    if following:
        lines.append(
            f"- next to try: {following.get('profile') or 'nothing'}: {_cell(following.get('why'), 600)}"
        )
    health = evidence.get("health") or {}
    for probe in (health.get("last") or [])[-2:]:
        lines.append(f"- healthcheck: `{_cell(probe.get('output'), 300)}`")
    if evidence.get("exit_code") is not None:
        lines.append(
            f"- exit code: {evidence['exit_code']}" + (" (OOM-killed)" if evidence.get("oom_killed") else "")
        )
    requested = evidence.get("requested") or {}
    effective = evidence.get("effective")
    if requested:
        lines.append("- requested: " + ", ".join(f"{k}={v}" for k, v in requested.items()))
    if effective:
        lines.append("- effective (/server_info): " + ", ".join(f"{k}={v}" for k, v in effective.items()))
    for key, want, got in backend_rows(evidence):
        log = got.get("log")
        if log:
            lines.append(
                f"- {key}: {want if want is not None else '(auto)'} -> {log['value']} "
                f"({_ORIGIN_WORDS.get(log['origin'], log['origin'])}; server log line {log['line']}: "
                f"`{_cell(log['text'], 200)}`)"
            )
    for override in (evidence.get("startup") or {}).get("overrides") or []:
        lines.append(f"- backend_override: {_cell(override['message'], 300)}")
    if row.get("speed"):
        lines.append(f"- speed: {_cell(bench.speed_words(row['speed']), 800)}")
    scores = row.get("scores") or {}
    if scores.get("short") is not None or scores.get("long") is not None:
        lines.append(f"- scores: {score_words(scores)}")
    if fact:
        lines.append(f"- {fact}")
    if row.get("soak"):
        lines.append(f"- soak: {_cell(soak.words(row['soak']), 800)}")
    lines += [f"- start: {_cell(phases.record_words(row['start']), 400)}"] if row.get("start") else []
    if row.get("imitated"):
        lines.append(f"- imitated: {_cell(str(row['imitated']), 400)}")
    lines.append("")
    table = soak.bucket_table(row.get("soak"))
    return lines + (["soak per prompt length:", "", *table, ""] if table else [])


# --- HTML ---------------------------------------------------------------------------------------------------

#: verdict -> CSS class of its colour
_VERDICT_TONE = {"healthy": "ok", "timeout": "slow", "starting": "slow", "backend_override": "warn"}


def verdict_tone(verdict: str) -> str:
    """The colour family of a verdict: ok (healthy), slow (timeout), warn (override), bad (any failure)."""
    return _VERDICT_TONE.get(verdict, "bad")


_ORIGIN_WORDS = {
    "flag": "from the flag",
    "sglang": "set by SGLang",
    "default": "default",
    "unknown": "origin unknown",
}


def same_value(requested: Any, effective: Any) -> bool:
    """Whether a requested backend value and the effective one name the same thing (SGLang spells some
    values differently from profiles.yaml: healthchecks/vocabulary.py)."""
    return vocabulary.semantic_value(requested) == vocabulary.semantic_value(effective)


def backend_rows(evidence: Mapping[str, Any]) -> list[tuple[str, Any, dict[str, Any]]]:
    """(field, requested value or None, {"server_info": value, "log": {value, line, origin, text}}) for every
    field the profile asks for or the server reports, in the vocabulary's order."""
    requested = evidence.get("requested") or {}
    effective = evidence.get("effective") or {}
    logged = (evidence.get("startup") or {}).get("effective") or {}
    keys = [k for k in vocabulary.REPORT_FIELDS if k in requested or k in effective or k in logged]
    keys += [k for k in (*requested, *effective) if k not in keys]
    rows = []
    for key in keys:
        log = logged.get(key)
        if log is not None:
            line, text = log.get("warning_line") or log["line"], log.get("warning") or log["text"]
            log = {"value": log["value"], "line": line, "origin": log["origin"], "text": text}
        rows.append((key, requested.get(key), {"server_info": effective.get(key), "log": log}))
    return rows


def _differs(requested: Any, effective: Any) -> bool:
    return (
        requested is not None
        and effective is not None
        and requested != "auto"
        and not same_value(requested, effective)
    )


@cache
def asset(name: str) -> str:
    return resources.files("bwstack").joinpath(f"data/report/{name}").read_text(encoding="utf-8")


def html_context(doc: Document) -> dict[str, Any]:
    """Everything matrix.html.j2 prints; the template only loops and looks up."""
    rows = []
    facts = long_facts(doc)
    for name in doc["plan"]:
        row = doc["results"].get(name)
        if row is None:
            rows.append({"profile": name, "pending": True})
            continue
        evidence = row.get("evidence") or {}
        rows.append(
            {
                **row,
                "next_try": row.get("next_try"),
                "pending": False,
                "origin": origin(row),
                "tone": verdict_tone(str(row.get("verdict"))),
                "elapsed": f"{float(row.get('elapsed_s') or 0):.1f} s",
                "speed_short": bench.short_words(row.get("speed")),
                "speed_words": bench.speed_words(row.get("speed")),
                "soak_words": soak.words(row.get("soak")),
                "soak_buckets": soak.bucket_rows(row.get("soak")),
                "start_words": phases.record_words(row.get("start")),
                "score_words": score_words(row.get("scores") or {}),
                "long_fact": facts.get(name),
                "evidence": evidence,
                "overrides": (evidence.get("startup") or {}).get("overrides") or [],
                "backends": [
                    {
                        "key": key,
                        "requested": want,
                        "effective": got["server_info"],
                        "log": got["log"],
                        "origin": _ORIGIN_WORDS.get(got["log"]["origin"], "") if got["log"] else "",
                        "differs": _differs(want, got["server_info"]),
                        "log_differs": _differs(want, got["log"]["value"] if got["log"] else None),
                    }
                    for key, want, got in backend_rows(evidence)
                ],
            }
        )
    return {
        "doc": doc,
        "css": asset("matrix.css"),
        "mode_words": _mode_words(doc),
        "summary": summarize(doc),
        "rows": rows,
        "grids": grids(doc),
        "speed_rows": speed_rows(doc),
        "speed_titles": SPEED_TITLES,
        "quality": qualityview.html_rows(doc),
        "figure_keys": bench.FIGURES,
        "bucket_columns": soak.BUCKET_COLUMNS,
        "variants": [
            {"name": name, "pins": pins_summary(manifest), "manifest": json.dumps(manifest, indent=2)}
            for name, manifest in doc["variants"].items()
        ],
    }


def combine(parts: Sequence[Document], *, labels: Sequence[str]) -> Document:
    """One report from several sweeps (the demo: real CPU rows, stand-in rows), each row keeping its origin.

    Profile names must not repeat across the parts. ``labels`` name each part's sub-report folder.
    """
    first = parts[0]
    doc = new_document(
        stack={
            key: " + ".join(dict.fromkeys(str(v) for p in parts if (v := p["stack"].get(key)) is not None))
            or None
            for key in ("file", "project", "model", "revision", "served_name", "gpu_arch", "tp_size")
        },
        mode={"kind": "mixed", "standin": None, "fast": False, "variant": None},
        variants={name: m for p in parts for name, m in p["variants"].items()},
        plan=[name for p in parts for name in p["plan"]],
        generated_by=str(first["generated_by"]),
    )
    doc["parts"] = [
        {"report": label, "source": p["mode"].get("source"), "stack": p["stack"], "mode": p["mode"]}
        for label, p in zip(labels, parts, strict=True)
    ]
    for part in parts:
        for row in part["results"].values():
            record(doc, row)
    doc["started_at"] = min(str(p["started_at"]) for p in parts)
    return doc


@cache
def template(name: str) -> Any:
    """The compiled Jinja template ``data/report/<name>`` (autoescaped, strict), compiled once per process:
    ``report merge`` renders one page per bundle."""
    import jinja2

    env = jinja2.Environment(
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    return env.from_string(asset(name))


def render_html(doc: Document) -> str:
    """matrix.html: one self-contained page (inline CSS, no script, no external asset)."""
    return str(template("matrix.html.j2").render(**html_context(doc)))
