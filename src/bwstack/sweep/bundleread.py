"""The sweep bundle's format and its one safe reader (``bwstack report verify``, ``report merge``).

A bundle is a gzip-compressed tar of regular files only: ``manifest.json`` first (format, bwstack version
and commit, the report, what was redacted, and the sha256 and size of every other part), then
``results.json``, ``matrix.md``, ``host.json``, ``images.json``, ``profiles/<file>``, ``run/<compose file>``.
The reader trusts nothing: the file, each member and the whole are size-bounded (the decompressed stream
too, so a gzip bomb stops at the bound), a member must be a regular file with a plain relative name (no
``..``, no absolute path, no link, no device, at most one folder deep), names are unique, the manifest must
list exactly the other members with their digests, and the JSON parts must have the shapes the merge reads.
Nothing is extracted to disk: parts come back as bytes. Every refusal is one :class:`UserError` (exit 2).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import re
import tarfile
import zlib
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import IO, Any, cast

from bwstack.errors import UserError
from bwstack.record import read
from bwstack.record.types import Document
from healthchecks import secretscan, untrusted, vocabulary

FORMAT = "bwstack-bundle"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
RESULTS = "results.json"
HOST = "host.json"
IMAGES = "images.json"
MARKDOWN = "matrix.md"
#: parts every bundle has (profiles/ and run/ parts vary)
REQUIRED = (RESULTS, HOST, IMAGES, MARKDOWN)
SUFFIX = ".bundle.tar.gz"

MIB = 1024 * 1024
MAX_BUNDLE_BYTES = 16 * MIB
MAX_MEMBER_BYTES = 8 * MIB
MAX_TOTAL_BYTES = 32 * MIB
MAX_MEMBERS = 64
#: a member name: lower-case plain names, at most one folder deep
MEMBER_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,99}(/[a-z0-9][a-z0-9._-]{0,99})?")
_TAR_SLACK = 2 * MIB  # headers and padding on top of the members' bytes
#: what one JSON part may be (results.json's rows nest a few levels: 32 is plenty)
PART_LIMITS = untrusted.Limits(max_bytes=MAX_MEMBER_BYTES, max_depth=32, max_values=1_000_000)


class _TooLarge(Exception):
    pass


class _Bounded:
    """A read-only stream that raises once more than ``limit`` bytes were asked of it (the gzip bomb stop)."""

    def __init__(self, raw: gzip.GzipFile, limit: int) -> None:
        self.raw = raw
        self.left = limit

    def read(self, size: int = -1) -> bytes:
        want = self.left + 1 if size is None or size < 0 else min(size, self.left + 1)
        data = self.raw.read(want)
        self.left -= len(data)
        if self.left < 0:
            raise _TooLarge
        return data


@dataclass(frozen=True)
class Bundle:
    """A verified bundle: its digest id, the archive's bytes, the manifest and every part's bytes."""

    path: Path
    id: str
    data: bytes
    manifest: dict[str, Any]
    parts: dict[str, bytes]

    def json(self, name: str) -> Any:
        """A JSON part, already checked to parse (parsed again: a caller may change what it gets)."""
        return untrusted.loads(self.parts[name], PART_LIMITS)

    @cached_property
    def results(self) -> Document:
        """results.json, parsed once (the merge reads it for every row; checked by :func:`check_results`)."""
        return cast(Document, dict(self.json(RESULTS)))

    @cached_property
    def host(self) -> dict[str, Any]:
        return dict(self.json(HOST))

    @cached_property
    def images(self) -> dict[str, Any]:
        return dict(self.json(IMAGES))


def _shown(name: str) -> str:
    return repr(name[:80] + ("…" if len(name) > 80 else ""))


def _kind(info: tarfile.TarInfo) -> str:
    if info.issym():
        return "symbolic link"
    if info.islnk():
        return "hard link"
    if info.isdir():
        return "folder"
    if info.isdev() or info.isfifo():
        return "device or pipe"
    return "special file"


def _members(path: Path, fh: IO[bytes]) -> dict[str, bytes]:
    unpacked = _Bounded(gzip.GzipFile(fileobj=fh, mode="rb"), MAX_TOTAL_BYTES + _TAR_SLACK).read()
    parts: dict[str, bytes] = {}
    total = 0
    with tarfile.open(fileobj=io.BytesIO(unpacked), mode="r:") as tar:
        for info in tar:
            if len(parts) >= MAX_MEMBERS:
                raise UserError(f"hostile bundle: more than {MAX_MEMBERS} members", file=path)
            name = info.name
            if not MEMBER_NAME.fullmatch(name) or ".." in name:
                raise UserError(
                    f"hostile bundle: member name {_shown(name)} is not a plain relative name "
                    "(no absolute path, no '..', at most one folder deep)",
                    file=path,
                )
            if not info.isreg():
                raise UserError(
                    f"hostile bundle: member {_shown(name)} is a {_kind(info)}; only regular files allowed",
                    file=path,
                )
            if name in parts:
                raise UserError(f"hostile bundle: member {_shown(name)} appears twice", file=path)
            if info.size > MAX_MEMBER_BYTES:
                raise UserError(
                    f"bundle refused: member {_shown(name)} is {info.size} bytes, over the "
                    f"{MAX_MEMBER_BYTES // MIB} MiB limit per member",
                    file=path,
                )
            total += info.size
            if total > MAX_TOTAL_BYTES:
                raise UserError(
                    f"bundle refused: members over {MAX_TOTAL_BYTES // MIB} MiB in all", file=path
                )
            handle = tar.extractfile(info)
            data = handle.read(MAX_MEMBER_BYTES + 1) if handle is not None else b""
            if len(data) != info.size:
                raise UserError(f"bundle truncated: member {_shown(name)} is cut short", file=path)
            parts[name] = data
        rest = memoryview(unpacked)[tar.offset :]
        if rest.nbytes != bytes(rest).count(0):  # a second archive or any byte after the end-of-archive
            raise UserError(
                "bundle refused: data after the end of the archive (one archive, nothing appended)", file=path
            )
    return parts


def _json(path: Path, name: str, data: bytes) -> Any:
    try:
        return untrusted.loads(data, PART_LIMITS)
    except untrusted.Refused as exc:
        raise UserError(f"bundle refused: {name} is not JSON within bounds ({exc})", file=path) from None


def _need(path: Path, ok: bool, part: str, field: str, what: str) -> None:
    if not ok:
        raise UserError(f"bundle malformed: {part}: {what}", file=path, field=field)


def _strings(value: Any) -> list[str]:
    """Every key and string of a JSON value (iteratively: no recursion on hostile nesting)."""
    found: list[str] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            found += map(str, item)
            stack += item.values()
        elif isinstance(item, list):
            stack += item
        elif isinstance(item, str):
            found.append(item)
    return found


def _secret_fields(value: Any, where: str) -> tuple[str, str] | None:
    """(field, kind) of the first secret in a JSON value's keys or strings; None when it holds none. One scan
    of all its strings first (the common, clean case), the walk to name the field only after a hit."""
    if not secretscan.findings("\n".join(_strings(value))) and not _secret_named(value):
        return None
    stack: list[tuple[Any, str]] = [(value, where)]
    while stack:
        item, at = stack.pop()
        if isinstance(item, dict):
            for key, inner in item.items():
                field = f"{at}.{key}" if at else str(key)
                kind = secretscan.first_kind(str(key))
                if kind is None and isinstance(inner, str) and secretscan.secret_key(str(key), inner):
                    kind = "secret-named field"
                if kind is not None:
                    return field, kind
                stack.append((inner, field))
        elif isinstance(item, list):
            stack += [(inner, f"{at}[{i}]") for i, inner in enumerate(item)]
        elif isinstance(item, str):
            kind = secretscan.first_kind(item)
            if kind is not None:
                return at, kind
    return None


def _secret_named(value: Any) -> bool:
    """Whether a string sits under a secret-named key (``api_key``, ``access_token``) in ``value``."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for key, inner in item.items():
                if isinstance(inner, str) and secretscan.secret_key(str(key), inner):
                    return True
                stack.append(inner)
        elif isinstance(item, list):
            stack += item
    return False


