"""Known-bad backend combinations as data, and a predicted verdict per profile and GPU arch.

The rules live in ``data/rules.yaml`` (schema ``data/schemas/rules.schema.json``): each has an id, the
condition on the *effective* configuration it applies to, the failure class the sweep would report, a one-line
reason, the fix, and public evidence. :func:`predict` answers "what will this profile do on this GPU" before a
10-minute model load, deterministically and offline:

1. **Effective configuration.** SGLang's own answer when ``bwstack explain`` has a cached resolution for the
   profile's SGLang, arch, model config and request (``config_source: explain``); otherwise a static fallback
   (``config_source: static``) that only applies facts that hold for every SGLang bwstack pins: the requested
   values; for a DSA model (``index_topk`` set, architecture in ``standin.resolve.DSA_ARCHS``) an unset
   attention backend becomes ``dsa`` and KV ``auto`` becomes ``fp8_e4m3`` on compute major >= 10
   (``bfloat16`` below, or with learnable sinks); unset DSA prefill/decode backends come from the
   ``dsa_defaults`` table of the rules file (per SGLang range, read in the wheels); anything else stays
   unknown, and unknown values never match a rule. ``explain_mode="compute"`` runs (and caches) SGLang's
   resolution first; ``"off"`` never reads it.
2. **Kernel availability.** Each backend the effective configuration runs is mapped to its kernel libraries
   (:mod:`bwstack.backends`); whether a library carries code for the arch comes from the variant's committed
   kernel facts ``images/<variant>/kernel-archs.json``, made by :func:`generate_kernel_facts` with the audit
   (:mod:`bwstack.audit`, stdlib fatbin reader) on the real wheels of the variant's pins, with each wheel's
   sha256. Committed facts (rather than arch facts written as rules) keep the prediction offline and fast
   while every arch claim stays traceable to a wheel; CI checks their form and that they match the pins, and
   an opt-in test regenerates them from the wheels.
3. **Verdict**, first that applies: an error SGLang's own resolution or DSA start-up check raises (cached
   explain; classified by the one failure catalog, ``healthchecks/signatures.py``; a rule of the same class
   adds its evidence); the first matching rule in file order; a needed library without a kernel for the arch
   (``source: audit``: ``unsupported_arch`` for JIT libraries, whose dispatch checks the arch, else
   ``no_kernel_image``); otherwise ``healthy``.

:func:`check_stack` turns disagreements with each profile's ``expect`` into warnings for ``bwstack validate``;
:func:`rules_data` / :func:`render_rules_text` list the rules.
"""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from bwstack import audit, backends, explain, pins, sglang_cli
from bwstack.errors import ExternalError, UserError
from bwstack.model import EXPECT_CLASSES, Stack
from bwstack.standin.resolve import DSA_ARCHS
from bwstack.yamlload import Lines, load_yaml

DATA = Path(__file__).parent / "data"
RULES_FILE = DATA / "rules.yaml"
RULES_SCHEMA = DATA / "schemas" / "rules.schema.json"
KERNEL_FACTS_FILE = "kernel-archs.json"
KERNEL_FACTS_SCHEMA = "bwstack.kernel-archs/1"

ARCHES: tuple[str, ...] = tuple(explain.ARCH_CAPABILITY)
FAILURE_CLASSES: tuple[str, ...] = tuple(c for c in EXPECT_CLASSES if c != "healthy")
SEMANTIC_FIELDS: tuple[str, ...] = explain.SEMANTIC_FIELDS
DSA_SIDES = ("dsa_prefill_backend", "dsa_decode_backend")
KV_LAYOUTS = ("packed_fp8", "raw_fp8", "bf16")
#: fields a condition may test with a value matcher
MATCH_FIELDS = (
    "gpu_arch",
    "model_arch",
    "attention_backend",
    "dsa_prefill_backend",
    "dsa_decode_backend",
    "dsa_backend",
    "kv_cache_dtype",
    "dsa_kv_layout",
    "moe_runner_backend",
    "fp4_gemm_backend",
    "quantization",
)
#: packages whose wheels carry the kernels of bwstack.backends (torch, triton, tilelang are not audited here)
KERNEL_PACKAGES = (
    "sglang",
    "sglang-kernel",
    "sgl-kernel",
    "sgl-flash-mla",
    "sgl-deep-gemm",
    "flashinfer-python",
    "flashinfer-cubin",
)
_KERNEL_PACKAGE_KEYS = frozenset(canonicalize_name(p) for p in KERNEL_PACKAGES)
#: kernel packages that, when not installed, are fetched at run time (so their absence proves nothing)
RUNTIME_DOWNLOADED = {
    "flashinfer-cubin": "flashinfer-cubin is not pinned: FlashInfer downloads these cubins at first use, so "
    "they cannot be audited from wheels (bwstack audit --image on a warmed image can)",
}
_WHEEL_PLATFORMS = ("manylinux_2_34_x86_64", "manylinux_2_28_x86_64", "manylinux2014_x86_64")
_EVIDENCE = re.compile(
    r"(?:^|\s|/)(?:[\w.-]+/[\w.-]+)?#\d+"  # owner/repo#N, #N, PR #N
    r"|read in [\w.-]+ \d[\w.]* wheel \S+"  # read in sglang 0.5.23 wheel path:lines
    r"|^[\w.-]+/[\w.-]+ \S"  # owner/repo path-or-title
)
_OK_KERNEL = ("native", "ptx", "jit")

