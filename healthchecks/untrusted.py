"""The one reader of untrusted JSON, stdlib only: a body from a server, a report, a bundle's part, shipped
evidence, a bisect state. It runs in the image (the healthcheck's HTTP bodies) and on the host.

Before the parser sees a byte, the text's size, nesting depth and number of containers are measured in C-speed
passes (no recursion, no value built), so 100 000 opening brackets or 8 MiB of empty objects cost a scan,
not a stack overflow or hundreds of MB. Then the parse refuses integers and numbers with more digits than the
limit (Python's own 4300-digit error and float overflow never surface), duplicate keys (a row with
``verdict`` twice) and, unless asked to keep them, ``NaN``/``Infinity`` and numbers that overflow to them.
Every refusal is :class:`Refused` (a ValueError) with one line naming the limit; the caller adds the file.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from dataclasses import dataclass
from typing import Any

MIB = 1024 * 1024


@dataclass(frozen=True)
class Limits:
    """What one document may be: bytes, nesting depth, values (an upper bound from its commas, quotes and
    brackets: what the parse would allocate), digits in a number;
    ``allow_nan`` keeps ``NaN``/``Infinity`` (an SGLang answer's logprobs, where NaN is the fault to see)."""

    max_bytes: int = 16 * MIB
    max_depth: int = 64
    max_values: int = 1_000_000
    max_digits: int = 64
    allow_nan: bool = False


DEFAULT = Limits()


class Refused(ValueError):
    """An untrusted document over a limit or malformed: ``str()`` is one line naming the limit."""


_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_NOT_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")
_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}


def shape(text: str) -> int:
    """The deepest nesting of a JSON text (brackets inside strings not counted), measured without parsing or
    recursion; its cost grows with the number of strings and brackets, which :func:`loads` bounds first."""
    outside = _STRING.sub("", text) if '"' in text else text
    skeleton = outside.encode("utf-8", "surrogatepass").translate(None, _NOT_BRACKET)
    return max(itertools.accumulate(map(_STEP.__getitem__, skeleton)), default=0)


def loads(data: bytes | str, limits: Limits = DEFAULT) -> Any:
    """The JSON value of ``data`` within ``limits``; :class:`Refused` (one line) otherwise."""
    if len(data) > limits.max_bytes:
        raise Refused(f"{len(data)} bytes, over the limit of {limits.max_bytes} bytes")
    if isinstance(data, bytes):
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise Refused(f"not UTF-8 (byte {exc.start})") from None
    else:
        text = data
    values = text.count(",") + text.count('"') // 2 + text.count("{") + text.count("[")
    if values > limits.max_values:
        raise Refused(f"about {values} values, over the limit of {limits.max_values}")
    depth = shape(text)
    if depth > limits.max_depth:
        raise Refused(f"nested {depth} levels deep, over the limit of {limits.max_depth}")

    def number(literal: str) -> None:
        digits = sum(ch.isdigit() for ch in literal)
        if digits > limits.max_digits:
            raise Refused(f"a number of {digits} digits, over the limit of {limits.max_digits}")

    def integer(literal: str) -> int:
        number(literal)
        return int(literal)

    def real(literal: str) -> float:
        number(literal)
        value = float(literal)
        if not limits.allow_nan and not math.isfinite(value):
            raise Refused(f"the number {literal[:20]} overflows to infinity; JSON numbers must be finite")
        return value

    def constant(name: str) -> float:
        if not limits.allow_nan:
            raise Refused(f"{name} is not JSON (numbers must be finite)")
        return float(name)

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out = dict(items)
        if len(out) != len(items):
            seen: set[str] = set()
            twice = next(k for k, _ in items if k in seen or seen.add(k))  # type: ignore[func-returns-value]
            raise Refused(f"the key {twice[:40]!r} appears twice in one object")
        return out

    try:
        return json.loads(
            text, parse_int=integer, parse_float=real, parse_constant=constant, object_pairs_hook=pairs
        )
    except Refused:
        raise
    except json.JSONDecodeError as exc:
        raise Refused(f"not JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") from None
    except (ValueError, RecursionError) as exc:  # the shape scan bounds depth; belt and braces
        raise Refused(f"not JSON: {type(exc).__name__}") from None


def finite(value: Any) -> Any:
    """``value`` with every NaN or infinite float (at any depth) replaced by None: JSON has no such number."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value


def dumps(value: Any, **kwargs: Any) -> str:
    """JSON text of ``value`` with NaN/Infinity written as null (:func:`finite`): never a non-JSON literal."""
    return json.dumps(finite(value), allow_nan=False, **kwargs)
