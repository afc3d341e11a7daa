"""Known-bad backend combinations as data, and a predicted verdict per profile and GPU arch.

The rules live in ``data/rules.yaml`` (schema ``data/schemas/rules.schema.json``): each has an id, the
condition on the *effective* configuration it applies to, the failure class the sweep would report, a one-line
reason, the fix, and public evidence. :func:`predict` answers "what will this profile do on this GPU" before a
10-minute model load, deterministically and offline:

1. **Effective configuration.** SGLang's own answer when ``bwstack explain`` has a cached resolution for the
   profile's SGLang, arch, model config and request (``config_source: explain``); otherwise a static fallback
   (``config_source: static``) that only applies facts that hold for every SGLang bwstack pins: the requested
   values; for a DSA model (``index_topk`` set, architecture in ``vocabulary.DSA_ARCHS``) an unset
   attention backend becomes ``dsa`` and KV ``auto`` becomes ``fp8_e4m3`` on compute major >= 10
   (``bfloat16`` below, or with learnable sinks); unset DSA prefill/decode backends come from the
   vocabulary's ``DSA_DEFAULTS`` table (per SGLang release, read in the wheels; the stand-in reads the same
   table); anything else stays unknown, and unknown values never match a rule. ``explain_mode="compute"``
   runs (and caches) SGLang's resolution first; ``"off"`` never reads it.
2. **Kernel availability.** Each backend the effective configuration runs is mapped to its kernel libraries
   (:mod:`bwstack.know.backends`); whether a library carries code for the arch comes from the variant's
   committed kernel facts ``images/<variant>/kernel-archs.json``, made by ``bwstack lock --kernel-facts`` with
   the audit (:mod:`bwstack.know.audit`, stdlib fatbin reader) on the real wheels of the variant's pins, with
   each wheel's sha256. Committed facts (rather than arch facts written as rules) keep the prediction offline
   and fast while every arch claim stays traceable to a wheel; CI checks their form and that they match the
   pins, and an opt-in test regenerates them from the wheels.
3. **Verdict**, first that applies: an error SGLang's own resolution or DSA start-up check raises (cached
   explain; classified by the one failure catalog, ``healthchecks/signatures/__init__.py``; a rule of the
   same class adds its evidence); the first matching rule in file order; a needed library without a kernel for
   the arch (``source: audit``: ``unsupported_arch`` for JIT libraries, whose dispatch checks the arch, else
   ``no_kernel_image``); otherwise ``healthy``.

:func:`check_stack` turns disagreements with each profile's ``expect`` into warnings for ``bwstack validate``;
:mod:`bwstack.know.rules.book` lists the rules (:func:`~bwstack.know.rules.book.rules_data`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from bwstack.errors import UserError
from bwstack.know import backends, explain
from bwstack.know.rules.book import ARCHES, FAILURE_CLASSES, Context, RuleBook, load_rules
from bwstack.know.rules.inputs import (
    ProfileInputs,
    canonical,
    config_arch,
    dsa_kv_layout,
    is_dsa_model,
    profile_inputs,
    static_effective,
)
from bwstack.know.rules.kernels import (
    KERNEL_FACTS_FILE,
    KernelFacts,
    KernelUse,
    backends_in_use,
    judge_use,
    load_kernel_facts,
)
from bwstack.stack.schema import Stack
from healthchecks import signatures, vocabulary

ExplainMode = Literal["cached", "compute", "off"]


@dataclass(frozen=True)
class Verdict:
    """The deciding step of a prediction."""

    verdict: str
    reason: str
    source: Literal["explain", "rule", "audit"]
    evidence: tuple[str, ...] = ()
    rule: str | None = None
    fix: str = ""


@dataclass(frozen=True)
class Prediction:
    """A predicted verdict for one profile on one arch, with what it rests on."""

    profile: str
    variant: str
    arch: str
    sglang_version: str | None
    decision: Verdict
    config_source: Literal["explain", "static"]
    effective: Mapping[str, str | None]
    kernels: tuple[KernelUse, ...]
    notes: tuple[str, ...]
    expect: str
    expect_arch: str
    #: every rule whose condition holds, in file order (the deciding one may be another step's)
    matched_rules: tuple[str, ...] = ()

    @property
    def verdict(self) -> str:
        return self.decision.verdict

    @property
    def agrees(self) -> bool | None:
        """Whether the prediction matches the profile's ``expect`` (None: expect is for another arch)."""
        return None if self.arch != self.expect_arch else self.verdict == self.expect

    @property
    def why_differs(self) -> str | None:
        if self.agrees is not False:
            return None
        if self.verdict == "healthy":
            return (
                f"the profile expects {self.expect}, but no SGLang resolution error, rule or kernel gap "
                f"predicts it on {self.arch}; its evidence is not encoded as a rule"
            )
        step = f"rule {self.decision.rule}" if self.decision.rule else self.decision.source
        return f"the profile expects {self.expect}, but {step} predicts {self.verdict} on {self.arch}"

    def to_json(self) -> dict[str, Any]:
        d = self.decision
        return {
            "profile": self.profile,
            "variant": self.variant,
            "arch": self.arch,
            "sglang_version": self.sglang_version,
            "verdict": d.verdict,
            "reason": d.reason,
            "evidence": list(d.evidence),
            "source": d.source,
            "rule": d.rule,
            "fix": d.fix,
            "config_source": self.config_source,
            "effective": dict(self.effective),
            "kernels": [k.to_json() for k in self.kernels],
            "notes": list(self.notes),
            "expect": self.expect,
            "agrees": self.agrees,
            "why_differs": self.why_differs,
        }