ExplainMode = Literal["cached", "compute", "off"]


# --- the rules file ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Matcher:
    """One field's test: value in ``values``, or (``negate``) a known value outside ``values``."""

    values: tuple[str, ...]
    negate: bool = False

    def test(self, value: str | None) -> bool:
        if value is None:
            return False
        return (value in self.values) != self.negate

    def describe(self) -> str:
        joined = ", ".join(self.values)
        return (
            f"not in [{joined}]"
            if self.negate
            else (f"= {joined}" if len(self.values) == 1 else f"in [{joined}]")
        )


@dataclass(frozen=True)
class Condition:
    """Conditions that must all hold (``when``), or whose joint truth cancels a rule (``unless``)."""

    fields: Mapping[str, Matcher] = field(default_factory=dict)
    dsa_model: bool | None = None
    env: Mapping[str, Matcher] = field(default_factory=dict)
    packages: Mapping[str, SpecifierSet] = field(default_factory=dict)
    missing_kernel: tuple[str, ...] = ()

    def holds(self, ctx: Context) -> bool:
        if self.dsa_model is not None and ctx.dsa_model != self.dsa_model:
            return False
        if not all(_field_matches(ctx, name, m) for name, m in self.fields.items()):
            return False
        if not all(m.test(ctx.env.get(name, "").lower()) for name, m in self.env.items()):
            return False
        if not all(_package_matches(ctx, name, spec) for name, spec in self.packages.items()):
            return False
        return not self.missing_kernel or any(key in ctx.missing for key in self.missing_kernel)

    def describe(self) -> str:
        parts = [f"{name} {m.describe()}" for name, m in self.fields.items()]
        if self.dsa_model is not None:
            parts.insert(0, "DSA model" if self.dsa_model else "not a DSA model")
        parts += [f"env {name} {m.describe()}" for name, m in self.env.items()]
        parts += [f"{name}{spec}" for name, spec in self.packages.items()]
        if self.missing_kernel:
            parts.append("no kernel for the arch in " + " or ".join(self.missing_kernel))
        return "; ".join(parts)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.dsa_model is not None:
            out["dsa_model"] = self.dsa_model
        out.update({name: _matcher_json(m) for name, m in self.fields.items()})
        if self.env:
            out["env"] = {name: _matcher_json(m) for name, m in self.env.items()}
        if self.packages:
            out["packages"] = {name: str(spec) for name, spec in self.packages.items()}
        if self.missing_kernel:
            out["missing_kernel"] = list(self.missing_kernel)
        return out


@dataclass(frozen=True)
class Rule:
    """A known-bad combination: condition, predicted class, reason, fix and public evidence."""

    id: str
    cls: str
    sglang: SpecifierSet | None
    when: Condition
    unless: Condition | None
    reason: str
    fix: str
    evidence: tuple[str, ...]
    line: int | None = None

    def applies_to(self, version: str | None) -> bool:
        """Whether the rule covers this SGLang version (a ranged rule never covers an unknown version)."""
        if self.sglang is None or not str(self.sglang):
            return True
        parsed = _version(version)
        return parsed is not None and self.sglang.contains(parsed, prereleases=True)

    def matches(self, ctx: Context) -> bool:
        if not self.applies_to(ctx.sglang_version) or not self.when.holds(ctx):
            return False
        return self.unless is None or not self.unless.holds(ctx)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "class": self.cls,
            "sglang": str(self.sglang) if self.sglang is not None else "",
            "when": self.when.to_json(),
            "unless": self.unless.to_json() if self.unless else None,
            "condition": self.describe(),
            "reason": self.reason,
            "fix": self.fix,
            "evidence": list(self.evidence),
        }

    def describe(self) -> str:
        text = self.when.describe()
        if self.unless is not None:
            text += f"; unless ({self.unless.describe()})"
        return text


@dataclass(frozen=True)
class DsaDefault:
    """One row of SGLang's DSA prefill/decode defaults for the sides a user leaves unset."""

    sglang: SpecifierSet
    gpu_arch: tuple[str, ...]
    model_arch: tuple[str, ...] | None
    kv_cache_dtype: str
    prefill: str
    decode: str
    evidence: tuple[str, ...]

    def matches(self, version: str | None, arch: str, model_arch: str, kv: str | None) -> bool:
        parsed = _version(version)
        if parsed is None or not self.sglang.contains(parsed, prereleases=True):
            return False
        if arch not in self.gpu_arch or kv != self.kv_cache_dtype:
            return False
        return self.model_arch is None or model_arch in self.model_arch


@dataclass(frozen=True)
class RuleBook:
    """The parsed rules file."""

    path: Path
    rules: tuple[Rule, ...]
    dsa_defaults: tuple[DsaDefault, ...]

    def rule(self, rule_id: str) -> Rule:
        for rule in self.rules:
            if rule.id == rule_id:
                return rule
        raise KeyError(rule_id)

    def dsa_default(
        self, version: str | None, arch: str, model_arch: str, kv: str | None
    ) -> DsaDefault | None:
        return next((d for d in self.dsa_defaults if d.matches(version, arch, model_arch, kv)), None)


