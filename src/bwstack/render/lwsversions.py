"""Which LeaderWorkerSet releases a rendered manifest runs on: the fields each LWS version's CRD declares.

An LWS CRD is a structural schema: the API server refuses (strict field validation) or silently drops
any field the installed CRD does not declare. ``data/schemas/lws-fields.json`` records, for each known
release, the subtrees of the v1 schema that appeared after the oldest one listed (``since``), made by
:func:`main` from the upstream CRDs at each tag. A manifest's minimum LWS version is the newest
``since`` among the fields it uses: ``volumeClaimTemplates`` and ``persistentVolumeClaimRetentionPolicy`` make
it v0.8.0 (the v0.7.0 CRD refuses ``persistentVolumeClaimRetentionPolicy: field not declared in schema``, seen
on a real control plane).

    python -m bwstack.render.lwsversions v0.7.0=<crd.yaml>@<commit> ... > lws-fields.json
"""

from __future__ import annotations

import itertools
import json
import re
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from bwstack.errors import UserError

FIELDS_RESOURCE = "data/schemas/lws-fields.json"
_VERSION = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)$")


def parse_version(text: str) -> tuple[int, int, int]:
    """``v0.8.0`` (or ``0.8.0``) as a tuple; UserError for anything else."""
    match = _VERSION.fullmatch(text.strip())
    if match is None:
        raise UserError(
            f"{text!r} is not a release version (vMAJOR.MINOR.PATCH, e.g. v0.10.0)",
            field="--lws-version",
        )
    major, minor, patch = (int(part) for part in match.groups())
    return major, minor, patch


def schema_paths(schema: dict[str, Any], path: str = "") -> Iterator[str]:
    """Every field path a structural schema declares: ``[]`` for list items, ``*`` for map values."""
    yield path
    for key, sub in (schema.get("properties") or {}).items():
        yield from schema_paths(sub, f"{path}/{key}")
    if isinstance(schema.get("items"), dict):
        yield from schema_paths(schema["items"], f"{path}/[]")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from schema_paths(schema["additionalProperties"], f"{path}/*")


def used_paths(value: Any, schema: dict[str, Any], path: str = "") -> Iterator[str]:
    """The schema paths (as :func:`schema_paths` spells them) that a document sets."""
    yield path
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        for key, sub in value.items():
            if key in props:
                yield from used_paths(sub, props[key], f"{path}/{key}")
            elif isinstance(extra, dict):
                yield from used_paths(sub, extra, f"{path}/*")
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for item in value:
            yield from used_paths(item, schema["items"], f"{path}/[]")


@dataclass(frozen=True)
class Requirement:
    """The oldest LWS release whose CRD declares every field of a manifest, and the fields that decide it."""

    version: str
    fields: tuple[str, ...] = ()  # empty: every field is as old as the oldest release listed

    @property
    def names(self) -> str:
        return ", ".join(name.lstrip("/").replace("/", ".") for name in self.fields)

    def line(self) -> str:
        return self.line_version + self.line_fields

    @property
    def line_version(self) -> str:
        return f"LeaderWorkerSet {self.version} or newer"

    @property
    def line_fields(self) -> str:
        return f" (the first whose CRD declares {self.names})" if self.fields else ""


@cache
def fields_table() -> dict[str, Any]:
    text = resources.files("bwstack").joinpath(FIELDS_RESOURCE).read_text(encoding="utf-8")
    table: dict[str, Any] = json.loads(text)
    return table


def requirement(doc: dict[str, Any], schema: dict[str, Any]) -> Requirement:
    """The oldest known LWS release that declares every field ``doc`` sets (``schema``: the vendored CRD)."""
    table = fields_table()
    since: dict[str, str] = table["since"]
    version = min(table["versions"], key=parse_version)
    fields: set[str] = set()
    for path in used_paths(doc, schema):
        for root, added in since.items():
            if path != root and not path.startswith(root + "/"):
                continue
            if parse_version(added) > parse_version(version):
                version, fields = added, set()
            if added == version:
                fields.add(root)
    return Requirement(version, tuple(sorted(fields)))


def newest(requirements: Iterator[Requirement] | Sequence[Requirement]) -> Requirement | None:
    """The most demanding of several manifests' requirements."""
    return max(requirements, key=lambda r: parse_version(r.version), default=None)


def check_target(wanted: str | None, needed: Requirement) -> None:
    """UserError (one line) when ``--lws-version`` is older than the manifest needs."""
    if wanted is None or parse_version(wanted) >= parse_version(needed.version):
        return
    raise UserError(
        f"{wanted} is older than {needed.version}, the oldest LeaderWorkerSet these manifests "
        f"run on: its CRD does not declare {needed.names or 'a field they use'} (upgrade the LWS controller "
        f"to {needed.version} or newer)",
        field="--lws-version",
    )


# --- making the table from upstream CRDs --------------------------------------------------------------------


def _roots(paths: Sequence[str]) -> list[str]:
    found: list[str] = []
    for path in sorted(paths):
        if not any(path.startswith(root + "/") for root in found):
            found.append(path)
    return found


def build_table(crds: dict[str, tuple[dict[str, Any], str]]) -> dict[str, Any]:
    """``crds``: version -> (v1 openAPIV3Schema, commit). The table :data:`FIELDS_RESOURCE` holds."""
    ordered = sorted(crds, key=parse_version)
    declared = {version: set(schema_paths(crds[version][0])) for version in ordered}
    since: dict[str, str] = {}
    for older, newer in itertools.pairwise(ordered):
        for root in _roots(sorted(declared[newer] - declared[older])):
            since.setdefault(root, newer)
    return {
        "source": "kubernetes-sigs/lws config/crd/bases/leaderworkerset.x-k8s.io_leaderworkersets.yaml",
        "versions": {version: crds[version][1] for version in ordered},
        "since": dict(sorted(since.items())),
    }


def main(argv: Sequence[str]) -> int:
    """``VERSION=CRD.yaml@COMMIT`` arguments -> the table as JSON on stdout."""
    from ruamel.yaml import YAML

    crds: dict[str, tuple[dict[str, Any], str]] = {}
    for arg in argv:
        version, _, rest = arg.partition("=")
        path, _, commit = rest.rpartition("@")
        with open(path, encoding="utf-8") as handle:
            crd = YAML(typ="safe").load(handle)
        schema = next(v for v in crd["spec"]["versions"] if v["name"] == "v1")["schema"]["openAPIV3Schema"]
        crds[version] = (schema, commit)
    json.dump(build_table(crds), sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
