"""``bwstack list``: the profiles grouped like NVIDIA NIM's list-model-profiles.

One line per profile (the name whole, so it can be copied into ``bwstack up``; the verdict; a short reason
clipped to the terminal width), details with ``--wide``, JSON with ``--json``. Without ``--arch``: expected to
work / known to fail, each with its reason. With ``--arch``: each profile also gets a predicted verdict for
that GPU arch from the rules engine (explain + audit + rules), marked ``!`` where it disagrees with the
profile's own ``expect``. Where a ``bwstack sweep --bench`` on real hardware of the arch (``--arch``, else the
stack's: ``cpu`` for a CPU stack) measured a healthy profile, its newest figures are shown as "measured"
(:func:`bwstack.ops.choose.measured`), with the host they were measured on. Likewise the newest real scores
at length and under load (:func:`bwstack.ops.choose.at_length`): the short and long-context probe scores, the
long-context fact where a profile scored lower at length than another healthy profile of the same model
("long context -X nats/token vs PROFILE", which ``bwstack up``'s choice ranks last) and the soak's figures.
``--phases`` adds each profile's newest real start, seconds per start-up phase
(:func:`bwstack.ops.choose.start_phases`; ``--wide`` and ``--json`` always carry it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from healthchecks.phases import record_words as phase_words

from bwstack import textlayout
from bwstack.know import evidence, rules
from bwstack.ops.choose import at_length, at_retrieval, measured, start_phases
from bwstack.stack.baselines import describe, load_baseline
from bwstack.stack.schema import Stack
from bwstack.sweep import qualityview, soak
from bwstack.sweep.bench import short_words, speed_words
from bwstack.sweep.report import score_words


def list_data(stack: Stack, *, arch: str | None) -> dict[str, Any]:
    """Machine-readable listing (``bwstack list --json``)."""

    measured_on = arch or ("cpu" if stack.is_cpu else stack.settings.gpu_arch)
    speeds = measured(stack, measured_on)
    length = at_length(stack, measured_on)
    started = start_phases(stack, measured_on)
    retrieved = at_retrieval(stack, measured_on)
    shipped = evidence.load(stack.root)
    rows = []
    for name, profile in stack.profiles.items():
        row: dict[str, Any] = {
            "profile": name,
            "variant": stack.variant_name_for(name),
            "expect": profile.expect,
            "arch": stack.arch_for(name),
            "why": profile.why or profile.description,
            "evidence": list(profile.evidence),
            "backends": {k: v for k, v in profile.backends().items() if v is not None},
            "measured": ({**speeds[name].speed, "report": speeds[name].report} if name in speeds else None),
            "seen": evidence.seen_words(evidence.cells_for(stack, name, shipped)),
            "at_length": length[name].to_json() if name in length else None,
            "start": started.get(name),
            "retrieval": (
                {**retrieved[name][0], "report": retrieved[name][1]} if name in retrieved else None
            ),
        }
        if arch is not None:
            row["prediction"] = _predict(stack, name, arch)
        rows.append(row)

    baseline = load_baseline(stack)
    quality = None if baseline is None else dict(baseline.__dict__.items())
    return {
        "file": str(stack.path),
        "arch": arch,
        "model": model_ref(stack),
        "profiles": rows,
        "quality_baseline": quality,
        "quality": quality_words(stack),
    }


def quality_words(stack: Stack) -> str:

    return describe(stack)


def model_ref(stack: Stack) -> dict[str, Any]:
    """The model every profile serves and the commit it is pinned to (None: unpinned); ``unpinnable``: why
    it has no Hub commit to pin (a model bwstack makes, a local folder), else None."""
    return {"path": stack.model.path, "revision": stack.model.revision, "unpinnable": stack.model_unpinnable}


def _predict(stack: Stack, profile_name: str, arch: str) -> dict[str, Any]:

    prediction = rules.predict(stack, profile_name, arch)
    return prediction.to_json()


def print_list(
    stack: Stack,
    *,
    arch: str | None,
    wide: bool = False,
    width: int | None = None,
    phases: bool = False,
    retrieval: bool = False,
) -> None:
    """Print the listing: one line per profile (whole name, verdict, short reason); ``wide`` adds details,
    ``phases`` the seconds per start-up phase of each profile's newest real start, ``retrieval`` the table of
    needle retrieval by length (and the comparison) of each profile's newest real measurement."""
    import click

    data = list_data(stack, arch=arch)
    for line in list_lines(data, wide=wide, width=width, phases=phases):
        click.echo(line)
    if retrieval:
        for line in retrieval_lines(data, width=width):
            click.echo(line)


