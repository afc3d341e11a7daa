"""Rebuild the pinned SGLang's ``argparse`` parser from its parser snapshot (stdlib only).

``images/<variant>/sglang-args.json`` records every action of ``ServerArgs.add_cli_args`` (format in
docs/design.md, "Parser snapshot"). Building a real ``argparse.ArgumentParser`` from it makes a command line
fail exactly like the real parser would: ``error: unrecognized arguments: …`` for a flag the version does
not have, ``invalid choice`` for a value it does not know, ``ambiguous option`` for a prefix that matches two
flags (``--cuda-graph-max-bs`` on 0.5.23), all with exit status 2. Deprecated aliases report SGLang's own
warning text through a callback. The CPU stand-in server parses its argv with this module inside a
container that has nothing but python3; host-side validation uses it too.
"""

from __future__ import annotations

import argparse
import json
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any, NoReturn

SNAPSHOT_SCHEMA = "bwstack.sglang-args/1"

#: called with SGLang's deprecation message (plain text, without the ANSI colour SGLang adds)
WarnFn = Callable[[str], None]

# argparse's own actions, by the name the snapshot uses for them.
_PLAIN_ACTIONS = frozenset(
    {"store", "store_true", "store_false", "store_const", "append", "append_const", "count", "extend"}
)

# Actions that take no value on the command line, whatever their class.
_ZERO_ARG_CUSTOM = frozenset({"DeprecatedAction", "DeprecatedStoreTrueAction"})


class SnapshotError(ValueError):
    """The snapshot file is missing, unreadable or not in the ``bwstack.sglang-args/1`` form."""


