"""The ``server_args=`` record SGLang logs at start-up, read without importing SGLang; stdlib only.

SGLang prints its resolved arguments once per start, as ``ServerArgs(a=1, b='x', ...)`` up to 0.5.19 and as a
dict from 0.5.23, often wrapped over many log lines and sometimes cut short. :class:`Balance` follows brackets
and quotes piece by piece (so :mod:`healthchecks.startup` knows where a record ends), :func:`parse_record`
turns the record into {field: value}, and :func:`flags_from_argv` reads the semantic fields a logged command
line sets.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from healthchecks import vocabulary


def flags_from_argv(tokens: list[str]) -> dict[str, str]:
    """The semantic fields an argv sets (``--flag value`` and ``--flag=value``; later wins, like argparse)."""
    found: dict[str, str] = {}
    for index, token in enumerate(tokens):
        if not token.startswith("--"):
            continue
        flag, eq, inline = token.partition("=")
        name = vocabulary.field_for_flag(flag)
        if name is None:
            continue
        value = inline if eq else (tokens[index + 1] if index + 1 < len(tokens) else "")
        if value and not value.startswith("--"):
            found[name] = value
    return found


class Balance:
    """Brackets and quotes of a record read piece by piece: :meth:`feed` returns the index, in that piece, of
    the bracket closing the first one, or None while it is still open."""

    def __init__(self) -> None:
        self.depth = 0
        self.quote = ""
        self.escaped = False

    def feed(self, piece: str) -> int | None:
        for index, char in enumerate(piece):
            if self.quote:
                if self.escaped:
                    self.escaped = False
                elif char == "\\":
                    self.escaped = True
                elif char == self.quote:
                    self.quote = ""
                continue
            if char in "'\"":
                self.quote = char
            elif char in "([{":
                self.depth += 1
            elif char in ")]}":
                self.depth -= 1
                if self.depth == 0:
                    return index
        return None


def matching_close(body: str) -> int | None:
    """Index of the bracket closing the one that opens ``body`` (quotes and nesting respected), or None."""
    return Balance().feed(body)


def split_top(body: str) -> list[str]:
    """Split on commas outside quotes and brackets."""
    parts: list[str] = []
    depth = 0
    quote = ""
    escaped = False
    start = 0
    for index, char in enumerate(body):
        if quote:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == quote:
                quote = ""
            continue
        if char in "'\"":
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(body[start:index])
            start = index + 1
    parts.append(body[start:])
    return [p.strip() for p in parts if p.strip()]


def literal_value(text: str) -> Any:
    """A Python literal's value; the text itself when it is not a literal (an enum or object repr)."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return text


def parse_record(body: str, fmt: str) -> dict[str, Any]:
    """``ServerArgs(a=1, b='x')`` or ``{'a': 1, 'b': 'x'}`` (possibly cut short) -> {name: value}."""
    inner = body[1:] if fmt == "dict" else body[len("ServerArgs(") :]
    end = matching_close(body)
    if end is not None:
        inner = body[1:end] if fmt == "dict" else body[len("ServerArgs(") : end]
    fields: dict[str, Any] = {}
    for part in split_top(inner):
        if fmt == "dict":
            key, sep, value = part.partition(":")
            name = key.strip().strip("'\"")
        else:
            key, sep, value = part.partition("=")
            name = key.strip()
        if not sep or not re.fullmatch(r"[A-Za-z_]\w*", name):
            continue
        fields[name] = literal_value(value.strip())
    return fields
