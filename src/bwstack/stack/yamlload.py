"""Load YAML with line numbers, so every validation error can name ``file:line``.

Plain data comes back (dict, list, str, int, float, bool, None) together with a :class:`Lines` index that
maps a path of keys/indices (``("profiles", "dense", "kv_cache_dtype")``) to its 1-based line in the file.
Duplicate keys, merge keys and non-string keys are refused: profiles.yaml is edited by hand and a silent
override of a duplicated profile is exactly the kind of surprise this tool exists to prevent.

Input is bounded before it is expanded, so a hostile or broken file answers in well under a second: files
over :data:`MAX_BYTES` (and FIFOs, devices) are refused unread; each parser event is checked as the loader
consumes it (one pass; nothing is constructed before the whole document passed), refusing nesting deeper than
:data:`MAX_DEPTH`, more than :data:`MAX_ALIASES` aliases, a recursive alias, aliases that would expand to more
than :data:`MAX_ALIAS_NODES` nodes in all (the "billion laughs" family) and tags on collections, each with the
line of the offending node.
"""

from __future__ import annotations

import errno
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bwstack.errors import UserError
from bwstack.files import read_bounded
from healthchecks import untrusted

PathKey = tuple[str | int, ...]

MAX_BYTES = 256 * 1024
"""Largest YAML file read; the shipped profiles.yaml and rules.yaml are under 16 KiB."""
MAX_DEPTH = 64
"""Deepest nesting of mappings and sequences; profiles.yaml needs 5."""
MAX_ALIASES = 100
"""Most aliases (``*name``) in one file."""
MAX_ALIAS_NODES = 10_000
"""Most nodes all aliases together may expand to (each alias counts the size of the node it repeats)."""


@dataclass
class Lines:
    """1-based line numbers of every mapping key and sequence item, by path."""

    file: str
    by_path: dict[PathKey, int] = field(default_factory=dict)

    def line(self, path: Sequence[str | int]) -> int | None:
        """The line of ``path``, or of its nearest ancestor that has one."""
        key = tuple(path)
        while key:
            if key in self.by_path:
                return self.by_path[key]
            key = key[:-1]
        return self.by_path.get((), None)


def load_yaml(path: Path) -> tuple[Any, Lines]:
    """Read and parse ``path``; raise UserError (with the line) for anything that is not plain YAML data."""
    try:
        text = read_bounded(path, MAX_BYTES).decode("utf-8")
    except OSError as exc:
        raise UserError(_unreadable(exc), file=path) from None
    except UnicodeDecodeError as exc:
        raise UserError(f"not UTF-8 text ({exc.reason} at byte {exc.start})", file=path) from None
    return parse_yaml(text, str(path))


def _unreadable(exc: OSError) -> str:
    """The message for a YAML file that cannot be read (``files.read_bounded``'s refusals included)."""
    if isinstance(exc, FileNotFoundError):
        return "file not found"
    if isinstance(exc, IsADirectoryError):
        return "is a directory, expected a YAML file"
    if isinstance(exc, PermissionError):
        return "permission denied"
    if exc.errno == errno.EFBIG:
        return f"file larger than {MAX_BYTES // 1024} KiB: refused unread"
    if exc.errno == errno.EINVAL:
        return str(exc.strerror)
    return f"cannot read: {exc.strerror}"


def parse_yaml(text: str, filename: str) -> tuple[Any, Lines]:
    """Parse YAML text; errors name ``filename`` and the line."""
    from ruamel.yaml import YAML
    from ruamel.yaml.constructor import DuplicateKeyError
    from ruamel.yaml.error import MarkedYAMLError, YAMLError

    if len(text.encode("utf-8")) > MAX_BYTES:
        raise UserError(f"larger than {MAX_BYTES // 1024} KiB: refused unread", file=filename)
    yaml = YAML(typ="rt")
    yaml.allow_duplicate_keys = False
    try:
        doc = _load_bounded(yaml, text, filename)
    except DuplicateKeyError as exc:
        mark = exc.problem_mark
        line = mark.line + 1 if mark is not None else None
        raise UserError(f"duplicate key: {_first_line(exc.problem)}", file=filename, line=line) from None
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        what = exc.problem or exc.context or "malformed YAML"
        raise UserError(f"malformed YAML: {_first_line(what)}", file=filename, line=line) from None
    except YAMLError as exc:
        raise UserError(f"malformed YAML: {_first_line(str(exc))}", file=filename) from None
    lines = Lines(file=filename)
    data = _plain(doc, (), lines, filename)
    return data, lines


def _check_flow_lines(text: str, filename: str) -> None:
    """Refuse a line that opens more than MAX_DEPTH flow collections (``[[[[…``) before the parser sees it.

    The YAML scanner looks ahead up to 1024 characters for a possible simple key at every open flow level,
    so such a line costs it time quadratic in its depth; the event walk below would refuse it too, only later.
    """
    import re

    depth = 0
    line = 1
    for char in re.sub(r"[^\[\]{}\n]", "", text):
        if char == "\n":
            line, depth = line + 1, 0
        elif char in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                raise UserError(
                    f"YAML nested deeper than {MAX_DEPTH} levels: refused", file=filename, line=line
                )
        else:
            depth = max(0, depth - 1)


#: a plain scalar YAML reads as a number (int or float, any base, with ``_`` separators)
_NUMBER = re.compile(r"[-+]?(?:0[xob])?[0-9a-fA-F_]*\.?[0-9a-fA-F_]*(?:[eE][-+]?[0-9_]+)?\Z")