def load_snapshot(path: str | Path) -> dict[str, Any]:
    """Read a parser snapshot and check its form; SnapshotError says what is wrong."""
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SnapshotError(f"{path}: parser snapshot not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SnapshotError(f"{path}: cannot read parser snapshot: {exc}") from None
    except json.JSONDecodeError as exc:
        raise SnapshotError(f"{path}:{exc.lineno}: malformed JSON: {exc.msg}") from None
    problem = form_problem(raw)
    if problem:
        raise SnapshotError(f"{path}: not a parser snapshot: {problem}")
    result: dict[str, Any] = raw
    return result


def form_problem(raw: Any) -> str | None:
    """The first thing wrong with a snapshot's form, or None when it is usable."""
    if not isinstance(raw, dict):
        return "top level is not an object"
    if raw.get("schema") != SNAPSHOT_SCHEMA:
        return f"schema is {raw.get('schema')!r}, expected {SNAPSHOT_SCHEMA!r}"
    flags = raw.get("flags")
    if not isinstance(flags, list) or not flags:
        return "'flags' is not a non-empty list"
    for index, flag in enumerate(flags):
        if not isinstance(flag, dict):
            return f"flags[{index}] is not an object"
        if not isinstance(flag.get("dest"), str):
            return f"flags[{index}] has no 'dest'"
        options = flag.get("option_strings")
        if not isinstance(options, list) or not all(isinstance(o, str) for o in options):
            return f"flags[{index}] ({flag.get('dest')}) has no 'option_strings' list"
    return None


def sglang_version(snapshot: Mapping[str, Any]) -> str:
    """The SGLang version the snapshot was taken from ('' when unknown, e.g. a nightly)."""
    return str(snapshot.get("sglang_version") or "")


def version_tuple(version: str) -> tuple[int, ...] | None:
    """``"0.5.23"`` -> ``(0, 5, 23)``; ``"0.5.14.dev3+g754524d8"`` -> ``(0, 5, 14)``; None: not a version."""
    match = re.match(r"v?(\d+(?:\.\d+)*)", version.strip())
    if not match:
        return None
    return tuple(int(part) for part in match.group(1).split("."))


def default_prog(snapshot: Mapping[str, Any]) -> str:
    """The program name SGLang's parser prints in usage and error lines.

    ``prepare_server_args`` builds ``argparse.ArgumentParser(prog="sglang serve")`` from 0.5.10 on (read in
    the 0.5.10, 0.5.12, 0.5.15-0.5.17 and 0.5.23 wheels); 0.5.9 uses argparse's default, which for
    ``python -m sglang.launch_server`` is ``launch_server.py``. A snapshot may carry ``prog`` itself.
    """
    if isinstance(snapshot.get("prog"), str):
        return str(snapshot["prog"])
    version = version_tuple(sglang_version(snapshot))
    if version is not None and version < (0, 5, 10):
        return "launch_server.py"
    return "sglang serve"


def build_parser(
    snapshot: Mapping[str, Any], *, prog: str | None = None, warn: WarnFn | None = None, raising: bool = False
) -> argparse.ArgumentParser:
    """An ``ArgumentParser`` that accepts exactly what the snapshot's SGLang accepts.

    With ``raising`` a bad command line raises :class:`ArgvError` instead of printing usage and exiting 2.
    """
    parser_class = _RaisingParser if raising else argparse.ArgumentParser
    parser = parser_class(prog=prog or default_prog(snapshot))
    emit = warn if warn is not None else _ignore
    for flag in snapshot["flags"]:
        _add_flag(parser, flag, emit)
    return parser


def parse_argv(
    snapshot: Mapping[str, Any],
    argv: Sequence[str],
    *,
    prog: str | None = None,
    warn: WarnFn | None = None,
) -> argparse.Namespace:
    """Parse ``argv`` like the snapshot's SGLang; a bad command line exits 2 with argparse's message."""
    return build_parser(snapshot, prog=prog, warn=warn).parse_args(list(argv))


def check_argv(
    snapshot: Mapping[str, Any], argv: Sequence[str]
) -> tuple[argparse.Namespace | None, str, list[str]]:
    """Parse without exiting: (namespace or None, argparse's error message or '', deprecation warnings).

    The parser is built once per snapshot and reused (a snapshot has ~500 flags: building it per profile made
    ``validate`` cost ~30 ms a profile); its warnings go to a list cleared before each parse."""
    with _PARSERS_LOCK:
        cached = _PARSERS.get(id(snapshot))
        if cached is None or cached[0] is not snapshot:
            sink: list[str] = []
            cached = (snapshot, build_parser(snapshot, warn=sink.append, raising=True), sink)
            _PARSERS[id(snapshot)] = cached
        _snapshot, parser, warnings = cached
        warnings.clear()
        try:
            namespace = parser.parse_args(list(argv))
        except ArgvError as exc:
            return None, str(exc), list(warnings)
        return namespace, "", list(warnings)


#: check_argv's parsers by snapshot (the snapshot is kept with its parser, so its id is not reused)
_PARSERS: dict[int, tuple[Mapping[str, Any], argparse.ArgumentParser, list[str]]] = {}
_PARSERS_LOCK = threading.Lock()


def merge_config(argv: Sequence[str]) -> list[str]:
    """``argv`` with its ``--config FILE`` merged the way SGLang does (0.5.9 ``server_args_config_parser``,
    0.5.23 ``utils/server_args_config_parser``): each ``key: value`` of the file becomes ``--key value`` (a
    true boolean the bare ``--key``, a false one nothing) in front of the rest, so the command line wins.

    Stdlib only (the stand-in runs it): the file is the flat mapping serve.py writes for the API key, one
    ``key: value`` a line, the value a JSON scalar or a plain word; anything else raises ValueError."""
    if "--config" not in argv:
        return list(argv)
    at = list(argv).index("--config")
    if at + 1 >= len(argv):
        raise ValueError("No config file specified after --config flag!")
    merged: list[str] = []
    with open(argv[at + 1], encoding="utf-8") as fh:
        for number, raw in enumerate(fh, 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            key, sep, text = line.partition(":")
            if not sep or not re.fullmatch(r"[A-Za-z0-9_-]+", key.strip()):
                raise ValueError(f"config line {number}: expected 'key: value'")
            text = text.strip()
            try:
                value = json.loads(text)
            except ValueError:
                value = text
            if isinstance(value, (dict, list)) or value is None:
                raise ValueError(f"config line {number}: only scalar values are supported")
            flag = "--" + key.strip()  # as SGLang: the key as written
            if value is True:
                merged.append(flag)
            elif value is not False:
                merged += [flag, str(value)]
    return merged + list(argv[:at]) + list(argv[at + 2 :])


def dests(snapshot: Mapping[str, Any]) -> set[str]:
    """Every ``dest`` of the snapshot's parser (the ``ServerArgs`` fields it can set)."""
    return {str(flag["dest"]) for flag in snapshot["flags"]}


def option_for(snapshot: Mapping[str, Any], dest: str) -> str | None:
    """The first long option string writing ``dest`` that is not a deprecated alias, else any."""
    fallback = None
    for flag in snapshot["flags"]:
        if flag["dest"] != dest:
            continue
        longs = [o for o in flag["option_strings"] if o.startswith("--")]
        if longs and not flag.get("deprecated") and not str(flag.get("action", "")).startswith("Deprecated"):
            return str(longs[0])
        fallback = fallback or (longs[0] if longs else None)
    return fallback


def choices_for(snapshot: Mapping[str, Any], dest: str) -> list[str] | None:
    """The choices of the first flag writing ``dest`` (None when free-form or absent)."""
    for flag in snapshot["flags"]:
        if flag["dest"] == dest and flag.get("choices") is not None:
            return [str(c) for c in flag["choices"]]
    return None


# --- building one action ------------------------------------------------------------------------------------


class ArgvError(Exception):
    """A command line the snapshot's SGLang would refuse; the message is argparse's (after ``error:``)."""


class _RaisingParser(argparse.ArgumentParser):
    """Raises :class:`ArgvError` instead of printing usage and exiting 2 (``exit_on_error`` misses some)."""

    def error(self, message: str) -> NoReturn:
        raise ArgvError(message)


def _ignore(_message: str) -> None:
    return None


def _add_flag(parser: argparse.ArgumentParser, flag: Mapping[str, Any], warn: WarnFn) -> None:
    action = str(flag.get("action") or "store")
    options = [str(o) for o in flag["option_strings"]]
    if action in {"help", "_HelpAction", "version", "_VersionAction"} or not options:
        return  # argparse adds -h itself; SGLang has no positional arguments
    if action in {"BooleanOptionalAction", "_BooleanOptionalAction"}:
        _add_boolean_optional(parser, flag, options)
        return
    kwargs = _common_kwargs(flag)
    deprecated = flag.get("deprecated")
    if action == "DeprecatedAction":
        message = deprecated.get("error") if isinstance(deprecated, dict) else None
        parser.add_argument(*options, action=_DeprecatedNoOp, warn=warn, error=message, **kwargs)
    elif action in {"DeprecatedStoreTrueAction", "DeprecatedStoreFalseAction"} or (
        deprecated and action in {"store_true", "store_false"}
    ):
        value = action in {"store_true", "DeprecatedStoreTrueAction"}
        kwargs.setdefault("default", not value)
        parser.add_argument(
            *options, action=_DeprecatedConst, warn=warn, use=_use(flag), value=value, **kwargs
        )
    elif action == "DeprecatedStoreConstAction" or (deprecated and action == "store_const"):
        value = flag.get("const_value", flag.get("const"))
        _add_deprecated_const(
            parser, flag, options, kwargs, warn=warn, value=True if value is None else value
        )
    elif action in _PLAIN_ACTIONS and not deprecated:
        _add_plain(parser, flag, options, action, kwargs)
    else:
        # "store" with "deprecated" (SGLang's DeprecatedAliasStoreAction), LoRAPathAction and any other custom
        # class: SGLang's custom valued actions all keep store semantics.
        _add_store_like(parser, flag, options, action, kwargs, warn=warn)


def _common_kwargs(flag: Mapping[str, Any]) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"dest": str(flag["dest"])}
    if "default" in flag:
        kwargs["default"] = flag["default"]
    if flag.get("required"):
        kwargs["required"] = True
    if flag.get("help") is not None:
        kwargs["help"] = str(flag["help"]).replace("%", "%%")
    if flag.get("metavar") is not None:
        kwargs["metavar"] = flag["metavar"]
    return kwargs


def _use(flag: Mapping[str, Any]) -> str | None:
    deprecated = flag.get("deprecated")
    if isinstance(deprecated, dict) and deprecated.get("use"):
        return str(deprecated["use"])
    return None


def _add_plain(
    parser: argparse.ArgumentParser,
    flag: Mapping[str, Any],
    options: list[str],
    action: str,
    kwargs: dict[str, Any],
) -> None:
    if action in {"store", "append", "extend"}:
        kwargs.update(_value_kwargs(flag))
    elif action in {"store_const", "append_const"}:
        kwargs["const"] = flag.get("const")
    parser.add_argument(*options, action=action, **kwargs)


def _add_store_like(
    parser: argparse.ArgumentParser,
    flag: Mapping[str, Any],
    options: list[str],
    action: str,
    kwargs: dict[str, Any],
    *,
    warn: WarnFn,
) -> None:
    nargs = flag.get("nargs")
    if nargs == 0 or action in _ZERO_ARG_CUSTOM:
        parser.add_argument(
            *options, action=_DeprecatedConst, warn=warn, use=_use(flag), value=True, **kwargs
        )
        return
    kwargs.update(_value_kwargs(flag))
    is_deprecated = bool(flag.get("deprecated")) or action.startswith("Deprecated")
    parser.add_argument(
        *options, action=_WarnStore, warn=warn if is_deprecated else None, use=_use(flag), **kwargs
    )


def _add_deprecated_const(
    parser: argparse.ArgumentParser,
    flag: Mapping[str, Any],
    options: list[str],
    kwargs: dict[str, Any],
    *,
    warn: WarnFn,
    value: Any,
) -> None:
    takes_value = flag.get("nargs") != 0 and flag.get("choices") is not None
    if takes_value:
        kwargs.update(_value_kwargs(flag))
    parser.add_argument(
        *options,
        action=_DeprecatedConst,
        warn=warn,
        use=_use(flag),
        value=value,
        takes_value=takes_value,
        **kwargs,
    )


def _add_boolean_optional(
    parser: argparse.ArgumentParser, flag: Mapping[str, Any], options: list[str]
) -> None:
    positives = [o for o in options if not (o.startswith("--no-") and "--" + o[5:] in options)]
    kwargs = _common_kwargs(flag)
    parser.add_argument(*positives, action=argparse.BooleanOptionalAction, **kwargs)


def _value_kwargs(flag: Mapping[str, Any]) -> dict[str, Any]:
    kwargs: dict[str, Any] = {}
    converter = converter_for(flag.get("type"))
    if converter is not None:
        kwargs["type"] = converter
    if flag.get("nargs") is not None:
        kwargs["nargs"] = flag["nargs"]
        if flag["nargs"] == "?" and flag.get("const") is not None:
            kwargs["const"] = flag["const"]
    if flag.get("choices") is not None:
        kwargs["choices"] = _typed_choices(flag["choices"], converter)
    return kwargs


def _typed_choices(choices: Sequence[Any], converter: Callable[[str], Any] | None) -> list[Any]:
    """Choices as the parser compares them: after the type conversion of each command-line value."""
    if converter in (int, float):
        return [c if not isinstance(c, str) else converter(c) for c in choices]
    return list(choices)


# --- value types --------------------------------------------------------------------------------------------


def human_readable_int(value: str) -> int:
    """SGLang's integer type with SI (``k M G T``) and IEC (``Ki Mi Gi Ti``) suffixes, case-sensitive."""
    value = value.strip()
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)", value)
    if match:
        number, suffix = match.groups()
        iec = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
        if suffix in iec:
            if "." in number:
                raise argparse.ArgumentTypeError(
                    f"Decimals are not allowed with IEC suffixes like '{suffix}'. "
                    f"Use an integer IEC value such as '{int(Decimal(number))}{suffix}', "
                    f"or an SI value such as '{number}{suffix[0]}'."
                )
            return int(number) * iec[suffix]
        si = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
        return int(Decimal(number) * si[suffix])
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"Invalid integer value: '{value}'. "
            "Use a plain integer, SI suffixes (1k, 1M), or IEC suffixes (1Ki, 1Mi). "
            "Suffixes are case-sensitive."
        ) from None