def check_secrets(path: Path, parts: dict[str, bytes], docs: dict[str, Any]) -> None:
    """Refuse a bundle that carries a secret in any form (:mod:`healthchecks.secretscan`), naming the part and
    the field or line, never the value."""
    for name, data in parts.items():
        if name in docs:
            found = _secret_fields(docs[name], "")
            if found is not None:
                field, kind = found
                raise UserError(
                    f"bundle refused: {name} carries a secret (a {kind}); a bundle must be redacted "
                    "(bwstack report bundle does it)",
                    file=path,
                    field=printable_field(field),
                )
            continue
        text = data.decode("utf-8", errors="replace")
        hits = secretscan.findings(text)
        if hits:
            line = text.count("\n", 0, hits[0].start) + 1
            raise UserError(
                f"bundle refused: {name} line {line} carries a secret (a {hits[0].kind}); a bundle must be "
                "redacted (bwstack report bundle does it)",
                file=path,
            )


def printable_field(field: str) -> str:
    """A JSON path cut to 120 characters, the secret never among them (the key that names it is kept)."""
    return secretscan.redact(field)[:120]


def check_manifest(path: Path, manifest: Any, parts: dict[str, bytes]) -> None:
    """The manifest's format and its list of parts against the members actually present."""
    _need(path, isinstance(manifest, dict), MANIFEST, "manifest", "must be a JSON object")
    _need(path, manifest.get("format") == FORMAT, MANIFEST, "format", f"must be {FORMAT!r}")
    version = manifest.get("format_version")
    _need(
        path,
        version == FORMAT_VERSION,
        MANIFEST,
        "format_version",
        f"must be {FORMAT_VERSION}, is {version!r}",
    )
    listed = manifest.get("parts")
    _need(path, isinstance(listed, list), MANIFEST, "parts", "must be a list")
    names: dict[str, dict[str, Any]] = {}
    for item in listed:
        _need(
            path, isinstance(item, dict) and isinstance(item.get("name"), str), MANIFEST, "parts", "bad entry"
        )
        names[item["name"]] = item
    present = set(parts) - {MANIFEST}
    missing = sorted(set(names) - present)
    extra = sorted(present - set(names))
    if missing:
        raise UserError(f"bundle truncated: listed part {_shown(missing[0])} is missing", file=path)
    if extra:
        raise UserError(f"bundle tampered: member {_shown(extra[0])} is not in the manifest", file=path)
    for name in REQUIRED:
        _need(path, name in names, MANIFEST, "parts", f"required part {name} not listed")
    for name, item in names.items():
        data = parts[name]
        digest = hashlib.sha256(data).hexdigest()
        if item.get("sha256") != digest or item.get("bytes") != len(data):
            raise UserError(
                f"bundle corrupted: {name}: sha256 {digest[:12]}… ({len(data)} bytes) differs from the "
                f"manifest's {str(item.get('sha256'))[:12]}… ({item.get('bytes')} bytes)",
                file=path,
            )


