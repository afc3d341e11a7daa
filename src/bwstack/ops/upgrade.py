"""``bwstack upgrade OLD NEW [PROFILE...]``: what moving profiles to another SGLang does, before the pull.

OLD and NEW are variants (``images/<name>/``) or SGLang releases: a bare version is the stack's variant with
that release's wheel (:func:`side`, via :func:`bwstack.build.lock.variant_new.plan`, kept in
``$BWSTACK_CACHE/upgrade``;
``bwstack variant new`` writes the same variant into images/). For each profile it reports, from each
version's own parser snapshot, the flags renamed, deprecated or removed and what each becomes
(:func:`flag_findings`), values the new parser refuses and the changed defaults of backend flags left unset;
then per GPU arch the effective backends by each version's own resolution code (:mod:`bwstack.know.explain`),
the rules that start or stop applying and the predicted verdicts (:func:`bwstack.know.rules.predict`),
compared with the report-diff tiers (:func:`bwstack.sweep.reportdiff.change_kind`). :func:`apply` rewrites
renamed flags in the profiles file (YAML round-trip, comments kept) and returns the diff. Markdown:
:mod:`bwstack.ops.upgrade_render`.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bwstack.build.lock import args as lock_args
from bwstack.build.lock import variant_new
from bwstack.errors import UserError
from bwstack.files import atomic_write
from bwstack.know import explain, rules, venvs
from bwstack.stack import pins, snapshots
from bwstack.stack.schema import Stack
from bwstack.stack.yamlload import load_yaml, parse_yaml
from bwstack.sweep import reportdiff
from healthchecks import vocabulary

SCHEMA = "bwstack.upgrade/1"
#: fields the effective configuration is compared on (the rules' view of SGLang's resolution)
EFFECTIVE_FIELDS: tuple[str, ...] = (*vocabulary.BACKEND_FIELDS, "dsa_kv_layout")


# --- the two sides ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Side:
    """One end of the upgrade: a variant of the stack (maybe made from a bare version) and its parser."""

    asked: str
    variant: str
    version: str
    snapshot: snapshots.Snapshot
    made_from: str | None = None  # the stack variant a bare version was applied to

    @property
    def label(self) -> str:
        how = f", {self.made_from} with sglang {self.version}'s wheel" if self.made_from else ""
        return f"{self.variant} (sglang {self.version or '?'}{how})"

    def _replace_asked(self, asked: str) -> Side:
        return dataclasses.replace(self, asked=asked)

    def to_json(self) -> dict[str, Any]:
        return {"asked": self.asked, "variant": self.variant, "sglang_version": self.version,
                "made_from": self.made_from, "parser": self.snapshot.provenance.get("source")}  # fmt: skip


def side(stack: Stack, asked: str) -> Side:
    """A variant folder by name, else an SGLang release on the stack's variant (a CPU stack: the CPU variant
    of images/ that pins that release); UserError otherwise."""
    if (stack.images_dir / asked / pins.PINS_FILE).is_file():
        variant = stack.variant(asked)
        snapshot = stack.snapshot(asked)
        return Side(asked, asked, variant.sglang_version or snapshot.sglang_version, snapshot)
    if not venvs.VERSION_RE.fullmatch(asked):
        known = ", ".join(pins.list_variants(stack.images_dir))
        raise UserError(
            f"{asked!r} is neither a variant ({known}) nor an SGLang release version (e.g. 0.5.17)"
        )
    source = stack.variant(stack.settings.variant)
    if (
        source.device == "cpu"
    ):  # a CPU closure is found by hand, never made from a wheel: the one that pins it
        pinned = [
            n for n in pins.list_variants(stack.images_dir)
            if stack.variant(n).device == "cpu" and stack.variant(n).sglang_version == asked
        ]  # fmt: skip
        if not pinned:
            raise UserError(f"no CPU variant of images/ pins sglang {asked}; name one: "
                            f"{', '.join(pins.list_variants(stack.images_dir))}")  # fmt: skip
        return side(stack, pinned[0])._replace_asked(asked)
    folder = _release_variant(source, asked)
    name = folder.name
    stack.variants[name] = pins.load_variant(folder.parent, name)
    stack.snapshots[name] = snapshots.load_snapshot(folder / pins.SNAPSHOT_FILE)
    return Side(asked, name, asked, stack.snapshots[name], made_from=source.name)


def _release_variant(source: pins.Variant, version: str) -> Path:
    """``$BWSTACK_CACHE/upgrade/<key>/sglang-<version>/``: ``source`` with sglang ``version`` (made once)."""

    key = hashlib.sha256(f"{source.pins_path.read_text(encoding='utf-8')}\0{version}".encode()).hexdigest()[
        :16
    ]
    folder = venvs.cache_root() / "upgrade" / key / f"sglang-{version}"
    if (folder / pins.SNAPSHOT_FILE).is_file() and (folder / pins.PINS_FILE).is_file():
        return folder
    made = variant_new.plan(folder.name, version, source)
    atomic_write(folder / pins.PINS_FILE, made.pins_text)
    shipped = lock_args.release_snapshot_path(version)
    if shipped.is_file():  # a release between the variants: its parser is shipped, read from its wheel
        atomic_write(folder / pins.SNAPSHOT_FILE, shipped.read_text(encoding="utf-8"))
    else:
        lock_args.lock_args(folder, echo=venvs.progress_line)
    return folder


def on_variant(stack: Stack, variant: str) -> Stack:
    """The stack with every profile on ``variant`` (the variants and snapshots loaded so far are shared)."""
    profiles = {name: p.model_copy(update={"variant": variant}) for name, p in stack.profiles.items()}
    return dataclasses.replace(stack, profiles=profiles)


# --- flags --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Finding:
    """One thing about a profile's command line that differs between the two parsers."""

    kind: str  # renamed | deprecated | removed | invalid_value | default_changed | spelling
    where: str  # the profile field or extra_args item it is about
    old: str
    new: str | None  # what it becomes (None: nothing does)
    detail: str
    rewrite: bool = False  # --apply replaces ``old`` by ``new`` in the profiles file

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