def load_rules(path: Path | None = None) -> RuleBook:
    """The rules file (default: the shipped one, parsed once); UserError with file:line for bad data."""
    if path is None:
        return _shipped_rules()
    return parse_rules(path)


@functools.cache
def _shipped_rules() -> RuleBook:
    return parse_rules(RULES_FILE)


def parse_rules(path: Path) -> RuleBook:
    """Read, schema-check and parse a rules file."""
    data, lines = load_yaml(path)
    _check_schema(data, lines, path)
    where = _Where(path, lines)
    rules = tuple(_parse_rule(item, ("rules", i), where) for i, item in enumerate(data["rules"]))
    _check_unique_ids(rules, where)
    defaults = tuple(
        _parse_default(item, ("dsa_defaults", i), where) for i, item in enumerate(data["dsa_defaults"])
    )
    return RuleBook(path, rules, defaults)


@dataclass(frozen=True)
class _Where:
    """Turns a path inside the rules file into a UserError with file:line and the dotted field."""

    path: Path
    lines: Lines

    def error(self, message: str, loc: Sequence[str | int]) -> UserError:
        return UserError(message, file=self.path, line=self.lines.line(loc), field=_dotted(loc) or None)


@functools.cache
def rules_schema() -> dict[str, Any]:
    """The JSON schema of the rules file; its failure classes come from the failure catalog."""
    doc: dict[str, Any] = json.loads(RULES_SCHEMA.read_text(encoding="utf-8"))
    doc["$defs"]["failure_class"]["enum"] = list(FAILURE_CLASSES)
    return doc


def _check_schema(data: Any, lines: Lines, path: Path) -> None:
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import best_match

    error = best_match(Draft202012Validator(rules_schema()).iter_errors(data))
    if error is None:
        return
    loc: list[str | int] = list(error.absolute_path)
    message = error.message
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        allowed = set(error.schema.get("properties", {}))
        extra = sorted(k for k in error.instance if k not in allowed)
        if extra:
            loc.append(extra[0])
            message = f"unknown key {extra[0]!r} (valid: {', '.join(sorted(allowed))})"
    elif error.validator == "oneOf":
        message = f"invalid value {_short(error.instance)}: expected a list of values or {{not: [values]}}"
    elif error.validator == "enum":
        message = (
            f"invalid value {_short(error.instance)} (valid: {', '.join(map(str, error.validator_value))})"
        )
    raise UserError(message, file=path, line=lines.line(loc), field=_dotted(loc) or None)


def _parse_rule(item: dict[str, Any], loc: tuple[str | int, ...], where: _Where) -> Rule:
    for index, text in enumerate(item["evidence"]):
        if not _EVIDENCE.search(text):
            raise where.error(
                f"evidence {text!r} is not a public reference (owner/repo#N, PR #N, owner/repo path, or "
                "'read in <package> <version> wheel <file>:<lines>')",
                (*loc, "evidence", index),
            )
    return Rule(
        id=item["id"],
        cls=item["class"],
        sglang=_specifier(item.get("sglang", ""), (*loc, "sglang"), where),
        when=_parse_condition(item["when"], (*loc, "when"), where),
        unless=_parse_condition(item["unless"], (*loc, "unless"), where) if "unless" in item else None,
        reason=item["reason"],
        fix=item["fix"],
        evidence=tuple(item["evidence"]),
        line=where.lines.line(loc),
    )


def _parse_condition(data: dict[str, Any], loc: tuple[str | int, ...], where: _Where) -> Condition:
    fields = {name: _matcher(value) for name, value in data.items() if name in MATCH_FIELDS}
    for name, valid in (("gpu_arch", ARCHES), ("dsa_kv_layout", KV_LAYOUTS)):
        bad = [v for v in fields[name].values if v not in valid] if name in fields else []
        if bad:
            raise where.error(f"unknown {name} {bad[0]!r} (valid: {', '.join(valid)})", (*loc, name))
    missing = tuple(data.get("missing_kernel", ()))
    known = {lib.key for lib in backends.LIBRARIES}
    for index, key in enumerate(missing):
        if key not in known:
            raise where.error(
                f"unknown kernel library {key!r} (valid: {', '.join(sorted(known))})",
                (*loc, "missing_kernel", index),
            )
    packages = {
        pins.normalize_package(name): _specifier(spec, (*loc, "packages", name), where) or SpecifierSet()
        for name, spec in data.get("packages", {}).items()
    }
    return Condition(
        fields=fields,
        dsa_model=data.get("dsa_model"),
        env={name: _matcher(value, lower=True) for name, value in data.get("env", {}).items()},
        packages=packages,
        missing_kernel=missing,
    )


def _parse_default(item: dict[str, Any], loc: tuple[str | int, ...], where: _Where) -> DsaDefault:
    spec = _specifier(item["sglang"], (*loc, "sglang"), where)
    return DsaDefault(
        sglang=spec or SpecifierSet(),
        gpu_arch=tuple(item["gpu_arch"]),
        model_arch=tuple(item["model_arch"]) if "model_arch" in item else None,
        kv_cache_dtype=item["kv_cache_dtype"],
        prefill=item["prefill"],
        decode=item["decode"],
        evidence=tuple(item["evidence"]),
    )


