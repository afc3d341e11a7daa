"""The pinned SGLang's command line, from its parser snapshot (``images/<variant>/sglang-args.json``).

Profiles speak in semantic fields (``dsa_decode_backend: flashmla_kv``); this module turns them into the flags
that the variant's own parser accepts (``--nsa-decode-backend`` up to 0.5.12, ``--dsa-decode-backend`` from
0.5.15) and refuses values that version does not know, listing the valid ones. Which spelling to use is read
from the snapshot, never guessed from a version number.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bwstack.errors import UserError
from bwstack.stack import snapshot_argparse
from healthchecks import vocabulary

SNAPSHOT_SCHEMA = "bwstack.sglang-args/1"

#: semantic profile field -> candidate flags, preferred first (the table lives in healthchecks/vocabulary.py,
#: stdlib only, because the in-container healthcheck reads it too)

#: model settings -> flag (same in every supported version; checked against the snapshot all the same)
MODEL_FLAGS: dict[str, str] = {
    "path": "--model-path",
    "revision": "--revision",
    "served_name": "--served-model-name",
    "tp_size": vocabulary.TP_FLAGS[0],
    "quantization": "--quantization",
    "reasoning_parser": "--reasoning-parser",
    "tool_call_parser": "--tool-call-parser",
    "context_length": "--context-length",
    "mem_fraction_static": "--mem-fraction-static",
    "trust_remote_code": "--trust-remote-code",
}

#: flags bwstack sets itself; a profile's extra_args must not set them (say which field to use instead)
OWNED_FLAGS: dict[str, str] = {
    "--host": "bwstack binds 0.0.0.0 inside the container; set stack.bind_address for the host side",
    "--port": "set stack.port",
    "--api-key": "never put the API key on a command line: set stack.api_key: true, key in secrets/api_key",
    "--admin-api-key": "a key on a command line is shown by ps and written into compose.yaml; bwstack "
    "mounts secrets/api_key only (stack.api_key: true)",
    "--ssl-keyfile-password": "a password on a command line is shown by ps and written into compose.yaml",
    "--config": "bwstack passes the API key to SGLang in a --config file of its own (SGLang reads one); "
    "put those options in extra_args",
    "--model-path": "set model.path",
    "--model": "set model.path",
    "--revision": "set model.revision (a commit of the model repo)",
    "--served-model-name": "set model.served_name",
    **{flag: "set model.tp_size" for flag in vocabulary.TP_FLAGS},
    **{
        flag: f"set the profile field {sem}"
        for sem, flags in vocabulary.SEMANTIC_FLAGS.items()
        for flag in flags
    },
}


@dataclass(frozen=True)
class Flag:
    """One argparse action of the pinned SGLang."""

    dest: str
    option_strings: tuple[str, ...]
    action: str
    nargs: Any
    type: str | None
    choices: tuple[str, ...] | None
    default: Any
    deprecated: Mapping[str, Any] | None
    help: str | None

    @property
    def takes_value(self) -> bool:
        return self.action not in {
            "store_true",
            "store_false",
            "store_const",
            "count",
            "help",
            "version",
        } and (self.nargs != 0)

    @property
    def name(self) -> str:
        longs = [o for o in self.option_strings if o.startswith("--")]
        return longs[0] if longs else self.option_strings[0]


@dataclass
class Snapshot:
    """A parsed ``sglang-args.json``."""

    path: Path
    sglang_version: str
    provenance: dict[str, Any]
    requires_dist: dict[str, str]
    flags: list[Flag]
    raw: dict[str, Any] = field(repr=False)
    by_option: dict[str, Flag] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.by_option = {opt: f for f in self.flags for opt in f.option_strings}

    @property
    def label(self) -> str:
        """How to name this SGLang in messages: ``sglang 0.5.23`` or the snapshot's source."""
        if self.sglang_version:
            return f"sglang {self.sglang_version}"
        return str(self.provenance.get("source") or self.path)

    @property
    def is_proxy(self) -> bool:
        return self.provenance.get("method") == "proxy-wheel"

    def flag(self, option: str) -> Flag | None:
        return self.by_option.get(option)

    def flag_for(self, semantic: str) -> Flag | None:
        """The flag this version uses for a semantic field (non-deprecated spelling first)."""
        candidates = [self.by_option[o] for o in vocabulary.SEMANTIC_FLAGS[semantic] if o in self.by_option]
        for flag in candidates:
            if not flag.deprecated:
                return flag
        return candidates[0] if candidates else None

    def option_for(self, semantic: str) -> str | None:
        """The option string to emit for a semantic field, or None if this version has no such flag."""
        flag = self.flag_for(semantic)
        if flag is None:
            return None
        for opt in vocabulary.SEMANTIC_FLAGS[semantic]:
            if opt in flag.option_strings:
                return opt
        return flag.name

    def spell_value(self, semantic: str, value: str) -> str | None:
        """The spelling of ``value`` this version accepts for a semantic field, or None if it has none."""
        flag = self.flag_for(semantic)
        if flag is None:
            return None
        if flag.choices is None:
            return value
        for spelling in vocabulary.spellings(semantic, value):
            if spelling in flag.choices:
                return spelling
        return None

    def valid_values(self, semantic: str) -> tuple[str, ...] | None:
        flag = self.flag_for(semantic)
        return None if flag is None else flag.choices


