"""Automatic profile choice for ``bwstack up`` without a profile, like NVIDIA NIM's: detect, filter, rank.

1. **Detect** the host's GPUs with the doctor's probe (``nvidia-smi --query-gpu``; ``BWSTACK_DOCTOR_FIXTURE``
   answers from a recorded host): their arch and how many there are.
2. **Filter**, in profiles.yaml order; a profile is passed over, with the reason, when its image variant is
   not built for this arch (``[cuda] gpu_archs`` of its pins), when the model's ``tp_size`` needs more GPUs
   than the host has, when it is known to fail on this arch (``expect`` is not ``healthy`` and the profile
   targets this arch), or when the rules engine predicts anything but ``healthy`` for it on this arch
   (:func:`bwstack.know.rules.predict`).
3. **Rank** what is left: measured speed first, where a sweep on real hardware of this arch measured it
   (``bwstack sweep --bench``, :mod:`bwstack.sweep.bench`), then profiles.yaml order. A speed is read from the
   reports next to profiles.yaml (``reports/*/results.json`` and one folder deeper, where ``bwstack demo``
   puts each part; newest report first; a combined ``mixed`` report is skipped, its parts are read): a row
   with verdict ``healthy`` in a report whose ``mode.standin`` and ``mode.fast`` are false and whose
   ``stack.gpu_arch`` is this arch, carrying ``speed.output_tokens_per_s`` (:data:`SPEED_KEY`, a number;
   higher is faster). Rows without it rank after measured ones, in profiles.yaml order.
   Before speed comes length: a profile whose newest such report says it scored lower at length than another
   healthy profile of the same model by more than the probe's margin (the long-context probe, the row's
   ``scores.long``; :func:`bwstack.sweep.report.long_facts`, "healthy, long context -X nats/token vs
   PROFILE") ranks after every profile without that fact. Serving long prompts is what a sparse-attention
   model is for, and the dense fallbacks lose exactly that; a faster profile that does not keep its quality at
   length is passed over, with the figure. The needle task counts the same way: a profile whose newest such
   report measured its retrieval by length (``sweep --compare-to`` / ``--retrieval``, the row's
   ``quality.retrieval``) falling from its shortest length to its longest
   (:func:`bwstack.sweep.qualityview.retrieval_falls`) ranks after the ones that hold.

``BWSTACK_PROFILE`` pins the choice (it must name a profile; a known-bad one still needs ``--force``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bwstack import textlayout
from bwstack.errors import UserError
from bwstack.host.doctor.detect import Host, detect_host
from bwstack.host.doctor.probe import HostProbe
from bwstack.know import rules
from bwstack.record import read
from bwstack.record.types import Document, Row
from bwstack.stack.schema import Stack
from bwstack.sweep import qualityview, report

PIN_ENV = "BWSTACK_PROFILE"
#: where a sweep records a measured speed in a results.json row: row[SPEED_KEY[0]][SPEED_KEY[1]]
SPEED_KEY = ("speed", "output_tokens_per_s")


@dataclass
class Choice:
    """The chosen profile (None: nothing usable), why, and why each other profile was passed over."""

    host: Host
    profile: str | None
    why: str
    passed_over: list[tuple[str, str]] = field(default_factory=list)

    def lines(self, width: int = 80) -> list[str]:
        """The explanation ``bwstack up --dry-run`` prints, no wider than ``width`` (names whole)."""

        out = textlayout.wrap(f"host: {self.host.summary}", width)
        head = f"choice: {self.profile}: " if self.profile is not None else "no usable profile: "
        out += textlayout.wrap(head + self.why, width)
        if self.passed_over:
            out.append("passed over:")
            out += textlayout.table([["", n, w] for n, w in self.passed_over], width, wrap_last=True)
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "host": {"arch": self.host.arch, "gpus": self.host.count, "summary": self.host.summary},
            "profile": self.profile,
            "why": self.why,
            "passed_over": [{"profile": n, "why": w} for n, w in self.passed_over],
        }


@dataclass(frozen=True)
class Measured:
    """One profile's newest measured speed: the row's whole ``speed`` record and the report it is in."""

    speed: dict[str, Any]
    report: str  # the report folder, relative to reports/

    @property
    def output_tokens_per_s(self) -> float:
        return float(self.speed[SPEED_KEY[1]])


@dataclass(frozen=True)
class AtLength:
    """One profile's newest real scores at length and under load: the row's ``scores`` (short, long,
    long_tokens), the long-context fact of that run (None: no healthy profile of the same model did better
    by more than the margin), the row's ``soak`` record (None: no soak) and the report they are in."""

    scores: dict[str, Any]
    long_fact: str | None
    soak: dict[str, Any] | None
    report: str

    @property
    def weaker_at_length(self) -> bool:
        return self.long_fact is not None

    def to_json(self) -> dict[str, Any]:
        return {"scores": self.scores, "long_fact": self.long_fact, "soak": self.soak, "report": self.report}