def check_results(path: Path, doc: Any) -> None:
    """results.json has the shape the merge and the views read (a sweep report, schema_version 1): what a
    bundle needs beyond a report's own shape first (each row's profile, verdict and variant, the image id),
    then the one reader's checks (:func:`bwstack.record.read.check`)."""
    _need(path, isinstance(doc, dict), RESULTS, "results", "must be a JSON object")
    _need(path, doc.get("schema_version") == 1, RESULTS, "schema_version", "must be 1")
    for key, kind in (("stack", dict), ("mode", dict), ("variants", dict), ("plan", list), ("results", dict)):
        _need(path, isinstance(doc.get(key), kind), RESULTS, key, f"must be a JSON {kind.__name__}")
    for key in ("started_at", "updated_at", "generated_by"):
        _need(path, isinstance(doc.get(key), str), RESULTS, key, "must be a string")
    for manifest in doc["variants"].values():
        _need(path, isinstance(manifest, dict), RESULTS, "variants", "each must be a JSON object")
    for name in doc["plan"]:
        _need(path, isinstance(name, str), RESULTS, "plan", "profile names must be strings")
    for name, row in doc["results"].items():
        _need(path, isinstance(row, dict), RESULTS, f"results.{name}", "must be a JSON object")
        for key in ("profile", "verdict", "variant"):
            _need(path, isinstance(row.get(key), str), RESULTS, f"results.{name}.{key}", "must be a string")
        _need(path, row["profile"] == name, RESULTS, f"results.{name}.profile", "must be the row's key")
        evidence = row.get("evidence", {})
        _need(path, isinstance(evidence, dict), RESULTS, f"results.{name}.evidence", "must be a JSON object")
        image = evidence.get("image_id")
        where = f"results.{name}.evidence.image_id"
        _need(path, image is None or isinstance(image, str), RESULTS, where, "must be a string")
        for key in ("requested", "effective", "health", "startup", "log_match"):
            value = evidence.get(key)
            _need(
                path,
                value is None or isinstance(value, dict),
                RESULTS,
                f"results.{name}.evidence.{key}",
                "bad",
            )
    read.check(doc, path)  # then every field the record's type declares (the one reader's checks)