def normalize_arch(arch: str) -> str:
    """``sm120``, ``sm_120`` or ``SM120`` -> ``sm120``; UserError for an arch bwstack does not know."""
    name = arch.strip().lower().replace("_", "")
    if name not in ARCHES:
        raise UserError(f"unknown arch {arch!r} (valid: {', '.join(ARCHES)})", field="--arch")
    return name


def predict(
    stack: Stack,
    profile_name: str,
    arch: str,
    *,
    explain_mode: ExplainMode = "cached",
    book: RuleBook | None = None,
) -> Prediction:
    """Predict a profile's verdict on ``arch`` (module docstring: effective config, kernels, rules)."""
    arch = normalize_arch(arch)
    book = book or load_rules()
    inputs = profile_inputs(stack, profile_name)
    resolution, notes = _resolution(inputs, arch, explain_mode)
    if resolution is not None:
        eff = {name: canonical(name, resolution.value(name)) for name in vocabulary.BACKEND_FIELDS}
    else:
        eff, fallback_notes = static_effective(inputs, arch)
        notes += fallback_notes
    dsa = is_dsa_model(inputs.model_config)
    eff["dsa_kv_layout"] = dsa_kv_layout(eff, dsa_model=dsa, version=inputs.sglang_version)
    facts = load_kernel_facts(stack.images_dir / inputs.variant)
    if facts is None:
        notes.append(f"no {KERNEL_FACTS_FILE} for variant {inputs.variant}: kernel availability not checked")
    uses = tuple(u for n, v in backends_in_use(eff) if (u := judge_use(n, v, facts, arch)) is not None)
    ctx = Context(
        sglang_version=inputs.sglang_version,
        gpu_arch=arch,
        model_arch=config_arch(inputs.model_config),
        dsa_model=dsa,
        effective=eff,
        quantization=inputs.quantization,
        env=inputs.env,
        packages=inputs.packages,
        missing=frozenset(key for use in uses for key in use.missing),
    )
    decision = (
        _explain_verdict(resolution, ctx, book)
        or _rule_verdict(ctx, book)
        or _audit_verdict(uses, facts, arch)
        or _healthy(ctx, uses, facts, resolution is not None)
    )
    notes += [
        f"warning ({rule.id}): {rule.reason}; fix: {rule.fix}" for rule in book.warnings if rule.matches(ctx)
    ]
    profile = stack.profile(profile_name)
    return Prediction(
        profile=profile_name,
        variant=inputs.variant,
        arch=arch,
        sglang_version=inputs.sglang_version,
        decision=decision,
        config_source="explain" if resolution is not None else "static",
        effective=eff,
        kernels=uses,
        notes=tuple(notes),
        expect=profile.expect,
        expect_arch=stack.arch_for(profile_name),
        matched_rules=tuple(rule.id for rule in book.rules if rule.matches(ctx)),
    )


def _resolution(
    inputs: ProfileInputs, arch: str, mode: ExplainMode
) -> tuple[explain.Resolution | None, list[str]]:
    if mode == "off":
        return None, []
    if inputs.sglang_version is None:
        return None, [
            f"variant {inputs.variant} pins no SGLang release: effective config from the static fallback"
        ]
    try:
        found = explain.resolve_cached(
            inputs.sglang_version,
            arch,
            inputs.model_config,
            inputs.requested,
            extra_argv=inputs.extra_argv,
            env=inputs.env,
            compute=mode == "compute",
        )
    except UserError as exc:
        return None, [f"explain unavailable ({exc.message}): effective config from the static fallback"]
    if found is None:
        return None, [
            f"no cached 'bwstack explain {inputs.profile} --arch {arch}': effective config from the "
            "static fallback"
        ]
    return found, []


