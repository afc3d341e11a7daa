"""The rules file: known-bad backend combinations as data (``data/rules.yaml``), parsed and checked
against its schema, and listed for ``bwstack rules``.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from bwstack import textlayout
from bwstack.errors import UserError
from bwstack.know import backends
from bwstack.stack import pins
from bwstack.stack.schema import EXPECT_CLASSES
from bwstack.stack.validation import field_path
from bwstack.stack.yamlload import Lines, load_yaml
from healthchecks import vocabulary

DATA = Path(__file__).resolve().parents[2] / "data"
RULES_FILE = DATA / "rules.yaml"
RULES_SCHEMA = DATA / "schemas" / "rules.schema.json"
ARCHES: tuple[str, ...] = tuple(vocabulary.ARCHS)
FAILURE_CLASSES: tuple[str, ...] = tuple(c for c in EXPECT_CLASSES if c != "healthy")
KV_LAYOUTS = ("packed_fp8", "raw_fp8", "bf16")
#: fields a condition may test with a value matcher: the backend fields, ``dsa_backend`` (either DSA side),
#: the arch, the model's architecture, the DSA KV layout and the quantization
MATCH_FIELDS = (
    "gpu_arch",
    "model_arch",
    *vocabulary.BACKEND_FIELDS,
    "dsa_backend",
    "dsa_kv_layout",
    "quantization",
)
_EVIDENCE = re.compile(
    r"(?:^|\s|/)(?:[\w.-]+/[\w.-]+)?#\d+"  # owner/repo#N, #N, PR #N
    r"|read in [\w.-]+ \d[\w.]* wheel \S+"  # read in sglang 0.5.23 wheel path:lines
    r"|^[\w.-]+/[\w.-]+ \S"  # owner/repo path-or-title
)


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
        parsed = version_or_none(version)
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
class RuleBook:
    """The parsed rules file."""

    path: Path
    rules: tuple[Rule, ...]
    #: rules that warn (a risk such as a hang under load) without changing the predicted verdict
    warnings: tuple[Rule, ...] = ()

    def rule(self, rule_id: str) -> Rule:
        for rule in self.rules:
            if rule.id == rule_id:
                return rule
        raise KeyError(rule_id)


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
    warnings = tuple(
        _parse_rule(item, ("warnings", i), where) for i, item in enumerate(data.get("warnings", []))
    )
    _check_unique_ids(rules + warnings, where)
    return RuleBook(path, rules, warnings)


@dataclass(frozen=True)
class _Where:
    """Turns a path inside the rules file into a UserError with file:line and the dotted field."""

    path: Path
    lines: Lines

    def error(self, message: str, loc: Sequence[str | int]) -> UserError:
        return UserError(message, file=self.path, line=self.lines.line(loc), field=field_path(loc) or None)


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
    raise UserError(message, file=path, line=lines.line(loc), field=field_path(loc) or None)


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
        return any(matcher.test(ctx.value(side)) for side in vocabulary.DSA_SIDES)
    return matcher.test(ctx.value(name))


def _package_matches(ctx: Context, name: str, spec: SpecifierSet) -> bool:
    version = version_or_none(ctx.packages.get(name))
    return version is not None and spec.contains(version, prereleases=True)


def rules_data(book: RuleBook | None = None) -> dict[str, Any]:
    """Machine-readable rule list (``bwstack list --rules --json``), with the DSA defaults the static fallback
    uses (their one table: ``healthchecks/vocabulary.py``)."""
    book = book or load_rules()
    return {
        "file": str(book.path),
        "rules": [r.to_json() for r in book.rules],
        "dsa_defaults": [
            {
                "sglang": ",".join(
                    (f">={_dotted_version(d.first)}", *([f"<={_dotted_version(d.last)}"] if d.last else []))
                ),
                "gpu_arch": list(vocabulary.archs_with_major(d.majors)),
                "model_arch": [d.model_arch] if d.model_arch else [],
                "kv_cache_dtype": d.kv,
                "prefill": d.prefill,
                "decode": d.decode,
                "overrides_user": d.overrides_user,
                "evidence": list(d.evidence),
            }
            for d in vocabulary.DSA_DEFAULTS
        ],
    }


def render_rules_text(book: RuleBook | None = None, width: int | None = None) -> str:
    """The rules as text (``bwstack list --rules``), in the order they are tried: per rule its id whole, its
    class and SGLang range, then when / why / fix / evidence wrapped to the terminal width (80 on a pipe)."""

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


def _dotted_version(version: tuple[int, ...]) -> str:
    return ".".join(map(str, version))


def version_or_none(text: str | None) -> Version | None:
    if not text:
        return None
    try:
        return Version(text)
    except InvalidVersion:
        return None


def _short(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