Checks = dict[tuple[str, ...], list[snapshots.ArgProblem]]


def flag_findings(
    stack: Stack, name: str, old: Side, new: Side, checks: Checks | None = None
) -> list[Finding]:
    """Backend flags and values, extra args (model's and profile's) and backend defaults, old -> new.

    ``checks`` keeps the new parser's verdict per argv between profiles (the model's is everyone's)."""
    checks = {} if checks is None else checks
    profile = stack.profile(name)
    out: list[Finding] = []
    for semantic, value in profile.backends().items():
        where = f"profiles.{name}.{semantic}"
        before, after = old.snapshot.option_for(semantic), new.snapshot.option_for(semantic)
        if value is None:
            flag_a, flag_b = old.snapshot.flag_for(semantic), new.snapshot.flag_for(semantic)
            if flag_a and flag_b and flag_a.default != flag_b.default:
                out.append(Finding("default_changed", where, str(flag_a.default), str(flag_b.default),
                                   f"{after} is left unset; its default changed"))  # fmt: skip
            continue
        if after is None:
            out.append(
                Finding(
                    "removed", where, str(before), None, f"{new.snapshot.label} has no flag for {semantic}"
                )
            )
            continue
        if before != after:
            out.append(
                Finding(
                    "renamed", where, str(before), after, "bwstack spells it per version; nothing to edit"
                )
            )
        spelt_a, spelt_b = (
            old.snapshot.spell_value(semantic, value),
            new.snapshot.spell_value(semantic, value),
        )
        if spelt_b is None:
            valid = ", ".join(new.snapshot.valid_values(semantic) or ())
            out.append(Finding("invalid_value", where, value, None, f"{new.snapshot.label} accepts {valid}"))
        elif spelt_a is not None and spelt_a != spelt_b:
            out.append(Finding("spelling", where, f"{before} {spelt_a}", f"{after} {spelt_b}",
                               "bwstack spells it per version; nothing to edit"))  # fmt: skip
    for path, argv in (("model.extra_args", stack.model.extra_args),
                       (f"profiles.{name}.extra_args", profile.extra_args)):  # fmt: skip
        out += _argv_findings(path, list(argv), old, new, checks)
    return out