def _explain_verdict(resolution: explain.Resolution | None, ctx: Context, book: RuleBook) -> Verdict | None:
    problem = None if resolution is None else (resolution.error or resolution.startup_error)
    if problem is None or resolution is None:
        return None
    cls = _classify(problem)
    rule = next((r for r in book.rules if r.cls == cls and r.matches(ctx)), None)
    own = f"sglang {resolution.sglang_version}'s own code ({problem.stage}), run by bwstack explain"
    reason = f"SGLang refuses at start-up: {problem.type}: {problem.message}"
    if rule is None:
        return Verdict(cls, reason, "explain", (own,))
    return Verdict(cls, reason, "explain", (own, *rule.evidence), rule.id, rule.fix)


def _classify(problem: explain.Problem) -> str:

    match = signatures.classify_text(f"{problem.type}: {problem.message}")
    if match is not None and match.cls in FAILURE_CLASSES:
        return match.cls
    return "assertion" if problem.type == "AssertionError" else "crash"


def _rule_verdict(ctx: Context, book: RuleBook) -> Verdict | None:
    rule = next((r for r in book.rules if r.matches(ctx)), None)
    if rule is None:
        return None
    return Verdict(rule.cls, rule.reason, "rule", rule.evidence, rule.id, rule.fix)


def _audit_verdict(uses: Sequence[KernelUse], facts: KernelFacts | None, arch: str) -> Verdict | None:
    failing = [u for u in uses if u.status == "missing"]
    if not failing or facts is None:
        return None
    first = failing[0]
    jit = all(backends.library(key).is_jit for key in first.missing)
    cls = "unsupported_arch" if jit else "no_kernel_image"
    reason = f"{first.field}={first.value} has no kernel for {arch}: {first.detail}"
    sources = tuple(dict.fromkeys(backends.library(key).source for key in first.missing))
    return Verdict(
        cls,
        reason,
        "audit",
        (facts.label(), *sources),
        None,
        "pick a backend whose kernels this image carries for the arch (bwstack audit)",
    )


def _healthy(
    ctx: Context, uses: Sequence[KernelUse], facts: KernelFacts | None, from_explain: bool
) -> Verdict:
    ok = [u for u in uses if u.status == "ok"]
    unknown = sorted({u.value for u in uses if u.status == "unknown"})
    text = f"no known-bad rule matches sglang {ctx.sglang_version or '?'} on {ctx.gpu_arch}"
    if facts is not None:
        text += f"; {len(ok)} backend(s) have {ctx.gpu_arch} kernels"
    if unknown:
        text += f" ({', '.join(unknown)} not audited)"
    evidence = [facts.label()] if facts is not None else []
    if from_explain:
        evidence.insert(0, f"sglang {ctx.sglang_version}'s own resolution, run by bwstack explain (cached)")
    return Verdict("healthy", text, "audit" if facts is not None else "rule", tuple(evidence))


def check_stack(stack: Stack, *, explain_mode: ExplainMode = "cached") -> list[str]:
    """Warnings for ``bwstack validate``: profiles whose prediction on their arch contradicts ``expect``.

    A CPU profile (``device: cpu``) runs no GPU kernel: the rules and the kernel audit do not speak for it, so
    it gets no prediction (its expect stands on its real runs and the shipped evidence).
    """
    book = load_rules()
    warnings: list[str] = []
    for name, profile in stack.iter_profiles():
        if stack.device_for(name) == "cpu":
            continue
        pred = predict(stack, name, stack.arch_for(name), explain_mode=explain_mode, book=book)
        line = stack.line_of("profiles", name, "expect")
        where = f"{stack.path}:{line}" if line else str(stack.path)
        warnings += [f"{where}: profile {name}: {n}" for n in pred.notes if n.startswith("warning (")]
        if pred.agrees is not False:
            continue
        step = f"rule {pred.decision.rule}" if pred.decision.rule else pred.decision.source
        warnings.append(
            f"{where}: profile {name}: expect: {profile.expect}, but bwstack predicts {pred.verdict} on "
            f"{pred.arch} ({step}): {pred.decision.reason}"
        )
    return warnings
