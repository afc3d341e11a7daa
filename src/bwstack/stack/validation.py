"""Pydantic's validation errors as one line each: ``file:line: field: message``, with what is valid.

The stack file's schema (:mod:`bwstack.stack.schema`) and its loader report every problem through here, so a
bad value reads the same wherever it is.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any, get_args, get_origin

from pydantic import BaseModel, ValidationError

from bwstack.errors import UserError
from bwstack.stack.yamlload import Lines
from healthchecks import common

#: patterns of the schema's bounded strings, with what a user is told when a value does not match
DURATION_PATTERN = "^" + common.DURATION_PATTERN + "$"
SIZE_PATTERN = r"^\d{1,9}(?:[bkmg]|kb|mb|gb)?$"
PATTERN_HINTS = {
    DURATION_PATTERN: "a duration of at most 6 digits per number, each with a unit, e.g. 500ms, 30s, 1h30m",
    SIZE_PATTERN: "a size of at most 9 digits and a unit, e.g. 32gb, 512m",
}
_SHELL_HINT = (
    "letters, digits and . _ - / only; "
    "shell metacharacters such as ; | & $ ` ' \" < > ( ) * ? ~ are not allowed"
)


def from_validation(
    exc: ValidationError, path: Path, lines: Lines, data: Any, root: type[BaseModel]
) -> UserError:
    """The first pydantic error as one ``file:line: field: message`` UserError (with what is valid)."""
    err = exc.errors(include_url=False)[0]
    loc: tuple[str | int, ...] = tuple(err["loc"])
    etype = err["type"]
    dotted = field_path(loc)
    line = lines.line(loc)
    if etype == "extra_forbidden":
        parent = loc[:-1]
        model_cls = _model_at(parent, root)
        valid = ", ".join(model_cls.model_fields) if model_cls else ""
        return UserError(
            f"unknown key {loc[-1]!r}" + (f" (valid: {valid})" if valid else ""),
            file=path,
            line=line,
            field=field_path(parent) or "top level",
        )
    if etype == "missing":
        return UserError("required key missing", file=path, line=lines.line(loc[:-1]), field=dotted)
    if etype == "string_pattern_mismatch":
        value = _value_at(data, loc)
        hint = PATTERN_HINTS.get(str(err.get("ctx", {}).get("pattern", "")), _SHELL_HINT)
        return UserError(f"invalid value {short(value)}: {hint}", file=path, line=line, field=dotted)
    if etype == "literal_error":
        value = _value_at(data, loc)
        expected = err.get("ctx", {}).get("expected", "")
        return UserError(
            f"invalid value {value!r} (valid: {_clean_expected(expected)})",
            file=path,
            line=line,
            field=dotted,
        )
    if etype in {
        "string_type",
        "int_type",
        "float_type",
        "bool_type",
        "dict_type",
        "list_type",
        "tuple_type",
        "model_type",
        "int_from_float",
        "float_parsing",
        "int_parsing",
    }:
        value = _value_at(data, loc)
        want = {
            "string_type": "a string",
            "int_type": "an integer",
            "float_type": "a number",
            "bool_type": "true or false",
            "dict_type": "a mapping",
            "list_type": "a list",
            "tuple_type": "a list",
            "model_type": "a mapping",
            "int_from_float": "an integer",
            "float_parsing": "a number",
            "int_parsing": "an integer",
        }[etype]
        return UserError(
            f"expected {want}, got {kind(value)} {short(value)}", file=path, line=line, field=dotted
        )
    message = str(err["msg"])
    if etype == "value_error":
        message = message.removeprefix("Value error, ")
    return UserError(message, file=path, line=line, field=dotted or None)


def _clean_expected(expected: str) -> str:
    return ", ".join(re.findall(r"'([^']*)'", expected)) or expected


def _model_at(loc: tuple[str | int, ...], root: type[BaseModel]) -> type[BaseModel] | None:
    """The model class at ``loc`` below ``root`` (through mappings of models: ``profiles.<name>``)."""
    cls: type[BaseModel] | None = root
    index = 0
    while cls is not None and index < len(loc):
        info = cls.model_fields.get(str(loc[index]))
        if info is None:
            return None
        annotation = info.annotation
        if get_origin(annotation) is dict:  # a mapping of models: the next part is a key
            annotation = get_args(annotation)[1]
            index += 1
            if index >= len(loc):
                return None
        cls = annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None
        index += 1
    return cls


def _value_at(data: Any, loc: tuple[str | int, ...]) -> Any:
    cur = data
    for key in loc:
        try:
            cur = cur[key]
        except (KeyError, IndexError, TypeError):
            return None
    return cur


def field_path(loc: Iterable[str | int]) -> str:
    """A validation location as a field path: ``profiles[0].backends``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def kind(value: Any) -> str:
    """What a value is, in words (``a mapping``, ``an integer`` …)."""
    return {
        dict: "a mapping",
        list: "a list",
        str: "a string",
        int: "an integer",
        float: "a number",
        bool: "a boolean",
        type(None): "nothing (null)",
    }.get(type(value), type(value).__name__)


def short(value: Any) -> str:
    """A value's repr, cut to 40 characters."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