#: host.json fields the merge reads, and the JSON types each may have
HOST_FIELDS: dict[str, tuple[type, ...]] = {
    **dict.fromkeys(("host_id", "hostname", "gpu_model", "gpu_arch", "driver", "cuda", "topology"), (str,)),
    "kernel": (str,),
    **dict.fromkeys(("gpu_count", "cpus"), (int,)),
}


def check_facts(path: Path, manifest: dict[str, Any], host: Any, images: Any) -> None:
    """host.json, images.json and the manifest's own fields have the types the merge and verify read."""
    for key, kind in (("report", dict), ("bwstack", dict), ("created_at", str), ("redactions", dict)):
        value = manifest.get(key)
        _need(path, value is None or isinstance(value, kind), MANIFEST, key, "has the wrong JSON type")
    _need(path, isinstance(host, dict), HOST, "host", "must be a JSON object")
    for key, kinds in HOST_FIELDS.items():
        value = host.get(key)
        ok = value is None or (isinstance(value, kinds) and not isinstance(value, bool))
        _need(path, ok, HOST, key, f"must be {' or '.join(k.__name__ for k in kinds)} or null")
    _need(path, isinstance(host.get("host_id"), str), HOST, "host_id", "must be a string")
    _need(path, isinstance(images, dict), IMAGES, "images", "must be a JSON object")
    for variant, image in images.items():
        _need(path, isinstance(image, dict), IMAGES, variant, "must be a JSON object")
        _need(path, image.get("id") is None or isinstance(image["id"], str), IMAGES, f"{variant}.id", "bad")


def read_bundle(path: Path) -> Bundle:
    """Read and verify a bundle; UserError (one line) on anything unsafe, truncated, corrupt or malformed."""
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise UserError(f"cannot read the bundle: {exc.strerror}", file=path) from None
    if not path.is_file():
        raise UserError("not a bundle file", file=path)
    if size > MAX_BUNDLE_BYTES:
        raise UserError(
            f"bundle refused: {size} bytes, over the {MAX_BUNDLE_BYTES // MIB} MiB limit", file=path
        )
    try:
        data = path.read_bytes()
        with open(path, "rb") as fh:
            parts = _members(path, fh)
    except _TooLarge:
        raise UserError(
            f"bundle refused: it unpacks to more than {MAX_TOTAL_BYTES // MIB} MiB", file=path
        ) from None
    except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile, OSError, ValueError) as exc:
        why = " ".join(str(exc).split()) or type(exc).__name__
        raise UserError(f"bundle corrupted or truncated: not a readable tar.gz ({why})", file=path) from None
    if not parts:
        raise UserError("bundle corrupted: no member", file=path)
    if next(iter(parts)) != MANIFEST:
        raise UserError(f"bundle malformed: the first member must be {MANIFEST}", file=path)
    manifest = _json(path, MANIFEST, parts[MANIFEST])
    check_manifest(path, manifest, parts)
    docs = {name: _json(path, name, data) for name, data in parts.items() if name.endswith(".json")}
    check_secrets(path, parts, docs)
    check_results(path, _json(path, RESULTS, parts[RESULTS]))
    check_facts(path, manifest, _json(path, HOST, parts[HOST]), _json(path, IMAGES, parts[IMAGES]))
    bundle_id = hashlib.sha256(parts[MANIFEST]).hexdigest()[:16]
    return Bundle(path=path, id=bundle_id, data=data, manifest=manifest, parts=parts)