def _argv_findings(path: str, argv: list[str], old: Side, new: Side, checks: Checks) -> list[Finding]:
    out: list[Finding] = []
    renamed = list(argv)
    for index, item in enumerate(argv):
        option, eq, value = item.partition("=")
        if not item.startswith("--"):
            continue
        where = f"{path}[{index}]"
        flag_b = new.snapshot.flag(option)
        if flag_b is None:
            found = successor(option, old.snapshot, new.snapshot)
            if found.use:
                renamed[index] = found.use + (eq + value if eq else "")
            out.append(Finding("renamed" if found.use else "removed", where, option, found.use, found.why,
                               rewrite=found.use is not None))  # fmt: skip
        elif flag_b.deprecated and not (old.snapshot.flag(option) or flag_b).deprecated:
            use = flag_b.deprecated.get("use")
            clean = _plain_successor(str(use), new.snapshot, flag_b) if use else None
            if clean:
                renamed[index] = clean + (eq + value if eq else "")
            out.append(Finding("deprecated", where, option, str(use) if use else None,
                               f"deprecated in {new.snapshot.label}", rewrite=clean is not None))  # fmt: skip
    if tuple(renamed) not in checks:
        checks[tuple(renamed)] = snapshots.check_argv(new.snapshot, renamed) if renamed else []
    for problem in checks[tuple(renamed)]:
        if problem.message.startswith(("deprecated:", "unknown flag")):
            continue
        out.append(Finding("invalid_value", f"{path}[{problem.index}]", problem.token, None, problem.message))
    return out


@dataclass(frozen=True)
class Successor:
    use: str | None
    why: str


def successor(option: str, old: snapshots.Snapshot, new: snapshots.Snapshot) -> Successor:
    """What a flag the new parser lacks became: its deprecation target, a flag with the same dest, else the
    flags extending its name (a suggestion; only a single one is taken)."""
    before = old.flag(option)
    gone = f"{new.label} has no {option}"
    if before is not None and before.deprecated and before.deprecated.get("use"):
        use = _plain_successor(str(before.deprecated["use"]), new, before)
        if use:
            return Successor(use, f"{gone}; {old.label} deprecated it for {use}")
    if before is not None:
        same = [f for f in new.flags if f.dest == before.dest and not f.deprecated]
        if len(same) == 1:
            return Successor(same[0].name, f"{gone}; {same[0].name} sets the same field ({before.dest})")
    longer = sorted(
        o for o in new.by_option if o.startswith(option + "-") and not new.by_option[o].deprecated
    )
    if len(longer) == 1:
        return Successor(longer[0], f"{gone}; {longer[0]} is the one flag extending its name")
    if longer:
        return Successor(None, f"{gone}; pick one of {', '.join(longer)} (flags extending its name)")
    return Successor(None, f"{gone} and no successor is named")


def _plain_successor(use: str, new: snapshots.Snapshot, before: snapshots.Flag) -> str | None:
    """``use`` when it is one flag of ``new`` taking a value as ``before`` did (so a rewrite is exact)."""
    flag = new.flag(use)
    if flag is None or flag.deprecated or flag.takes_value != before.takes_value:
        return None
    return use


def defaults_changed(stack: Stack, old: Side, new: Side) -> list[dict[str, Any]]:
    """Flags both parsers have whose default changed, but those the stack sets (model, profiles, backends)."""
    given: set[str] = set(snapshots.MODEL_FLAGS.values()) | set(vocabulary.TP_FLAGS)
    for argv in (stack.model.extra_args, *(p.extra_args for p in stack.profiles.values())):
        given |= {item.partition("=")[0] for item in argv if item.startswith("--")}
    for flags in vocabulary.SEMANTIC_FLAGS.values():
        given |= set(flags)
    out = []
    for flag in new.snapshot.flags:
        before = old.snapshot.flag(flag.name)
        if before is None or flag.name in given or flag.action in ("help", "version") or flag.deprecated:
            continue  # a deprecated flag's default is argparse's SUPPRESS marker, not a value
        if before.default != flag.default:
            out.append({"flag": flag.name, "old": before.default, "new": flag.default})
    return out