def _matcher(data: Any, *, lower: bool = False) -> Matcher:
    negate = isinstance(data, dict)
    values = data["not"] if negate else data
    return Matcher(tuple(str(v).lower() if lower else str(v) for v in values), negate)


def _matcher_json(m: Matcher) -> Any:
    return {"not": list(m.values)} if m.negate else list(m.values)


def _specifier(text: str, loc: tuple[str | int, ...], where: _Where) -> SpecifierSet | None:
    if not text.strip():
        return None
    try:
        return SpecifierSet(text)
    except InvalidSpecifier:
        raise where.error(f"not a version specifier: {text!r} (e.g. '>=0.5.17,<0.5.23')", loc) from None


def _check_unique_ids(rules: Sequence[Rule], where: _Where) -> None:
    seen: set[str] = set()
    for index, rule in enumerate(rules):
        if rule.id in seen:
            raise where.error(f"duplicate rule id {rule.id!r}", ("rules", index, "id"))
        seen.add(rule.id)


# --- what a prediction is made from ---------------------------------------------------------------------


@dataclass(frozen=True)
class Context:
    """The facts a rule is tested against: one profile's effective configuration on one arch."""

    sglang_version: str | None
    gpu_arch: str
    model_arch: str
    dsa_model: bool
    effective: Mapping[str, str | None]
    quantization: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    packages: Mapping[str, str] = field(default_factory=dict)
    missing: frozenset[str] = frozenset()

    def value(self, name: str) -> str | None:
        if name == "gpu_arch":
            return self.gpu_arch
        if name == "model_arch":
            return self.model_arch
        if name == "quantization":
            return self.quantization
        return self.effective.get(name)


def _field_matches(ctx: Context, name: str, matcher: Matcher) -> bool:
    if name == "dsa_backend":
        return any(matcher.test(ctx.value(side)) for side in DSA_SIDES)
    return matcher.test(ctx.value(name))


def _package_matches(ctx: Context, name: str, spec: SpecifierSet) -> bool:
    version = _version(ctx.packages.get(name))
    return version is not None and spec.contains(version, prereleases=True)


@dataclass(frozen=True)
class ProfileInputs:
    """What SGLang sees for one profile: the same inputs ``bwstack explain`` passes to the resolution."""

    profile: str
    variant: str
    sglang_version: str | None
    model_config: Mapping[str, Any]
    requested: Mapping[str, str | None]
    extra_argv: tuple[str, ...]
    env: Mapping[str, str]
    packages: Mapping[str, str]
    quantization: str | None


def profile_inputs(stack: Stack, profile_name: str) -> ProfileInputs:
    """A profile's inputs, from :func:`bwstack.explain.profile_query` itself (so explain's cache is found)."""
    variant_name = stack.variant_name_for(profile_name)
    pinned = stack.variant(variant_name)
    snapshot = stack.snapshot(variant_name)
    version, query, _notes = explain.profile_query(stack, profile_name, arch=stack.settings.gpu_arch)
    return ProfileInputs(
        profile=profile_name,
        variant=variant_name,
        sglang_version=version or None,
        model_config=query.model_config,
        requested=dict(query.requested),
        extra_argv=tuple(query.extra_argv),
        env=dict(query.env),
        packages=package_versions(pinned, snapshot),
        quantization=stack.model.quantization,
    )


def package_versions(variant: pins.Variant, snapshot: sglang_cli.Snapshot | None) -> dict[str, str]:
    """Normalised package -> version in the image: the variant's pins, else the pinned SGLang's own ``==``."""
    out: dict[str, str] = {}
    if snapshot is not None and not snapshot.is_proxy:
        for name, spec in snapshot.requires_dist.items():
            exact = _exact_pin(spec)
            if exact:
                out[pins.normalize_package(name)] = exact
    for requirement in variant.overrides:
        name, sep, version = requirement.partition("==")
        if sep:
            out[pins.normalize_package(name)] = version.strip()
    out.update({pins.normalize_package(name): version for name, version in variant.python.items()})
    if variant.sglang_version:
        out["sglang"] = variant.sglang_version
    return out


def is_dsa_model(config: Mapping[str, Any]) -> bool:
    """SGLang's is_deepseek_dsa: a DSA architecture with ``index_topk`` set."""
    archs = config.get("architectures") or ["?"]
    return str(archs[0]) in DSA_ARCHS and config.get("index_topk") is not None


def canonical(name: str, value: Any) -> str | None:
    """A resolved or requested value in semantic spelling (``nsa`` -> ``dsa``, ``bf16`` -> ``bfloat16``)."""
    if value is None:
        return None
    text = str(value)
    if name == "kv_cache_dtype" and text == "bf16":
        return "bfloat16"
    return backends.canonical_value(name, text)