def _report_files(stack: Stack) -> list[tuple[str, Path]]:
    """(report folder relative to reports/, results.json path), newest report first."""
    reports = stack.root / "reports"
    found = [*reports.glob("*/results.json"), *reports.glob("*/*/results.json")]
    keyed = [(path.parent.relative_to(reports).as_posix(), path) for path in found]
    return sorted(keyed, key=lambda item: (item[0].split("/")[0], item[0]), reverse=True)


def _real_reports(stack: Stack, arch: str) -> Iterator[tuple[str, Document]]:
    """(report folder, results.json document) of the real, complete reports of ``arch``, newest first: no
    stand-in, no ``--fast`` and no combined ``mixed`` report (its parts are read instead). A report the one
    reader refuses (:func:`bwstack.record.read.load_or_none`) is skipped."""
    for folder, path in _report_files(stack):
        doc = read.load_or_none(path)
        if doc is None:
            continue
        mode, about = doc["mode"], doc["stack"]
        if mode.get("kind") == "mixed" or mode.get("standin") or mode.get("fast"):
            continue
        if about.get("gpu_arch") != arch:
            continue
        yield folder, doc


def _healthy_rows(doc: Document) -> Iterator[tuple[str, Row]]:
    for name, row in doc["results"].items():
        if isinstance(row, dict) and row.get("verdict") == "healthy":
            yield name, row


def measured(stack: Stack, arch: str) -> dict[str, Measured]:
    """profile -> its newest measured speed on real hardware of ``arch`` (see the module docstring)."""
    speeds: dict[str, Measured] = {}
    for folder, doc in _real_reports(stack, arch):
        for name, row in _healthy_rows(doc):
            speed = row.get(SPEED_KEY[0])
            if not isinstance(speed, dict) or name in speeds:
                continue
            value = speed.get(SPEED_KEY[1])
            if isinstance(value, int | float) and not isinstance(value, bool) and not speed.get("standin"):
                speeds[name] = Measured(dict(speed), folder)
    return speeds


def at_length(stack: Stack, arch: str) -> dict[str, AtLength]:
    """profile -> its newest real long-context score (and that run's long-context fact and soak record) on
    ``arch``; a row without a long score does not count (a sweep whose probe could not reach the length)."""
    found: dict[str, AtLength] = {}
    for folder, doc in _real_reports(stack, arch):
        try:
            facts = report.long_facts(doc)
        except (TypeError, ValueError, KeyError, AttributeError):  # a hand-edited score that is no number
            continue
        for name, row in _healthy_rows(doc):
            scores = row.get("scores")
            if name in found or not isinstance(scores, dict) or not _number(scores.get("long")):
                continue
            soak = row.get("soak") if isinstance(row.get("soak"), dict) else None
            found[name] = AtLength(dict(scores), facts.get(name), soak, folder)
    return found


def at_retrieval(stack: Stack, arch: str) -> dict[str, tuple[dict[str, Any], str]]:
    """profile -> (its newest real ``quality`` record with a needle retrieval measured on ``arch``, the report
    folder it is in): ``sweep --compare-to`` / ``--retrieval``."""
    found: dict[str, tuple[dict[str, Any], str]] = {}
    for folder, doc in _real_reports(stack, arch):
        for name, row in _healthy_rows(doc):
            quality = row.get("quality")
            if name not in found and isinstance(quality, dict) and qualityview.retrieval_words(quality):
                found[name] = (dict(quality), folder)
    return found


def start_phases(stack: Stack, arch: str) -> dict[str, dict[str, Any]]:
    """profile -> its newest real start on ``arch``: the row's ``start`` record (seconds per start-up
    phase, :mod:`healthchecks.phases`) with ``report``, the folder it is in; any verdict (a failed start shows
    where it stopped)."""
    found: dict[str, dict[str, Any]] = {}
    for folder, doc in _real_reports(stack, arch):
        for name, row in doc["results"].items():
            start = row.get("start") if isinstance(row, dict) else None
            if name not in found and isinstance(start, dict) and isinstance(start.get("seconds"), dict):
                found[name] = {**start, "verdict": row.get("verdict"), "report": folder}
    return found


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def measured_speeds(stack: Stack, arch: str) -> dict[str, tuple[float, str]]:
    """profile -> (output tokens/s, report folder it comes from), newest report first."""
    return {name: (m.output_tokens_per_s, m.report) for name, m in measured(stack, arch).items()}


