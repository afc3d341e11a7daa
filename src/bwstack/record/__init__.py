"""The sweep's record, the file every room reads: where it lives and what it is (file names, format names and
versions, size bounds, its timestamps). The writers (:mod:`bwstack.sweep.report`,
:mod:`bwstack.sweep.reportmerge`) and the readers below the sweep (the shipped evidence, the model cache's
fetch record) share these from here, so no room reads another's by reaching up a floor. Floor 2.

Its modules: :mod:`bwstack.record.types` (a ``results.json`` document, its rows and a merged matrix, typed),
:mod:`bwstack.record.read` (the one reader of a ``results.json``), :mod:`bwstack.record.schema` (the JSON
schemas generated from the types).
"""

from __future__ import annotations

from datetime import UTC, datetime

from healthchecks import untrusted

#: results.json's ``schema_version``
SCHEMA_VERSION = 1
RESULTS_FILE = "results.json"
MARKDOWN_FILE = "matrix.md"
HTML_FILE = "matrix.html"
#: a results.json holds one row per profile with a log tail each: anything larger is not one of ours
MAX_RESULTS_BYTES = 64 << 20
#: what a results.json read back (resume, diff, choose, a bundle's part) may be
RESULTS_LIMITS = untrusted.Limits(max_bytes=MAX_RESULTS_BYTES, max_values=4_000_000)

#: a merged matrix (``bwstack report merge``): its ``format``, version and file name
MERGED_FORMAT = "bwstack-merged"
MERGED_FORMAT_VERSION = 1
MERGED_FILE = "merged.json"


def utc_now() -> str:
    """The current UTC time as ``2026-07-10T12:01:02Z``."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