def static_effective(
    inputs: ProfileInputs, arch: str, book: RuleBook
) -> tuple[dict[str, str | None], list[str]]:
    """The static fallback (module docstring, step 1): requested values plus version-independent facts."""
    eff = {name: canonical(name, inputs.requested.get(name)) for name in SEMANTIC_FIELDS}
    config = inputs.model_config
    if not is_dsa_model(config):
        return eff, ["not a DSA model: values left to SGLang stay unknown without a cached explain"]
    notes: list[str] = []
    major = explain.ARCH_CAPABILITY[arch][0]
    if eff["attention_backend"] is None:
        eff["attention_backend"] = "dsa"
    if eff["kv_cache_dtype"] in (None, "auto"):
        sinks = bool(config.get("learnable_sink"))
        eff["kv_cache_dtype"] = "fp8_e4m3" if major >= 10 and not sinks else "bfloat16"
    model_arch = _model_arch(config)
    row = book.dsa_default(inputs.sglang_version, arch, model_arch, eff["kv_cache_dtype"])
    for side, attr in (("dsa_prefill_backend", "prefill"), ("dsa_decode_backend", "decode")):
        if eff[side] is None:
            eff[side] = getattr(row, attr) if row is not None else None
    if row is None and None in (eff["dsa_prefill_backend"], eff["dsa_decode_backend"]):
        notes.append(
            f"DSA backends SGLang {inputs.sglang_version or '?'} picks on {arch} are not in the rules' "
            "dsa_defaults; run 'bwstack explain' to resolve them"
        )
    return eff, notes


def dsa_kv_layout(eff: Mapping[str, str | None], *, dsa_model: bool, version: str | None) -> str | None:
    """How a DSA model stores its KV: ``packed_fp8`` (FP8 nope + scales + bf16 rope), ``raw_fp8`` or ``bf16``.

    Packed unless a DSA side is trtllm (read in sglang 0.5.9 wheel model_runner_kv_cache_mixin.py:219-246) or,
    from 0.5.23, both sides are tilelang (kv_cache_configurator.py:3412-3470); the DSA sides are resolved for
    DSA models whatever the attention backend. None when not a DSA model or a side is unknown.
    """
    if not dsa_model:
        return None
    kv = eff.get("kv_cache_dtype")
    if kv == "bfloat16":
        return "bf16"
    if kv != "fp8_e4m3":
        return None
    sides = tuple(eff.get(side) for side in DSA_SIDES)
    if "trtllm" in sides:
        return "raw_fp8"
    parsed = _version(version)
    if sides == ("tilelang", "tilelang") and parsed is not None and parsed >= Version("0.5.23"):
        return "raw_fp8"
    return None if None in sides else "packed_fp8"


# --- kernel facts ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class KernelFacts:
    """A variant's committed ``kernel-archs.json``: per kernel library, its verdict on every arch."""

    path: Path
    doc: Mapping[str, Any]

    def verdict(self, key: str, arch: str) -> str | None:
        """native/ptx/jit/missing if audited; ``absent`` when not installed; None when not audited."""
        lib = self.doc.get("libraries", {}).get(key)
        if lib is not None:
            value = lib.get("verdicts", {}).get(arch)
            return str(value) if value is not None else None
        return "absent" if key in self.doc.get("absent", {}) else None

    def reason(self, key: str, arch: str) -> str:
        lib = self.doc.get("libraries", {}).get(key) or {}
        return str(lib.get("reasons", {}).get(arch, ""))

    def label(self) -> str:
        wheels = ", ".join(f"{w['package']} {w['version']}" for w in self.doc.get("wheels", []))
        return f"images/{self.doc.get('variant', '?')}/{KERNEL_FACTS_FILE} (audit of the wheels {wheels})"


def load_kernel_facts(variant_dir: Path) -> KernelFacts | None:
    """The variant's kernel facts, or None when the variant has none committed."""
    path = variant_dir / KERNEL_FACTS_FILE
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise UserError(f"unreadable kernel facts: {exc}", file=path) from None
    if not isinstance(doc, dict) or doc.get("schema") != KERNEL_FACTS_SCHEMA:
        raise UserError(f"not a {KERNEL_FACTS_SCHEMA} document; regenerate it", file=path)
    return KernelFacts(path, doc)


@dataclass(frozen=True)
class KernelUse:
    """One backend the effective configuration runs, and whether its libraries have code for the arch."""

    field: str
    value: str
    status: Literal["ok", "missing", "unknown"]
    missing: tuple[str, ...]
    detail: str

    def to_json(self) -> dict[str, Any]:
        return {
            "field": self.field,
            "value": self.value,
            "status": self.status,
            "missing": list(self.missing),
            "detail": self.detail,
        }


def backends_in_use(eff: Mapping[str, str | None]) -> list[tuple[str, str]]:
    """(field, value) of each backend that runs: the common libraries, attention, DSA sides, MoE, FP4 GEMM."""
    used = [("common", "torch"), ("common", "sgl_kernel")]
    attention = eff.get("attention_backend")
    if attention:
        used.append(("attention_backend", attention))
    names = [*DSA_SIDES] if attention == "dsa" else []
    names += ["moe_runner_backend", "fp4_gemm_backend"]
    used += [(name, value) for name in names if (value := eff.get(name))]
    return used


