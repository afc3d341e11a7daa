"""Load YAML with line numbers, so every validation error can name ``file:line``.

Plain data comes back (dict, list, str, int, float, bool, None) together with a :class:`Lines` index that
maps a path of keys/indices (``("profiles", "dense", "kv_cache_dtype")``) to its 1-based line in the file.
Duplicate keys, merge keys and non-string keys are refused: profiles.yaml is edited by hand and a silent
override of a duplicated profile is exactly the kind of surprise this tool exists to prevent.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bwstack.errors import UserError

PathKey = tuple[str | int, ...]


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
        text = path.read_text(encoding="utf-8")
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

    yaml = YAML(typ="rt")
    yaml.allow_duplicate_keys = False
    try:
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