# --- per arch -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ArchChange:
    """One profile on one arch: each side's prediction and what differs."""

    arch: str
    old: rules.Prediction
    new: rules.Prediction
    kind: str | None  # reportdiff.change_kind: regression | improvement | changed | None (same verdict)

    @property
    def refused(self) -> bool:
        """Whether a side's parser refused the command line (nothing resolved to compare)."""
        return any(_refused(pred) for pred in (self.old, self.new))

    @property
    def effective_changes(self) -> dict[str, tuple[str | None, str | None]]:
        if self.refused:
            return {}
        return {
            name: (self.old.effective.get(name), self.new.effective.get(name))
            for name in EFFECTIVE_FIELDS
            if self.old.effective.get(name) != self.new.effective.get(name)
        }

    @property
    def rules_started(self) -> list[str]:
        return [r for r in self.new.matched_rules if r not in self.old.matched_rules]

    @property
    def rules_stopped(self) -> list[str]:
        return [r for r in self.old.matched_rules if r not in self.new.matched_rules]

    @property
    def risks_started(self) -> list[str]:
        """The warning rules (a risk such as a hang under load) that hold on NEW but not on OLD, as notes."""
        before = set(_warnings(self.old))
        return [note for note in _warnings(self.new) if note not in before]

    @property
    def risks_stopped(self) -> list[str]:
        after = set(_warnings(self.new))
        return [note for note in _warnings(self.old) if note not in after]

    @property
    def reason(self) -> str:
        """Why the verdict changes (or stays): the new deciding step, and the resolution change behind it."""
        decided = self.new.decision
        step = f"rule {decided.rule}" if decided.rule else decided.source
        because = "; ".join(f"{n} {a or '-'} -> {b or '-'}" for n, (a, b) in self.effective_changes.items())
        text = f"{step}: {decided.reason}"
        return f"{text} (sglang {self.new.sglang_version} resolves {because})" if because else text

    def to_json(self) -> dict[str, Any]:
        def brief(pred: rules.Prediction) -> dict[str, Any]:
            d = pred.decision
            return {"verdict": d.verdict, "reason": d.reason, "source": d.source, "rule": d.rule,
                    "config_source": pred.config_source, "effective": dict(pred.effective),
                    "rules": list(pred.matched_rules), "notes": list(pred.notes)}  # fmt: skip

        return {
            "arch": self.arch,
            "old": brief(self.old),
            "new": brief(self.new),
            "change": self.kind,
            "reason": self.reason,
            "effective_changes": {k: list(v) for k, v in self.effective_changes.items()},
            "rules_started": self.rules_started,
            "rules_stopped": self.rules_stopped,
            "risks_started": self.risks_started,
            "risks_stopped": self.risks_stopped,
        }


@dataclass(frozen=True)
class ProfileUpgrade:
    profile: str
    flags: tuple[Finding, ...]
    archs: tuple[ArchChange, ...]

    @property
    def worst(self) -> str | None:
        kinds = [a.kind for a in self.archs if a.kind]
        for kind in ("regression", "changed", "improvement"):
            if kind in kinds:
                return kind
        return None

    def to_json(self) -> dict[str, Any]:
        return {"profile": self.profile, "change": self.worst, "flags": [f.to_json() for f in self.flags],
                "archs": [a.to_json() for a in self.archs]}  # fmt: skip


@dataclass(frozen=True)
class Report:
    old: Side
    new: Side
    archs: tuple[str, ...]
    profiles: tuple[ProfileUpgrade, ...]
    defaults: tuple[dict[str, Any], ...]
    notes: tuple[str, ...] = field(default=())
    #: ``--measure``: the measured divergence (:func:`bwstack.ops.upgrade_measure.measure`; None: not asked)
    measured: dict[str, Any] | None = None

    @property
    def regressions(self) -> int:
        return sum(1 for p in self.profiles for a in p.archs if a.kind == "regression")

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "old": self.old.to_json(),
            "new": self.new.to_json(),
            "archs": list(self.archs),
            "regressions": self.regressions,
            "profiles": [p.to_json() for p in self.profiles],
            "defaults_changed": list(self.defaults),
            "notes": list(self.notes),
            "measured": None
            if self.measured is None
            else {k: v for k, v in self.measured.items() if k != "lines"},
        }


def compare(
    stack: Stack, old: str, new: str, *, profiles: Sequence[str] = (), archs: Sequence[str] = ()
) -> Report:
    """The upgrade report for ``profiles`` (default all) on ``archs`` (default each profile's own)."""
    names = list(profiles) or list(stack.profiles)
    for name in names:
        stack.profile(name)
    arch_list = tuple(dict.fromkeys(rules.normalize_arch(a) for a in archs)) or tuple(
        dict.fromkeys(stack.arch_for(n) for n in names)
    )
    sides = side(stack, old), side(stack, new)
    direction = direction_notes(*sides)
    views = tuple(on_variant(stack, s.variant) for s in sides)
    for one, view in zip(sides, views, strict=True):
        _resolve_all(view, one, names, arch_list)
    book = rules.load_rules()
    notes = [
        f"{s.variant} has no {rules.KERNEL_FACTS_FILE}: kernel availability is not checked on that side "
        f"(bwstack lock --kernel-facts --variant {s.variant})"
        for s in sides
        if rules.load_kernel_facts(stack.variant(s.variant).dir) is None
    ]
    notes = [*direction, *notes]
    results = []
    checks: Checks = {}
    for name in names:
        changes = []
        for arch in arch_list:
            before, after = (rules.predict(v, name, arch, book=book) for v in views)
            changes.append(
                ArchChange(arch, before, after, reportdiff.change_kind(before.verdict, after.verdict))
            )
        results.append(
            ProfileUpgrade(name, tuple(flag_findings(stack, name, *sides, checks)), tuple(changes))
        )
    return Report(
        sides[0], sides[1], arch_list, tuple(results), tuple(defaults_changed(stack, *sides)), tuple(notes)
    )