def json_list_type(value: str) -> Any:
    """SGLang's JSON-list type: any JSON value, with SGLang's message on bad JSON."""
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        raise argparse.ArgumentTypeError(
            f"Invalid JSON list: {value}. Please provide a valid JSON list."
        ) from None


def nullable_str(value: str) -> str | None:
    """SGLang's optional string: empty or ``None`` mean no value."""
    if not value or value == "None":
        return None
    return value


def parse_cuda_graph_backend_arg(raw: str) -> str:
    """0.5.23 rejects the retired ``tc_piecewise`` before the choices check."""
    if raw == "tc_piecewise":
        raise argparse.ArgumentTypeError("tc_piecewise was removed; select breakable, full, or disabled")
    return raw


def parse_cuda_graph_config_arg(raw: str) -> dict[str, Any]:
    """0.5.23 ``--cuda-graph-config``: a JSON object (per-phase keys are checked by SGLang later)."""
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"--cuda-graph-config must be JSON: {exc}") from None
    if not isinstance(parsed, dict):
        raise argparse.ArgumentTypeError(
            f"--cuda-graph-config must be a JSON object, got {type(parsed).__name__}"
        )
    return parsed


# The snapshot names the callable; argparse prints that name in "invalid <name> value" errors, so the
# functions above carry SGLang's names. json.loads is used as is (argparse calls it "loads", like SGLang).
_CONVERTERS: dict[str, Callable[[str], Any]] = {
    "str": str,
    "int": int,
    "float": float,
    "bool": bool,
    "json": json.loads,
    "loads": json.loads,
    "json.loads": json.loads,
    "human_readable_int": human_readable_int,
    "json_list_type": json_list_type,
    "nullable_str": nullable_str,
    "parse_cuda_graph_backend_arg": parse_cuda_graph_backend_arg,
    "parse_cuda_graph_config_arg": parse_cuda_graph_config_arg,
}