def retrieval_lines(data: dict[str, Any], *, width: int | None = None) -> list[str]:
    """``list --retrieval``: one table row per measured profile, a column per prompt length, the comparison
    with the sweep's reference and the retrieval fact ``up``'s choice ranks by."""
    width = width or textlayout.terminal_width()
    rows = [r for r in data["profiles"] if r.get("retrieval")]
    if not rows:
        return textlayout.wrap(
            "retrieval by length: not measured yet (bwstack sweep --compare-to PROFILE or --retrieval)", width
        )
    lengths = sorted({int(a["length"]) for r in rows for a in r["retrieval"].get("retrieval") or []})
    cells = []
    for row in rows:
        quality = row["retrieval"]
        found = {a["length"]: f"{a['right']}/{a['asked']}" for a in quality.get("retrieval") or []}
        vs = quality.get("compare")
        versus = (
            f"{'within' if vs.get('passed') else 'DIVERGES'} vs {vs.get('to')}: mean KL {vs.get('mean_kl')}"
            if isinstance(vs, dict) else "reference" if quality.get("reference") is True else "-"
        )  # fmt: skip
        falls = "falls" if qualityview.retrieval_falls(quality) else "holds"
        cells.append([row["profile"], *(found.get(n, "-") for n in lengths), falls, versus,
                      f"reports/{quality['report']}"])  # fmt: skip
    header = ["profile", *(f"@{n}" for n in lengths), "retrieval", "compared", "report"]
    return ["", "retrieval by length (newest real sweep; bwstack sweep --compare-to / --retrieval):",
            *textlayout.table(cells, width, header=header)]  # fmt: skip


def list_lines(
    data: dict[str, Any], *, wide: bool = False, width: int | None = None, phases: bool = False
) -> list[str]:
    """The listing as lines no longer than ``width`` (the terminal's; 80 on a pipe), profile names whole."""

    width = width or textlayout.terminal_width()
    arch = data["arch"]
    lines: list[str] = []
    groups = [
        ("Expected to work", [r for r in data["profiles"] if r["expect"] == "healthy"]),
        ("Known to fail", [r for r in data["profiles"] if r["expect"] != "healthy"]),
    ]
    any_measured = any(row.get("measured") for row in data["profiles"])
    measured_title = ["measured"] if any_measured else []
    header = ["profile", f"on {arch}" if arch else "expect", *measured_title, "why"]
    for title, rows in groups:
        if not rows:
            continue
        lines.append(f"{title}:" if lines == [] else f"\n{title}:")
        if wide:
            for row in rows:
                lines.extend(_wide_block(row, arch, width))
            continue
        cells = [
            [row["profile"], _verdict(row, arch)]
            + ([short_words(row.get("measured"))] if any_measured else [])
            + [_short_reason(row)]
            for row in rows
        ]
        lines.extend(textlayout.table(cells, width, header=header))
    lines.append("")
    model = data["model"]
    pinned = model["revision"] or model.get("unpinnable") or "not pinned (set model.revision)"
    lines.extend(textlayout.wrap(f"model: {model['path']} @ {pinned}", width))
    lines.extend(textlayout.wrap(str(data["quality"]), width))
    if not wide:
        sections: list[tuple[str, str, Callable[[dict[str, Any]], str]]] = [
            ("recorded evidence (evidence/, bwstack report merge):", "seen",
             lambda row: f"expect {row['expect']} — {row['seen']}"),
            ("at length and under load (real sweeps; bwstack sweep --soak):", "at_length",
             lambda row: at_length_words(row["at_length"])),
        ]  # fmt: skip
        if phases:
            sections.append(("start, seconds per phase (newest real sweep):", "start", start_words))
        for title, key, words in sections:
            rows = [r for r in data["profiles"] if r.get(key)]
            if rows:
                lines.append(title)
            for row in rows:
                lines.extend(textlayout.wrap(f"{row['profile']}: {words(row)}", width, "  "))
    hosts = sorted(
        {str(r["measured"]["host"]) for r in data["profiles"] if (r.get("measured") or {}).get("host")}
    )
    if hosts:
        lines.extend(textlayout.wrap(f"measured (bwstack sweep --bench) on: {'; '.join(hosts)}", width))
    hint = "start one: bwstack up PROFILE (or bwstack up: picks one for this host)"
    lines.extend(textlayout.wrap(hint, width))
    if not wide:
        lines.extend(textlayout.wrap("details: bwstack list --wide; scripts: bwstack list --json", width))
    return lines


