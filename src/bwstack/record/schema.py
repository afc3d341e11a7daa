"""The JSON schemas of the record, generated from its types (:mod:`bwstack.record.types`): each ``TypedDict``
becomes an object in ``$defs`` whose properties carry the field's docstring as ``description``.

``data/schemas/results.schema.json`` (a ``results.json``) and ``data/schemas/merged.schema.json`` (a merged
matrix) are committed; ``tests/design/test_record_schema.py`` checks that they equal what this module
generates and that the record files in the repository validate. Regenerate them after changing a type::

    python -m bwstack.record.schema --write
"""

from __future__ import annotations

import ast
import inspect
import itertools
import json
import sys
import types as pytypes
from importlib import resources
from pathlib import Path
from typing import Any, NotRequired, Required, Union, get_args, get_origin, get_type_hints, is_typeddict

from bwstack.files import atomic_write
from bwstack.record import types

#: schema file name -> (its $id, title, the root type)
SCHEMAS: dict[str, tuple[str, str, Any]] = {
    "results.schema.json": ("bwstack.results/1", "a bwstack sweep report (results.json)", types.Document),
    "merged.schema.json": ("bwstack.merged/1", "a bwstack merged matrix (merged.json)", types.Merged),
}


def field_docs(cls: type) -> dict[str, str]:
    """A class's attribute docstrings: the string literal right after each annotated field."""
    tree = ast.parse(inspect.getsource(cls))
    body = tree.body[0].body if isinstance(tree.body[0], ast.ClassDef) else []
    docs = {}
    for field, after in itertools.pairwise(body):
        if (
            isinstance(field, ast.AnnAssign)
            and isinstance(field.target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            docs[field.target.id] = " ".join(after.value.value.split())
    return docs


def _schema(hint: Any, defs: dict[str, Any]) -> dict[str, Any]:
    origin = get_origin(hint)
    if origin in (NotRequired, Required):
        return _schema(get_args(hint)[0], defs)
    if is_typeddict(hint):
        _define(hint, defs)
        return {"$ref": f"#/$defs/{hint.__name__}"}
    if origin in (Union, pytypes.UnionType):
        options = [_schema(arg, defs) for arg in get_args(hint)]
        plain = [o["type"] for o in options if list(o) == ["type"] and isinstance(o["type"], str)]
        return {"type": plain} if len(plain) == len(options) else {"anyOf": options}
    if origin is list:
        return {"type": "array", "items": _schema(get_args(hint)[0], defs)}
    if origin is dict:
        value = get_args(hint)[1]
        return (
            {"type": "object"}
            if value is Any
            else {"type": "object", "additionalProperties": _schema(value, defs)}
        )
    simple: dict[Any, str] = {
        str: "string",
        int: "integer",
        float: "number",
        bool: "boolean",
        type(None): "null",
    }
    if hint in simple:
        return {"type": simple[hint]}
    if hint is Any:
        return {}
    raise TypeError(f"no JSON schema for {hint!r}")


def _define(cls: Any, defs: dict[str, Any]) -> None:
    if cls.__name__ in defs:
        return
    defs[cls.__name__] = {}  # placeholder: a type may refer to itself
    hints = get_type_hints(cls, include_extras=True)
    docs = field_docs(cls)
    properties = {}
    for name, hint in hints.items():
        properties[name] = (
            {"description": docs[name], **_schema(hint, defs)} if name in docs else _schema(hint, defs)
        )
    defs[cls.__name__] = {
        "description": " ".join((cls.__doc__ or "").split()),
        "type": "object",
        "additionalProperties": False,
        "required": [name for name in hints if name in cls.__required_keys__],
        "properties": properties,
    }


def generate(name: str) -> dict[str, Any]:
    """The JSON schema ``name`` (a key of :data:`SCHEMAS`), draft 2020-12."""
    schema_id, title, root = SCHEMAS[name]
    defs: dict[str, Any] = {}
    _define(root, defs)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": schema_id,
        "title": title,
        "$comment": "generated from src/bwstack/record/types.py by `python -m bwstack.record.schema --write`",
        "$ref": f"#/$defs/{root.__name__}",
        "$defs": dict(sorted(defs.items())),
    }


def text(name: str) -> str:
    """The schema as the committed file holds it."""
    return json.dumps(generate(name), indent=2, ensure_ascii=False) + "\n"


def committed(name: str) -> str:
    """The committed schema file's text."""
    return resources.files("bwstack").joinpath(f"data/schemas/{name}").read_text(encoding="utf-8")


def main(argv: list[str]) -> int:
    """``--write``: rewrite the committed schemas; otherwise exit 1 when one differs from its type."""
    folder = Path(str(resources.files("bwstack").joinpath("data/schemas")))
    stale = [name for name in SCHEMAS if not (folder / name).is_file() or committed(name) != text(name)]
    if "--write" in argv:
        for name in SCHEMAS:
            atomic_write(folder / name, text(name))
        return 0
    for name in stale:
        print(
            f"{name}: differs from src/bwstack/record/types.py; run python -m bwstack.record.schema --write"
        )
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