def _warnings(pred: rules.Prediction) -> list[str]:
    """A prediction's warning notes (``warning (rule-id): reason; fix: …``)."""
    return [note for note in pred.notes if note.startswith("warning (")]


def direction_notes(old: Side, new: Side) -> list[str]:
    """A note when NEW is not newer than OLD: the same SGLang (only the pins differ) or an older one."""
    from packaging.version import InvalidVersion, Version

    if not old.version or not new.version:
        return []
    try:
        before, after = Version(old.version), Version(new.version)
    except InvalidVersion:
        return []
    if after == before:
        return [f"{old.variant} and {new.variant} carry the same SGLang {old.version}: no upgrade, only pins"]
    if after < before:
        older = f"{new.variant} (sglang {new.version}) is older than {old.variant} ({old.version})"
        return [f"a downgrade: {older}"]
    return []


def _refused(pred: rules.Prediction) -> bool:
    return pred.config_source == "explain" and all(
        pred.effective.get(n) is None for n in vocabulary.BACKEND_FIELDS
    )


def _resolve_all(view: Stack, one: Side, names: Sequence[str], archs: Sequence[str]) -> None:
    """Each version's own resolution for every profile and arch, computed in one run of its venv (cached)."""
    queries = [explain.profile_query(view, name, arch=arch)[1] for name in names for arch in archs]
    explain.resolve_many(one.version, queries)


# --- --apply ------------------------------------------------------------------------------------------------


def apply(path: Path, report: Report) -> str:
    """Rewrite the renamed flags of ``path`` in place; the unified diff ('' if none).

    Each item is found by its YAML path (the round-trip parser's line index, :mod:`bwstack.stack.yamlload`)
    and only the flag's name on that line is replaced, so comments, quotes and wrapping stay as they are; the
    result must parse to the same file with just those items changed, else nothing is written."""

    edits = {(f.where, f.old): str(f.new) for p in report.profiles for f in p.flags if f.rewrite and f.new}
    text = path.read_text(encoding="utf-8")
    data, lines = load_yaml(path)
    rows = text.splitlines(keepends=True)
    expected = json.loads(json.dumps(data))
    for (where, old), new in edits.items():
        keys = _yaml_path(where)
        line = lines.line(keys)
        node: Any = expected
        for key in keys[:-1]:
            node = node[key]
        item = str(node[keys[-1]])
        if line is None or item.partition("=")[0] != old:
            continue
        node[keys[-1]] = new + item[len(old) :]
        rows[line - 1] = re.sub(rf"(?<![\w-]){re.escape(old)}(?![\w-])", new, rows[line - 1], count=1)
    changed = "".join(rows)
    if changed == text:
        return ""
    if parse_yaml(changed, str(path))[0] != expected:
        raise UserError("--apply could not rewrite the flags without changing anything else", file=path)
    atomic_write(path, changed)
    diff = difflib.unified_diff(text.splitlines(keepends=True), changed.splitlines(keepends=True),
                                f"a/{path.name}", f"b/{path.name}")  # fmt: skip
    return "".join(diff)


def _yaml_path(where: str) -> tuple[str | int, ...]:
    """``profiles.x.extra_args[2]`` -> ``("profiles", "x", "extra_args", 2)``."""
    dotted, _, index = where.rstrip("]").partition("[")
    head, _, field = dotted.rpartition(".")
    first, _, name = head.partition(".")
    return (first, name, field, int(index)) if name else (first, field, int(index))


def to_json_text(report: Report) -> str:
    return json.dumps(report.to_json(), indent=2)