def load_snapshot(path: Path) -> Snapshot:
    """Load and check the form of a parser snapshot; UserError names the file on any problem."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(
            f"parser snapshot missing; generate it with 'bwstack lock --args --variant {path.parent.name}'",
            file=path,
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read parser snapshot: {exc}", file=path) from None
    except json.JSONDecodeError as exc:
        raise UserError(f"malformed JSON: {exc.msg}", file=path, line=exc.lineno) from None
    problems = snapshot_form_problems(raw)
    if problems:
        raise UserError(f"not a parser snapshot: {problems[0]}", file=path)
    flags = [
        Flag(
            dest=str(f["dest"]),
            option_strings=tuple(f["option_strings"]),
            action=str(f.get("action") or "store"),
            nargs=f.get("nargs"),
            type=f.get("type"),
            choices=tuple(str(c) for c in f["choices"]) if f.get("choices") is not None else None,
            default=f.get("default"),
            deprecated=f.get("deprecated") or None,
            help=f.get("help"),
        )
        for f in raw["flags"]
    ]
    return Snapshot(
        path=path,
        sglang_version=str(raw.get("sglang_version") or ""),
        provenance=dict(raw.get("provenance") or {}),
        requires_dist={str(k): str(v) for k, v in (raw.get("requires_dist") or {}).items()},
        flags=flags,
        raw=raw,
    )


def snapshot_form_problems(raw: Any) -> list[str]:
    """What is wrong with the form of a snapshot (empty list: well-formed)."""
    if not isinstance(raw, dict):
        return ["top level is not an object"]
    problems: list[str] = []
    if raw.get("schema") != SNAPSHOT_SCHEMA:
        problems.append(f"schema is {raw.get('schema')!r}, expected {SNAPSHOT_SCHEMA!r}")
    if not isinstance(raw.get("provenance"), dict) or not raw["provenance"].get("method"):
        problems.append("provenance.method missing")
    flags = raw.get("flags")
    if not isinstance(flags, list) or not flags:
        problems.append("flags missing or empty")
        return problems
    for index, item in enumerate(flags):
        if not isinstance(item, dict):
            problems.append(f"flags[{index}] is not an object")
            continue
        opts = item.get("option_strings")
        if not isinstance(item.get("dest"), str) or not isinstance(opts, list) or not opts:
            problems.append(f"flags[{index}] lacks dest/option_strings")
            continue
        if not all(isinstance(o, str) and o.startswith("-") for o in opts):
            problems.append(f"flags[{index}] has an option string that is not a flag")
        choices = item.get("choices")
        if choices is not None and not isinstance(choices, list):
            problems.append(f"flags[{index}].choices is not a list")
    return problems


@dataclass(frozen=True)
class ArgProblem:
    """One problem with an argv item: its index, the token and what is wrong."""

    index: int
    token: str
    message: str


def check_argv(snapshot: Snapshot, argv: Sequence[str]) -> list[ArgProblem]:
    """Check extra argv items the way the pinned SGLang's own argparse parses them.

    Every ``--flag`` must be spelt out exactly (SGLang's parser would also take an unambiguous prefix; bwstack
    wants the real name, with a suggestion when close). Values, choices and counts are then checked by an
    argparse parser built from the snapshot (:mod:`bwstack.stack.snapshot_argparse`), the same one the
    stand-in runs.
    Deprecated spellings come back as problems whose message starts with ``deprecated:``.
    """

    problems: list[ArgProblem] = []
    for index, item in enumerate(argv):
        option = item.partition("=")[0]
        if item.startswith("--") and option not in snapshot.by_option:
            problems.append(ArgProblem(index, item, _unknown_flag_message(snapshot, option)))
    if problems:
        return problems
    _namespace, error, warnings = snapshot_argparse.check_argv(snapshot.raw, ["--model-path", "model", *argv])
    if error:
        index = _blamed_index(argv, error)
        item = argv[index] if argv else ""
        problems.append(ArgProblem(index, item, _parser_message(snapshot, " ".join(error.split()))))
    for warning in dict.fromkeys(warnings):
        index = _blamed_index(argv, warning)
        problems.append(ArgProblem(index, argv[index] if argv else "", f"deprecated: {warning}"))
    return problems


def _parser_message(snapshot: Snapshot, error: str) -> str:
    """argparse's error in bwstack's words: ``invalid value 'x' for --flag in sglang V (valid: a, b)``."""
    import re

    choice = re.match(r"argument ([^:]+): invalid choice: '([^']*)' \(choose from (.*)\)$", error)
    if choice:
        option = choice.group(1).split("/")[-1].strip()
        valid = ", ".join(re.findall(r"'([^']*)'", choice.group(3)))
        return f"invalid value {choice.group(2)!r} for {option} in {snapshot.label} (valid: {valid})"
    return f"{snapshot.label} refuses it: {error}"


def _blamed_index(argv: Sequence[str], message: str) -> int:
    """The argv item a parser message is about: the last flag before the first item the message quotes."""
    for position, item in enumerate(argv):
        quoted = (f"'{item}'", f"{item}:", f"{item} ", f"{item},")
        if any(q in message for q in quoted) or message.endswith(item):
            flag = position
            while flag > 0 and not argv[flag].startswith("-"):
                flag -= 1
            return flag
    return 0


def _unknown_flag_message(snapshot: Snapshot, option: str) -> str:
    import difflib

    close = difflib.get_close_matches(option, list(snapshot.by_option), n=3, cutoff=0.75)
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    return f"unknown flag {option} for {snapshot.label}{hint}"
