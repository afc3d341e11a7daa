"""Host-side log classification for ``bwstack classify-log``: the healthcheck's catalog applied to a file.

The catalog itself lives in ``healthchecks/signatures.py`` (the one copy); this module only reads the file and
turns unreadable input into a :class:`bwstack.errors.UserError`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bwstack.errors import UserError
from healthchecks import signatures


def classify_log_file(path: str | Path) -> dict[str, Any]:
    """Classify a server log: ``{"class", "line" (1-based or None), "text", "also"}``.

    Without a fatal signature the class is ``healthy`` when the log reached SGLang's ready line, else
    ``starting``.

    Raises UserError when the file is missing, not a regular file or unreadable.
    """
    target = Path(path)
    if not target.exists():
        raise UserError("no such log file", file=target)
    if not target.is_file():
        raise UserError("not a regular file", file=target)
    try:
        scanner = signatures.scan_file(str(target))
    except OSError as exc:
        raise UserError(f"cannot read the log: {exc.strerror or exc}", file=target) from exc
    return _as_dict(scanner)


def classify_text(text: str) -> dict[str, Any]:
    """Classify log text already in memory (e.g. ``docker logs`` output); same shape as classify_log_file."""
    return _as_dict(signatures.scan_text(text))


def _as_dict(scanner: signatures.Scanner) -> dict[str, Any]:
    match = scanner.result()
    if match is None:
        return {"class": scanner.verdict(), "line": None, "text": "", "also": []}
    return match.to_dict()