def _pass_reason(stack: Stack, name: str, host: Host) -> str | None:

    profile = stack.profile(name)
    assert host.arch is not None
    variant = stack.variant_for(name)
    if host.arch not in variant.gpu_archs:
        return (
            f"image variant {variant.name} is built for {', '.join(variant.gpu_archs)} "
            f"(pins.toml [cuda] gpu_archs), this host is {host.arch}"
        )
    if stack.model.tp_size > host.count:
        return f"needs {stack.model.tp_size} GPUs (model.tp_size), this host has {host.count}"
    if profile.known_bad and stack.arch_for(name) == host.arch:
        return f"known to fail on {host.arch}: expect {profile.expect} ({profile.why or profile.description})"
    prediction = rules.predict(stack, name, host.arch)
    if prediction.verdict != "healthy":
        return f"predicted {prediction.verdict} on {host.arch}: {prediction.decision.reason}"
    return None


def choose(stack: Stack, probe: HostProbe, *, pinned: str | None = None) -> Choice:
    """Pick the profile ``bwstack up`` starts on this host (``pinned``: the ``BWSTACK_PROFILE`` value)."""
    host = detect_host(probe)
    if pinned:
        check_pinned(stack, pinned)
        return Choice(host, pinned, f"pinned by {PIN_ENV}")
    if host.arch is None:
        return Choice(host, None, f"{host.problem}; bwstack serves only on NVIDIA GPUs")
    usable: list[str] = []
    passed: list[tuple[str, str]] = []
    for name in stack.profiles:
        reason = _pass_reason(stack, name, host)
        if reason is None:
            usable.append(name)
        else:
            passed.append((name, reason))
    if not usable:
        return Choice(
            host,
            None,
            f"none of the {len(passed)} profiles is expected and predicted healthy on {host.count}x "
            f"{host.arch} (reasons below)",
            passed,
        )
    speeds = measured_speeds(stack, host.arch)
    weaker = weaker_at_length(stack, host.arch, usable)
    order = {name: index for index, name in enumerate(stack.profiles)}
    ranked = sorted(
        usable, key=lambda n: (n in weaker, n not in speeds, -speeds.get(n, (0.0, ""))[0], order[n])
    )
    best = ranked[0]
    fits = f"expected and predicted healthy on {host.arch}, {stack.model.tp_size} of {host.count} GPUs"
    if best in speeds:
        why = f"{fits}; fastest measured: {speeds[best][0]:g} output tokens/s (reports/{speeds[best][1]})"
    else:
        why = f"{fits}; first usable in profiles.yaml order (no measured speed)"
    if best in weaker:
        why += f"; every usable profile is weaker at length, this one: {weaker[best]}"
    elif weaker:
        why += "; keeps its quality at length (profiles weaker at length rank last)"
    for name in ranked[1:]:
        if name in weaker and best not in weaker:
            reason = f"usable, weaker at length: {weaker[name]}"
        elif name in speeds:
            reason = f"usable, slower: {speeds[name][0]:g} output tokens/s (reports/{speeds[name][1]})"
        elif best in speeds:
            reason = "usable, no measured speed"
        else:
            reason = f"usable, after {best} in profiles.yaml order"
        passed.append((name, reason))
    passed.sort(key=lambda item: order[item[0]])
    return Choice(host, best, why, passed)


def weaker_at_length(stack: Stack, arch: str, usable: list[str]) -> dict[str, str]:
    """usable profile -> why it is weaker at length on ``arch``: the long-context fact, else retrieval that
    falls with length (see the module docstring)."""
    length = at_length(stack, arch)
    weaker = {n: _at_length_words(length[n]) for n in usable if n in length and length[n].weaker_at_length}
    for name, (quality, folder) in at_retrieval(stack, arch).items():
        falls = qualityview.retrieval_falls(quality)
        if name in usable and falls and name not in weaker:
            weaker[name] = f"{falls} (reports/{folder})"
    return weaker


def _at_length_words(found: AtLength) -> str:
    fact = (found.long_fact or "").removeprefix("healthy, ")
    return f"{fact} (reports/{found.report})"


def pinned_profile() -> str | None:
    """The ``BWSTACK_PROFILE`` pin, if set and not empty."""
    value = os.environ.get(PIN_ENV, "").strip()
    return value or None


def check_pinned(stack: Stack, name: str) -> None:
    """UserError naming the variable when ``BWSTACK_PROFILE`` names no profile."""
    if name not in stack.profiles:
        raise UserError(f"unknown profile {name!r} (profiles: {', '.join(stack.profiles)})", field=PIN_ENV)