class _Bounds:
    """The limits, checked on each parser event as the loader consumes it: the composer has built at most
    the nodes of the events before the refusal (no more than the file holds); nothing is constructed."""

    def __init__(self, filename: str) -> None:
        self.filename = filename
        self.sizes: dict[str, int] = {}  # anchor -> nodes in the anchored node, once that node is closed
        self.open_anchors: set[str] = set()
        self.frames: list[tuple[str | None, int]] = []  # open collections: (anchor, nodes so far)
        self.aliases = 0
        self.alias_nodes = 0

    def _add(self, nodes: int) -> None:
        if self.frames:
            anchor, count = self.frames[-1]
            self.frames[-1] = (anchor, count + nodes)

    def _refuse(self, message: str, line: int | None) -> UserError:
        return UserError(message, file=self.filename, line=line)

    def see(self, event: Any) -> None:
        from ruamel.yaml.events import AliasEvent, CollectionEndEvent, CollectionStartEvent, NodeEvent

        line = event.start_mark.line + 1 if event.start_mark is not None else None
        if isinstance(event, AliasEvent):
            name = str(event.anchor)
            self.aliases += 1
            if self.aliases > MAX_ALIASES:
                raise self._refuse(f"more than {MAX_ALIASES} YAML aliases: refused", line)
            if name in self.open_anchors:
                raise self._refuse(f"recursive YAML alias *{name}: refused", line)
            if name not in self.sizes:
                raise self._refuse(f"malformed YAML: undefined alias *{name}", line)
            self.alias_nodes += self.sizes[name]
            if self.alias_nodes > MAX_ALIAS_NODES:
                raise self._refuse(
                    f"YAML aliases expand to more than {MAX_ALIAS_NODES} nodes (at *{name}): refused "
                    "before expanding",
                    line,
                )
            self._add(self.sizes[name])
        elif isinstance(event, CollectionStartEvent):
            if len(self.frames) >= MAX_DEPTH:
                raise self._refuse(f"YAML nested deeper than {MAX_DEPTH} levels: refused", line)
            tag = getattr(event, "tag", None)
            if tag is not None and str(tag) not in ("None", ""):
                kind = "sequence" if "Sequence" in type(event).__name__ else "mapping"
                raise self._refuse(
                    f"YAML tag {_first_line(str(tag))!r} on a {kind} is not supported: remove it", line
                )
            anchor = str(event.anchor) if event.anchor is not None else None
            if anchor is not None:
                self.open_anchors.add(anchor)
            self.frames.append((anchor, 1))
        elif isinstance(event, CollectionEndEvent):
            anchor, count = self.frames.pop()
            if anchor is not None:
                self.open_anchors.discard(anchor)
                self.sizes[anchor] = count
            self._add(count)
        elif isinstance(event, NodeEvent):  # a scalar
            value = getattr(event, "value", None)
            if isinstance(value, str) and getattr(event, "style", None) is None and _NUMBER.fullmatch(value):
                digits = sum(ch.isdigit() for ch in value)
                if digits > untrusted.DEFAULT.max_digits:
                    raise self._refuse(
                        f"a number of {digits} digits, over the limit of {untrusted.DEFAULT.max_digits}", line
                    )
            if event.anchor is not None:
                self.sizes[str(event.anchor)] = 1
            self._add(1)


def _load_bounded(yaml: Any, text: str, filename: str) -> Any:
    """``yaml.load(text)`` in one pass, the limits checked on every event the composer consumes."""
    _check_flow_lines(text, filename)
    bounds = _Bounds(filename)
    parser = yaml.parser
    consume = parser.get_event

    def checked() -> Any:
        event = consume()
        bounds.see(event)
        return event

    parser.get_event = checked
    return yaml.load(text)


def _first_line(text: str) -> str:
    return " ".join(str(text).split())


def _plain(node: Any, path: PathKey, lines: Lines, filename: str) -> Any:
    from ruamel.yaml.comments import CommentedMap, CommentedSeq

    if isinstance(node, CommentedMap):
        if getattr(node, "merge", None):
            raise UserError("YAML merge keys (<<) are not supported", file=filename, line=node.lc.line + 1)
        if path == ():
            lines.by_path[()] = node.lc.line + 1
        out: dict[str, Any] = {}
        for key in node:
            line = node.lc.key(key)[0] + 1
            if not isinstance(key, str):
                where = ".".join(str(p) for p in path) or "top level"
                raise UserError(
                    f"keys must be strings, got {type(key).__name__} {key!r} in {where}",
                    file=filename,
                    line=line,
                )
            lines.by_path[(*path, key)] = line
            out[key] = _plain(node[key], (*path, key), lines, filename)
        return out
    if isinstance(node, CommentedSeq):
        items: list[Any] = []
        for index, item in enumerate(node):
            where = node.lc.item(index)
            lines.by_path[(*path, index)] = where[0] + 1 if where else (lines.line(path) or 1)
            items.append(_plain(item, (*path, index), lines, filename))
        return items
    if node is None:
        return None
    if isinstance(node, bool):
        return bool(node)
    if isinstance(node, int):
        return int(node)  # drop ruamel's ScalarInt subclasses
    if isinstance(node, float):
        return float(node)
    if isinstance(node, str):
        return str(node)  # drop ruamel's scalar subclasses
    # timestamps, binary, custom tags: not part of this format
    raise UserError(
        f"unsupported YAML value of type {type(node).__name__}: quote it to make it a string",
        file=filename,
        line=lines.line(path),
        field=".".join(str(p) for p in path) or None,
    )
