"""Dump the argparse parser of the SGLang installed next to this interpreter as JSON on stdout.

Runs inside a throwaway venv (``bwstack lock --args``) or inside a serving image
(``docker run --rm -i --entrypoint python3 IMAGE - < dump_args.py``), so it uses the standard library and
the installed ``sglang`` (with its ``torch``) only, and reads nothing from bwstack. The host side adds the
schema and provenance and writes ``images/<variant>/sglang-args.json`` (see ``bwstack.build.lock.args``).

Output: ``{"sglang_version": ..., "requires_dist": {name: "spec[; marker]"}, "flags": [...]}``, one entry per
argparse action in the form fixed by docs/design.md ("Parser snapshot").
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.metadata
import json
import logging
import re
import sys
from typing import Any

PLAIN_ACTIONS = {
    "_StoreAction": "store",
    "_StoreTrueAction": "store_true",
    "_StoreFalseAction": "store_false",
    "_StoreConstAction": "store_const",
    "_AppendAction": "append",
    "_AppendConstAction": "append_const",
    "_CountAction": "count",
    "_HelpAction": "help",
    "_VersionAction": "version",
    "_ExtendAction": "extend",
}

#: SGLang's deprecated-flag actions and the plain action whose semantics they keep
DEPRECATED_ACTIONS = {
    "DeprecatedAliasStoreAction": "store",
    "DeprecatedStoreTrueAction": "store_true",
    "DeprecatedStoreConstAction": "store_const",
}

TYPE_NAMES = {str: "str", int: "int", float: "float", bool: "bool", json.loads: "json"}

REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*(.*)$")


def json_value(value: Any) -> Any:
    """``value`` if it is plain JSON, else its repr (sets and tuples become lists)."""
    if isinstance(value, (set, frozenset)):
        value = sorted(value, key=repr)
    if isinstance(value, tuple):
        value = list(value)
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return repr(value)
    return value


def ordered(values: Any) -> list[Any]:
    """Choices as a list; sets are sorted so that the snapshot does not depend on hash seeds."""
    if isinstance(values, (set, frozenset)):
        return sorted(values, key=str)
    return list(values)


def type_name(kind: Any) -> str | None:
    if kind is None:
        return None
    for known, name in TYPE_NAMES.items():
        if kind is known:
            return name
    return str(getattr(kind, "__name__", None) or type(kind).__name__)


def action_name(action: argparse.Action) -> str:
    cls = type(action).__name__
    return PLAIN_ACTIONS.get(cls) or DEPRECATED_ACTIONS.get(cls) or cls


def deprecation(action: argparse.Action) -> dict[str, Any] | None:
    if not type(action).__name__.startswith("Deprecated"):
        return None
    info: dict[str, Any] = {"use": getattr(action, "new_flag", None)}
    error = getattr(action, "error_message", None)
    if error:
        info["error"] = str(error)
    return info


def describe(action: argparse.Action) -> dict[str, Any]:
    """One argparse action in the snapshot's form."""
    const = (
        getattr(action, "const_value", None)
        if type(action).__name__ == "DeprecatedStoreConstAction"
        else None
    )
    choices = None if action.choices is None else [json_value(c) for c in ordered(action.choices)]
    return {
        "dest": action.dest,
        "option_strings": list(action.option_strings),
        "action": action_name(action),
        "nargs": json_value(action.nargs),
        "const": json_value(const if const is not None else action.const),
        "type": type_name(action.type),
        "choices": choices,
        "default": json_value(action.default),
        "required": bool(action.required),
        "help": None if action.help is None else str(action.help),
        "deprecated": deprecation(action),
    }


def requires_dist(distribution: str) -> dict[str, str]:
    """The wheel's requirements without extras: name -> ``spec`` or ``spec; marker``."""
    result: dict[str, str] = {}
    for line in importlib.metadata.requires(distribution) or []:
        requirement, _, marker = line.partition(";")
        if "extra" in marker:
            continue
        match = REQUIREMENT.match(requirement)
        if match is None:
            continue
        spec = match.group(3).strip().strip("()").replace(" ", "")
        if marker.strip():
            spec = f"{spec}; {marker.strip()}"
        result.setdefault(match.group(1), spec)
    return dict(sorted(result.items(), key=lambda item: item[0].lower()))


def build_parser() -> argparse.ArgumentParser:
    server_args = importlib.import_module("sglang.srt.server_args")

    parser = argparse.ArgumentParser(prog="sglang")
    server_args.ServerArgs.add_cli_args(parser)
    return parser


def dump() -> dict[str, Any]:
    logging.disable(logging.CRITICAL)
    parser = build_parser()
    flags = [describe(a) for a in parser._actions if a.option_strings]
    flags.sort(key=lambda f: f["option_strings"][0])
    return {
        "sglang_version": importlib.metadata.version("sglang"),
        "requires_dist": requires_dist("sglang"),
        "flags": flags,
    }


def main() -> int:
    out = sys.stdout
    with contextlib.redirect_stdout(sys.stderr):  # whatever the import prints must not corrupt the JSON
        data = dump()
    out.write(json.dumps(data, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