#: more GPUs than one host can hold (an 8- or 16-GPU HGX board is the most a single host reports today)
MAX_GPUS_PER_HOST = 64


def doubts(bundle: Bundle) -> list[tuple[str, str]]:
    """(field, why) for each way the host facts and the verdicts disagree: a GPU count out of physical bounds,
    an arch that is not the GPU model's (one table: :data:`healthchecks.vocabulary.ARCHS`), a GPU verdict from
    a host without a GPU or a driver, a report of another arch than the host's. Empty: nothing to doubt."""
    host, doc = bundle.host, bundle.results
    found: list[tuple[str, str]] = []
    count = host.get("gpu_count")
    if count is not None and not 0 <= count <= MAX_GPUS_PER_HOST:
        found.append(
            ("host.json: gpu_count", f"{str(count)[:20]} GPUs is not a host (0 to {MAX_GPUS_PER_HOST})")
        )
    gpus = host.get("gpus")
    if isinstance(gpus, list) and count is not None and len(gpus) != count:
        found.append(("host.json: gpu_count", f"{str(count)[:20]} while {len(gpus)} GPUs are listed"))
    model, arch = host.get("gpu_model"), host.get("gpu_arch")
    capability = vocabulary.product_capability(model) if model else None
    if capability is not None and arch is not None and arch != f"sm{capability[0]}{capability[1]}":
        found.append(("host.json: gpu_arch", f"{arch} is not the arch of a {model}"))
    gpu_rows = [
        name
        for name, row in doc["results"].items()
        if not (row.get("standin") or doc["mode"].get("standin")) and doc["stack"].get("gpu_arch") != "cpu"
    ]
    if gpu_rows and (not count or not host.get("driver")):
        found.append(
            (f"results.json: results.{gpu_rows[0]}", "a GPU verdict from a host with no GPU or no driver")
        )
    reported = doc["stack"].get("gpu_arch")
    if gpu_rows and arch and isinstance(reported, str) and reported != arch:
        found.append(("results.json: stack.gpu_arch", f"{reported} while the host's GPUs are {arch}"))
    return found


def content_key(bundle: Bundle) -> str:
    """What a sweep is, whoever bundled it and how often: its host, stack, mode and each row's verdict and
    times (the same report bundled twice, or with and without --redact-host, counts once)."""
    doc = bundle.results
    rows = sorted(
        (name, row.get("verdict"), row.get("started_at"), row.get("finished_at"))
        for name, row in doc["results"].items()
    )
    blob = repr((bundle.host.get("host_id"), doc.get("started_at"), doc["stack"], doc["mode"], rows)).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def describe(bundle: Bundle) -> str:
    """``ok: bundle 1a2b…, 7 parts, report R (2 profiles, real SGLang on the CPU), host …, bwstack …``."""
    manifest = bundle.manifest
    doc = bundle.results
    report = manifest.get("report") or {}
    tool = manifest.get("bwstack") or {}
    commit = str(tool.get("commit") or "unknown commit")[:12]
    host = bundle.host
    redacted = ", host identity redacted" if manifest.get("host_redacted") else ""
    return (
        f"ok: bundle {bundle.id}, {len(bundle.parts) - 1} parts verified, report {report.get('name')} "
        f"({len(doc['results'])} profiles, {doc['mode'].get('source') or doc['mode'].get('kind')}), "
        f"host {host.get('host_id')}{redacted}, made by bwstack {tool.get('version')} ({commit})"
    )