def converter_for(type_name: Any) -> Callable[[str], Any] | None:
    """The conversion for a snapshot ``type``; an unknown callable name keeps the string as given."""
    if type_name is None:
        return None
    return _CONVERTERS.get(str(type_name), str)


# --- custom actions (SGLang's deprecated spellings) ---------------------------------------------------------


def _deprecation_message(option: str, use: str | None) -> str:
    """SGLang's text (``srt/arg_groups/argparse_actions.py`` in 0.5.15+; same wording in 0.5.9)."""
    replacement = f" Use '{use}' instead." if use else ""
    return f"'{option}' is deprecated and will be removed in a future release.{replacement}"


class _WarnStore(argparse.Action):
    """``store`` that reports SGLang's deprecation warning when the flag is a deprecated alias."""

    def __init__(
        self,
        option_strings: Sequence[str],
        dest: str,
        *,
        warn: WarnFn | None = None,
        use: str | None = None,
        **kw: Any,
    ) -> None:
        self.warn = warn
        self.use = use
        super().__init__(option_strings, dest, **kw)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        if self.warn is not None:
            self.warn(_deprecation_message(option_string or self.option_strings[0], self.use))
        setattr(namespace, self.dest, values)


class _DeprecatedConst(argparse.Action):
    """SGLang's ``DeprecatedStoreTrueAction`` / ``DeprecatedStoreConstAction``: warn, store a fixed value."""

    def __init__(
        self,
        option_strings: Sequence[str],
        dest: str,
        *,
        warn: WarnFn = _ignore,
        use: str | None = None,
        value: Any = True,
        takes_value: bool = False,
        **kw: Any,
    ) -> None:
        self.warn = warn
        self.use = use
        self.value = value
        if not takes_value:
            kw["nargs"] = 0
        super().__init__(option_strings, dest, **kw)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        self.warn(_deprecation_message(option_string or self.option_strings[0], self.use))
        setattr(namespace, self.dest, self.value)


class _DeprecatedNoOp(argparse.Action):
    """SGLang's ``DeprecatedAction``: a retired flag that warns (or stops, when it has an error message)."""

    def __init__(
        self,
        option_strings: Sequence[str],
        dest: str,
        *,
        warn: WarnFn = _ignore,
        error: str | None = None,
        **kw: Any,
    ) -> None:
        self.warn = warn
        self.error = error
        kw["nargs"] = 0
        super().__init__(option_strings, dest, **kw)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        if self.error is not None:
            parser.error(self.error)
        self.warn(
            f"The command line argument '{option_string}' is deprecated and will be removed in future "
            "versions."
        )