def judge_use(name: str, value: str, facts: KernelFacts | None, arch: str) -> KernelUse | None:
    """The kernel verdict of one backend; None when the backend table does not know the value (``auto``)."""
    use = backends.lookup(name, value)
    if use is None:
        return None
    if facts is None:
        return KernelUse(name, value, "unknown", (), "no kernel facts for this variant")
    missing: list[str] = []
    details: list[str] = []
    unknown = False
    for group in use.needs:
        verdicts = {key: facts.verdict(key, arch) for key in group}
        good = [key for key, v in verdicts.items() if v in _OK_KERNEL]
        bad = [key for key, v in verdicts.items() if v == "missing"]
        if good:
            details.append(f"{good[0]}: {verdicts[good[0]]}")
        elif bad:
            missing += bad
            details += [f"{key}: {facts.reason(key, arch) or 'no kernel'}" for key in bad]
        else:
            unknown = True
            details.append(f"{' or '.join(group)}: not audited")
    status: Literal["ok", "missing", "unknown"] = "missing" if missing else ("unknown" if unknown else "ok")
    return KernelUse(name, value, status, tuple(missing), "; ".join(details))


# --- the prediction -------------------------------------------------------------------------------------


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
        eff = {name: canonical(name, resolution.value(name)) for name in SEMANTIC_FIELDS}
    else:
        eff, fallback_notes = static_effective(inputs, arch, book)
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
        model_arch=_model_arch(inputs.model_config),
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
    from healthchecks import signatures

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
    """Warnings for ``bwstack validate``: profiles whose prediction on their arch contradicts ``expect``."""
    book = load_rules()
    warnings: list[str] = []
    for name, profile in stack.iter_profiles():
        pred = predict(stack, name, stack.arch_for(name), explain_mode=explain_mode, book=book)
        if pred.agrees is not False:
            continue
        line = stack.line_of("profiles", name, "expect")
        where = f"{stack.path}:{line}" if line else str(stack.path)
        step = f"rule {pred.decision.rule}" if pred.decision.rule else pred.decision.source
        warnings.append(
            f"{where}: profile {name}: expect: {profile.expect}, but bwstack predicts {pred.verdict} on "
            f"{pred.arch} ({step}): {pred.decision.reason}"
        )
    return warnings


# --- listing the rules ----------------------------------------------------------------------------------


def rules_data(book: RuleBook | None = None) -> dict[str, Any]:
    """Machine-readable rule list (proposed ``bwstack list --rules --json``)."""
    book = book or load_rules()
    return {
        "file": str(book.path),
        "rules": [r.to_json() for r in book.rules],
        "dsa_defaults": [
            {
                "sglang": str(d.sglang),
                "gpu_arch": list(d.gpu_arch),
                "model_arch": list(d.model_arch or []),
                "kv_cache_dtype": d.kv_cache_dtype,
                "prefill": d.prefill,
                "decode": d.decode,
                "evidence": list(d.evidence),
            }
            for d in book.dsa_defaults
        ],
    }


def render_rules_text(book: RuleBook | None = None, width: int | None = None) -> str:
    """The rules as text (``bwstack list --rules``), in the order they are tried: per rule its id whole, its
    class and SGLang range, then when / why / fix / evidence wrapped to the terminal width (80 on a pipe)."""
    from bwstack import textlayout

    book = book or load_rules()
    width = width or textlayout.terminal_width()
    lines = [f"Known-bad combinations ({len(book.rules)} rules, first match wins)"]
    for rule in book.rules:
        meta = f"[{rule.cls}; sglang {rule.sglang or 'all'}]"
        head = f"{rule.id}  {meta}"
        lines += ["", head] if len(head) <= width else ["", rule.id, textlayout.INDENT + meta]
        parts = [f"when: {rule.describe()}", f"why: {rule.reason}", f"fix: {rule.fix}"]
        parts += [f"evidence: {item}" for item in rule.evidence]
        for part in parts:
            wrapped = textlayout.wrap(part, width - 2, textlayout.INDENT)
            lines += [wrapped[0], *("  " + line for line in wrapped[1:])]
    return "\n".join(lines) + "\n"


def kernel_packages(
    variant: pins.Variant, snapshot: sglang_cli.Snapshot | None
) -> tuple[list[tuple[str, str]], dict[str, str]]:
    """The (package, version) wheels to audit for a variant, and the kernel packages that cannot be (why)."""
    versions = package_versions(variant, snapshot)
    replaced = {pins.normalize_package(p): src.name for src in variant.sources.values() for p in src.replaces}
    wanted: list[tuple[str, str]] = []
    skipped: dict[str, str] = {}
    for package in KERNEL_PACKAGES:
        key = pins.normalize_package(package)
        if key in replaced:
            skipped[package] = f"built from source ([sources.{replaced[key]}]); audit the built image instead"
        elif key in versions:
            wanted.append((package, versions[key]))
    return wanted, skipped