def _verdict(row: dict[str, Any], arch: str | None) -> str:
    """The expected verdict; with ``arch`` the predicted one, marked ``!`` where it differs from expect."""
    if arch is None:
        return str(row["expect"])
    pred = row["prediction"]
    return str(pred["verdict"]) + ("!" if pred.get("agrees") is False else "")


def _short_reason(row: dict[str, Any]) -> str:
    pred = row.get("prediction")
    if pred is not None and pred.get("agrees") is False:
        why = pred.get("why_differs") or pred.get("reason")
        return f"differs from expect {row['expect']}: {why}"
    return str(row["why"])


def _wide_block(row: dict[str, Any], arch: str | None, width: int) -> list[str]:

    indent = textlayout.INDENT
    verdict = f"expect {row['expect']}"
    if arch is not None:
        pred = row["prediction"]
        mark = " (differs from expect)" if pred.get("agrees") is False else ""
        verdict += f", predicted on {arch}: {pred['verdict']}{mark}"
    out = [f"{row['profile']}  [{verdict}]"]
    parts = [f"variant: {row['variant']} ({row['arch']})", f"why: {row['why']}"]
    backends = ", ".join(f"{k}={v}" for k, v in row["backends"].items())
    if backends:
        parts.append(f"backends: {backends}")
    if arch is not None:
        pred = row["prediction"]
        if pred.get("reason"):
            parts.append(f"prediction: {pred['reason']}")
        if pred.get("why_differs"):
            parts.append(f"differs: {pred['why_differs']}")
    if row.get("measured"):
        parts.append(f"measured: {speed_words(row['measured'])} (reports/{row['measured']['report']})")
    if row.get("at_length"):
        parts.append(f"at length: {at_length_words(row['at_length'])}")
    if row.get("start"):
        parts.append(f"start: {start_words(row)}")
    if row.get("seen"):
        parts.append(f"recorded: {row['seen']}")
    parts.extend(f"evidence: {item}" for item in row["evidence"])
    for part in parts:
        lines = textlayout.wrap(part, width - 2, indent)
        out.extend([lines[0], *("  " + line for line in lines[1:])])
    return out


def at_length_words(found: dict[str, Any]) -> str:
    """``short …, long (N tokens) … nats/token; <long-context fact>; soak: … (reports/…)``: one profile."""
    parts = [score_words(found.get("scores") or {})]
    fact = found.get("long_fact")
    parts.append(str(fact).removeprefix("healthy, ") if fact else "keeps its quality at length")
    if found.get("soak"):
        parts.append(f"soak: {soak.words(found['soak'])}")
    return "; ".join(p for p in parts if p) + f" (reports/{found.get('report')})"


def start_words(row: dict[str, Any]) -> str:
    """``launch 35 s, weights 612 s, …; ready after 700 s (reports/…)``: one profile's newest real start."""
    start = row["start"]
    return f"{phase_words(start)} (reports/{start.get('report')})"
