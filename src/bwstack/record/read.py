"""The one reader of a ``results.json``: resume, diff, bundle, bisect, demo and ``up``'s choice all read a
sweep report through :func:`load` (or :func:`load_or_none`, which skips what :func:`load` refuses); and of a
merged matrix (``merged.json``, the shipped evidence): :func:`load_merged`.

The checks come from the type (:class:`bwstack.record.types.Document` and ``Row``): the five keys every reader
needs must be there, and every top-level key and row field present must have its declared JSON type (a
nested record is checked to be an object; its inside is its room's). A hand-edited, truncated or hostile file
gets one line naming the field, never a traceback. Fields the type does not know are kept as they are.
"""

from __future__ import annotations

import types as pytypes
from pathlib import Path
from typing import Any, NotRequired, Required, Union, cast, get_args, get_origin, get_type_hints, is_typeddict

from bwstack.errors import UserError
from bwstack.files import read_json
from bwstack.record import MERGED_FORMAT, RESULTS_LIMITS, SCHEMA_VERSION
from bwstack.record.types import Document, Merged, Row
from healthchecks import untrusted

#: the keys every reader of a report relies on
NEEDED = ("stack", "mode", "variants", "plan", "results")
_DOCUMENT = get_type_hints(Document)
_ROW = get_type_hints(Row)


def _kinds(hint: Any) -> tuple[type, ...]:
    """The Python types of the JSON values a field's hint allows (a nested record: dict; a number: int
    too)."""
    origin = get_origin(hint)
    if origin in (NotRequired, Required):
        return _kinds(get_args(hint)[0])
    if origin in (Union, pytypes.UnionType):
        return tuple(kind for arg in get_args(hint) for kind in _kinds(arg))
    if is_typeddict(hint) or origin is dict:
        return (dict,)
    if origin is list:
        return (list,)
    if hint is float:
        return (int, float)
    return (cast(type, hint),)


def _wrong(value: Any, kinds: tuple[type, ...]) -> bool:
    return isinstance(value, bool) is not (bool in kinds) or not isinstance(value, kinds)


def check(raw: dict[str, Any], path: Path) -> Document:
    """``raw`` as a :class:`Document` when it has the shape every reader relies on; UserError otherwise."""

    def bad(field: str, wanted: str, value: Any) -> UserError:
        return UserError(
            f"malformed sweep report: expected {wanted}, got {type(value).__name__}", file=path, field=field
        )

    for key in NEEDED:
        if key not in raw:
            raise UserError("malformed sweep report: key missing", file=path, field=key)
    for key, hint in _DOCUMENT.items():
        kinds = _kinds(hint)
        if key in raw and key in NEEDED and _wrong(raw[key], kinds):
            raise bad(key, " or ".join(k.__name__ for k in kinds), raw[key])
    for index, name in enumerate(raw["plan"]):
        if not isinstance(name, str):
            raise bad(f"plan[{index}]", "a profile name", name)
    for name, row in raw["results"].items():
        if not isinstance(row, dict):
            raise bad(f"results.{name}", "a mapping", row)
        for key, hint in _ROW.items():
            kinds = _kinds(hint)
            if key in row and _wrong(row[key], kinds):
                raise bad(f"results.{name}.{key}", " or ".join(k.__name__ for k in kinds), row[key])
    return cast(Document, raw)


def load(
    path: Path, missing: str = "no sweep report here to resume; run the sweep without --resume"
) -> Document:
    """Read a results.json; UserError (``missing`` when there is no file) when it is unreadable, of another
    schema or malformed."""
    try:
        raw = read_json(path, "the sweep results", RESULTS_LIMITS)
    except FileNotFoundError:
        raise UserError(missing, file=path) from None
    if not isinstance(raw, dict) or raw.get("schema_version") != SCHEMA_VERSION:
        found = raw.get("schema_version") if isinstance(raw, dict) else None
        raise UserError(
            f"not a bwstack sweep report of schema_version {SCHEMA_VERSION} (found {found!r})",
            file=path,
            field="schema_version",
        )
    return check(raw, path)


def load_or_none(path: Path) -> Document | None:
    """:func:`load`, or None for a file it refuses or cannot read (a FIFO, a huge or a hostile file is
    skipped like a malformed one, never waited on): for readers that look over many reports (``up``'s
    choice)."""
    try:
        return load(path)
    except (OSError, UserError):
        return None


#: the fields of a merged cell's run that list, validate and up --dry-run print: a string or null each
_SEEN_FIELDS = ("verdict", "host", "driver", "sglang", "image_digest", "bundle", "arch")


def check_merged(path: Path, doc: dict[str, Any]) -> Merged:
    """``doc`` as a :class:`Merged` when it has the types every reader of a merged matrix relies on; one
    UserError naming the field otherwise."""

    def need(ok: bool, field: str, what: str) -> None:
        if not ok:
            raise UserError(f"malformed shipped evidence: {what}", file=path, field=field)

    bundles = doc.get("bundles")
    need(bundles is None or isinstance(bundles, dict), "bundles", "must be an object")
    for key, value in (bundles or {}).items():
        need(isinstance(value, dict), f"bundles.{key}", "must be an object")
    for i, cell in enumerate(doc["cells"]):
        need(isinstance(cell, dict), f"cells[{i}]", "must be an object")
        for key in ("profile", "variant", "section", "arch"):
            need(isinstance(cell.get(key), str), f"cells[{i}].{key}", "must be a string")
        verdicts = cell.get("verdicts")
        need(isinstance(verdicts, dict), f"cells[{i}].verdicts", "must be an object of counts")
        for verdict, count in verdicts.items():
            ok = isinstance(count, int) and not isinstance(count, bool) and count >= 0
            need(ok, f"cells[{i}].verdicts.{verdict}", "must be a count")
        seen = cell.get("seen")
        need(isinstance(seen, list), f"cells[{i}].seen", "must be a list")
        for j, run in enumerate(seen):
            need(isinstance(run, dict), f"cells[{i}].seen[{j}]", "must be an object")
            for key in _SEEN_FIELDS:
                value = run.get(key)
                ok = value is None or isinstance(value, str)
                need(ok, f"cells[{i}].seen[{j}].{key}", "must be a string")
    return cast(Merged, doc)


def load_merged(path: Path, what: str, limits: untrusted.Limits) -> Merged:
    """Read a merged matrix (``bwstack report merge``'s ``merged.json``); UserError when it is unreadable, of
    another format or malformed (``what`` names the file in a read error)."""
    doc = read_json(path, what, limits)
    if (
        not isinstance(doc, dict)
        or doc.get("format") != MERGED_FORMAT
        or not isinstance(doc.get("cells"), list)
    ):
        raise UserError(f"not a merged evidence file (format {MERGED_FORMAT!r})", file=path, field="format")
    return check_merged(path, doc)