def generate_kernel_facts(
    images_dir: Path,
    variant_name: str,
    *,
    wheel_dir: Path | None = None,
    progress: Callable[[str], object] | None = None,
) -> dict[str, Any]:
    """Audit the wheels of a variant's kernel pins (downloaded with pip when missing) for every arch."""
    variant = pins.load_variant(images_dir, variant_name)
    snapshot = _snapshot_or_none(variant)
    wanted, skipped = kernel_packages(variant, snapshot)
    if not wanted:
        raise UserError(
            f"variant {variant_name} pins no kernel package wheel to audit", file=variant.pins_path
        )
    cache = wheel_dir or default_wheel_dir()
    inventory = audit.Inventory("wheels", variant_name, "python")
    wheels: list[dict[str, str]] = []
    for package, version in wanted:
        path = fetch_wheel(package, version, cache)
        if progress is not None:
            progress(f"auditing {path.name}")
        part = audit.inventory_wheel(path, "python")
        inventory.files.extend(part.files)
        inventory.paths |= part.paths
        wheels.append({"package": package, "version": version, "file": path.name, "sha256": _sha256(path)})
    return _facts_document(variant, snapshot, inventory, wheels, skipped)


def _facts_document(
    variant: pins.Variant,
    snapshot: sglang_cli.Snapshot | None,
    inventory: audit.Inventory,
    wheels: list[dict[str, str]],
    skipped: dict[str, str],
) -> dict[str, Any]:
    reports = {arch: audit.build_report(inventory, explain.ARCH_CAPABILITY[arch]) for arch in ARCHES}
    by_arch = {arch: {r.library.key: r for r in rep.libraries} for arch, rep in reports.items()}
    audited = {pins.normalize_package(w["package"]): f"{w['package']} {w['version']}" for w in wheels}
    libraries: dict[str, Any] = {}
    absent: dict[str, str] = {}
    not_audited: dict[str, str] = {}
    for lib in backends.LIBRARIES:
        results = {arch: by_arch[arch][lib.key] for arch in ARCHES}
        if all(r.verdict == "absent" for r in results.values()):
            _file_absent(lib, audited, absent, not_audited)
            continue
        first = next(iter(results.values()))
        targets = first.to_json()
        libraries[lib.key] = {
            "sass": targets["sass"],
            "ptx": targets["ptx"],
            "files": len(first.files),
            "verdicts": {arch: r.verdict for arch, r in results.items()},
            "reasons": {arch: r.reason for arch, r in results.items()},
        }
    return {
        "schema": KERNEL_FACTS_SCHEMA,
        "variant": variant.name,
        "sglang_version": variant.sglang_version or (snapshot.sglang_version if snapshot else ""),
        "generated_by": f"bwstack lock --kernel-facts --variant {variant.name}",
        "reader": "python (bwstack.fatbin)",
        "note": "PyPI wheels of the variant's pins; the base image may carry other builds of the same "
        "versions (check with bwstack audit --image)",
        "arches": list(ARCHES),
        "wheels": wheels,
        "skipped": skipped,
        "libraries": libraries,
        "absent": absent,
        "not_audited": not_audited,
    }


def _file_absent(
    lib: backends.Library, audited: Mapping[str, str], absent: dict[str, str], not_audited: dict[str, str]
) -> None:
    """Say why a library has no files in the audited wheels: not installed, or installed but not audited."""
    packages = [pins.normalize_package(p) for p in lib.packages]
    carriers = [audited[p] for p in packages if p in audited]
    downloaded = [RUNTIME_DOWNLOADED[p] for p in packages if p in RUNTIME_DOWNLOADED]
    if carriers:
        absent[lib.key] = "not in " + ", ".join(carriers)
    elif downloaded:
        not_audited[lib.key] = downloaded[0]
    elif any(p in _KERNEL_PACKAGE_KEYS for p in packages):
        absent[lib.key] = f"the variant pins no {' / '.join(lib.packages)}"
    else:
        not_audited[lib.key] = (
            f"{' / '.join(lib.packages)} (in the base image) is not among the audited wheels"
        )


def write_kernel_facts(path: Path, doc: Mapping[str, Any]) -> None:
    """Write a kernel facts document atomically."""
    from bwstack.files import atomic_write

    atomic_write(path, json.dumps(doc, indent=2, sort_keys=False) + "\n")


def run_kernel_facts(
    images_dir: Path,
    variants: Sequence[str],
    *,
    check: bool,
    wheel_dir: Path | None = None,
    echo: Callable[[str], object] = print,
) -> int:
    """Regenerate (or with ``check`` compare) ``images/<v>/kernel-archs.json``; 0 ok, 1 drift."""
    status = 0
    for name in variants:
        doc = generate_kernel_facts(images_dir, name, wheel_dir=wheel_dir, progress=echo)
        path = images_dir / name / KERNEL_FACTS_FILE
        if not check:
            write_kernel_facts(path, doc)
            echo(f"wrote {path}")
            continue
        committed = load_kernel_facts(images_dir / name)
        if committed is None or dict(committed.doc) != doc:
            echo(
                f"{path}: differs from a fresh audit of the wheels; "
                f"run 'bwstack lock --kernel-facts --variant {name}'"
            )
            status = 1
        else:
            echo(f"{path}: ok")
    return status


