"""Load YAML with line numbers, so every validation error can name ``file:line``.

Plain data comes back (dict, list, str, int, float, bool, None) together with a :class:`Lines` index that
maps a path of keys/indices (``("profiles", "dense", "kv_cache_dtype")``) to its 1-based line in the file.
Duplicate keys, merge keys and non-string keys are refused: profiles.yaml is edited by hand and a silent
override of a duplicated profile is exactly the kind of surprise this tool exists to prevent.

Input is bounded before it is expanded, so a hostile or broken file answers in well under a second: files
over :data:`MAX_BYTES` are refused from their size alone; one pass over the parser's event stream (no node is
built) refuses nesting deeper than :data:`MAX_DEPTH`, more than :data:`MAX_ALIASES` aliases, a recursive
alias, and aliases that would expand to more than :data:`MAX_ALIAS_NODES` nodes in all
(the "billion laughs" family), each with the line of the offending node.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bwstack.errors import UserError

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
        with path.open("rb") as handle:
            raw = handle.read(MAX_BYTES + 1)
        if len(raw) > MAX_BYTES:
            raise UserError(f"file larger than {MAX_BYTES // 1024} KiB: refused unread", file=path)
        text = raw.decode("utf-8")
    except FileNotFoundError:
        raise UserError("file not found", file=path) from None
    except IsADirectoryError:
        raise UserError("is a directory, expected a YAML file", file=path) from None
    except PermissionError:
        raise UserError("permission denied", file=path) from None
    except UnicodeDecodeError as exc:
        raise UserError(f"not UTF-8 text ({exc.reason} at byte {exc.start})", file=path) from None
    except OSError as exc:
        raise UserError(f"cannot read: {exc.strerror}", file=path) from None
    return parse_yaml(text, str(path))


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
        _check_bounds(yaml, text, filename)
        doc = yaml.load(text)
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


def _check_bounds(yaml: Any, text: str, filename: str) -> None:
    """Walk the event stream once (nothing is constructed) and refuse what would expand past the limits."""
    _check_flow_lines(text, filename)
    from ruamel.yaml.events import (
        AliasEvent,
        CollectionEndEvent,
        CollectionStartEvent,
        NodeEvent,
    )

    sizes: dict[str, int] = {}  # anchor -> nodes in the anchored node, once that node is closed
    open_anchors: set[str] = set()
    frames: list[tuple[str | None, int]] = []  # open collections: (anchor, nodes so far)
    aliases = 0
    alias_nodes = 0

    def add(nodes: int) -> None:
        if frames:
            anchor, count = frames[-1]
            frames[-1] = (anchor, count + nodes)

    for event in yaml.parse(text):
        line = event.start_mark.line + 1 if event.start_mark is not None else None
        if isinstance(event, AliasEvent):
            name = str(event.anchor)
            aliases += 1
            if aliases > MAX_ALIASES:
                raise UserError(f"more than {MAX_ALIASES} YAML aliases: refused", file=filename, line=line)
            if name in open_anchors:
                raise UserError(f"recursive YAML alias *{name}: refused", file=filename, line=line)
            if name not in sizes:
                raise UserError(f"malformed YAML: undefined alias *{name}", file=filename, line=line)
            alias_nodes += sizes[name]
            if alias_nodes > MAX_ALIAS_NODES:
                raise UserError(
                    f"YAML aliases expand to more than {MAX_ALIAS_NODES} nodes (at *{name}): refused "
                    "before expanding",
                    file=filename,
                    line=line,
                )
            add(sizes[name])
        elif isinstance(event, CollectionStartEvent):
            if len(frames) >= MAX_DEPTH:
                raise UserError(
                    f"YAML nested deeper than {MAX_DEPTH} levels: refused", file=filename, line=line
                )
            anchor = str(event.anchor) if event.anchor is not None else None
            if anchor is not None:
                open_anchors.add(anchor)
            frames.append((anchor, 1))
        elif isinstance(event, CollectionEndEvent):
            anchor, count = frames.pop()
            if anchor is not None:
                open_anchors.discard(anchor)
                sizes[anchor] = count
            add(count)
        elif isinstance(event, NodeEvent):  # a scalar
            if event.anchor is not None:
                sizes[str(event.anchor)] = 1
            add(1)


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
            lines.by_path[(*path, index)] = node.lc.item(index)[0] + 1
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