def check_kernel_facts(images_dir: Path, variant_name: str) -> list[str]:
    """Form and pin checks of a committed kernel facts file, offline; an empty list when all is well."""
    variant = pins.load_variant(images_dir, variant_name)
    facts = load_kernel_facts(variant.dir)
    if facts is None:
        return [f"{variant.dir / KERNEL_FACTS_FILE}: missing"]
    doc = facts.doc
    problems: list[str] = []
    if doc.get("variant") != variant_name:
        problems.append(f"variant is {doc.get('variant')!r}, expected {variant_name!r}")
    wanted, _ = kernel_packages(variant, _snapshot_or_none(variant))
    recorded = [(w.get("package"), w.get("version")) for w in doc.get("wheels", [])]
    if recorded != wanted:
        problems.append(f"audited wheels {recorded} do not match the variant's pins {wanted}; regenerate")
    for wheel in doc.get("wheels", []):
        if not re.fullmatch(r"[0-9a-f]{64}", str(wheel.get("sha256", ""))):
            problems.append(f"{wheel.get('file')}: no sha256")
    problems += _check_libraries(doc)
    return [f"{facts.path}: {p}" for p in problems]


def _check_libraries(doc: Mapping[str, Any]) -> list[str]:
    known = {lib.key: lib for lib in backends.LIBRARIES}
    problems: list[str] = []
    listed = set(doc.get("libraries", {})) | set(doc.get("absent", {})) | set(doc.get("not_audited", {}))
    if listed != set(known):
        problems.append(f"libraries listed {sorted(listed)} differ from bwstack.backends {sorted(known)}")
    for key, entry in doc.get("libraries", {}).items():
        lib = known.get(key)
        verdicts = entry.get("verdicts", {})
        if lib is None or set(verdicts) != set(ARCHES):
            problems.append(f"{key}: unknown library or verdicts not given for every arch")
            continue
        if lib.is_jit:
            bad = [a for a, v in verdicts.items() if v not in ("jit", "missing")]
        else:
            bad = [a for a, v in verdicts.items() if v != _binary_verdict(entry, a)]
        if bad:
            problems.append(f"{key}: verdicts for {', '.join(bad)} do not follow from its SASS/PTX targets")
    return problems


def _binary_verdict(entry: Mapping[str, Any], arch: str) -> str:
    from bwstack import fatbin

    device = explain.ARCH_CAPABILITY[arch]
    if any(fatbin.parse_arch_name(t).runs_on(device) for t in entry.get("sass", [])):
        return "native"
    if any(fatbin.parse_arch_name(t).runs_on(device) for t in entry.get("ptx", [])):
        return "ptx"
    return "missing"


def default_wheel_dir() -> Path:
    """``$BWSTACK_WHEEL_CACHE`` or ``~/.cache/bwstack/wheels`` (outside any repository)."""
    configured = os.environ.get("BWSTACK_WHEEL_CACHE")
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "bwstack" / "wheels"


def fetch_wheel(package: str, version: str, cache: Path) -> Path:
    """The Linux x86-64 wheel of ``package==version`` in ``cache``, downloaded with pip when missing."""
    found = find_wheel(cache, package, version)
    if found is not None:
        return found
    cache.mkdir(parents=True, exist_ok=True)
    platforms = [arg for p in _WHEEL_PLATFORMS for arg in ("--platform", p)]
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        *platforms,
        "--python-version",
        "3.11",
        "--implementation",
        "cp",
        f"{package}=={version}",
        "-d",
        str(cache),
    ]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, check=False)
    except subprocess.TimeoutExpired:
        raise ExternalError(f"pip download {package}=={version} timed out") from None
    found = find_wheel(cache, package, version)
    if proc.returncode != 0 or found is None:
        raise ExternalError(
            f"pip download {package}=={version} failed: {' '.join(proc.stderr.split())[-300:]}"
        )
    return found


def find_wheel(cache: Path, package: str, version: str) -> Path | None:
    """A wheel of ``package==version`` for Linux x86-64 (or any platform) already in ``cache``."""
    if not cache.is_dir():
        return None
    want_name, want_version = canonicalize_name(package), _version(version)
    for path in sorted(cache.glob("*.whl")):
        try:
            name, ver, _build, tags = parse_wheel_filename(path.name)
        except (InvalidWheelFilename, InvalidVersion):
            continue
        if name == want_name and ver == want_version and any(_linux_x86(t.platform) for t in tags):
            return path
    return None


def _linux_x86(platform: str) -> bool:
    return platform == "any" or (platform.endswith("x86_64") and "linux" in platform)


def _snapshot_or_none(variant: pins.Variant) -> sglang_cli.Snapshot | None:
    if not variant.cli_snapshot_path.is_file():
        return None
    return sglang_cli.load_snapshot(variant.cli_snapshot_path)


# --- small helpers --------------------------------------------------------------------------------------


def _version(text: str | None) -> Version | None:
    if not text:
        return None
    try:
        return Version(text)
    except InvalidVersion:
        return None


def _exact_pin(spec: str) -> str | None:
    head = spec.split(";", maxsplit=1)[0].strip()
    return head[2:].strip() if head.startswith("==") and "," not in head else None


def _model_arch(config: Mapping[str, Any]) -> str:
    archs = config.get("architectures") or ["?"]
    return str(archs[0])


def _sha256(path: Path) -> str:
    from bwstack.files import sha256_file

    return sha256_file(path)


def _dotted(loc: Iterable[str | int]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _short(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
