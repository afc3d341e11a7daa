"""Host-side log classification for ``bwstack classify-log``: the healthcheck's catalog applied to a file.

The catalog itself lives in ``healthchecks/signatures/__init__.py`` (the one copy); the
requested-vs-effective backends come from ``healthchecks/startup.py`` (the parse the in-container healthcheck
uses too). This module only reads the file, builds the request (``--expect`` items or a profile) and turns bad
input into a :class:`bwstack.errors.UserError`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from healthchecks.verdict import Verdict

from bwstack import launch
from bwstack.errors import UserError
from bwstack.stack import loader
from healthchecks import settings, signatures, startup, vocabulary


def classify_log_file(path: str | Path) -> dict[str, Any]:
    """Classify a server log: ``{"class", "line" (1-based or None), "text", "also"}``.

    Without a fatal signature the class is ``healthy`` when the log reached SGLang's ready line, else
    ``starting``.

    Raises UserError when the file is missing, not a regular file or unreadable.
    """
    target = _log_path(path)
    try:
        scanner = signatures.scan_file(str(target))
    except OSError as exc:
        raise UserError(f"cannot read the log: {exc.strerror or exc}", file=target) from exc
    return _as_dict(scanner)


def structure_of_log_file(path: str | Path) -> dict[str, Any]:
    """What a person reads off the log's end (:mod:`healthchecks.signatures.structure`): the last traceback
    (type, innermost frame, message), the process that died and its exit, the last ERROR lines, an open
    CUDA-graph capture; only the fields the log has. Raises UserError like :func:`classify_log_file`."""
    target = _log_path(path)
    try:
        scanner = signatures.scan_file(str(target))
    except OSError as exc:
        raise UserError(f"cannot read the log: {exc.strerror or exc}", file=target) from exc
    return scanner.structure().to_dict()


def structure_lines(found: dict[str, Any]) -> list[str]:
    """classify-log's text lines about the log's structure (none when it shows nothing of note)."""
    lines = []
    if found.get("exception"):
        where = found.get("module", "?")
        lines.append(
            f"last traceback: {found['exception']} in {where} (line {found['exception_line']}): "
            f"{found.get('message', '')}".rstrip(": ")
        )
    if found.get("died"):
        lines.append(f"process ended: exit {found['exit']} (line {found['died_line']}): {found['died']}")
    for line_no, text in found.get("errors", []):
        lines.append(f"error line {line_no}: {text}")
    if found.get("failed_line"):
        lines.append(f"a request was answered with a server error (5xx) at line {found['failed_line']}")
    if found.get("capture_open"):
        lines.append(
            f"CUDA-graph capture begun at line {found['capture_open']} has not ended "
            f"({found.get('capture_seconds', 0):.0f} s by the log's clock)"
        )
    return lines


def classify_text(text: str) -> dict[str, Any]:
    """Classify log text already in memory (e.g. ``docker logs`` output); same shape as classify_log_file."""
    return _as_dict(signatures.scan_text(text))


def _as_dict(scanner: signatures.Scanner) -> dict[str, Any]:
    match = scanner.result()
    if match is None and scanner.lines_seen <= scanner.start_line:
        # a finished log whose last run logged nothing after its start banner: the evidence above it is all
        # there is (a paste with the error line above the command), never "starting"
        match = scanner.previous_run()
    if match is None:
        match = scanner.ended_in_error()  # a paste that ends in a failure report, with nothing else
    if match is None:
        return {"class": scanner.verdict(), "line": None, "text": "", "also": []}
    return match.to_dict()


def _log_path(path: str | Path) -> Path:
    target = Path(path)
    if not target.exists():
        raise UserError("no such log file", file=target)
    if not target.is_file():
        raise UserError("not a regular file", file=target)
    return target


def backends_of_log_file(
    path: str | Path, expect: dict[str, str] | None = None, by: str = "--expect"
) -> dict[str, Any]:
    """What the log's startup says about the backends (:meth:`healthchecks.startup.Startup.to_dict`), plus
    ``overrides``: the ``backend_override`` evidence against ``expect`` (else against the log's command line).
    """
    target = _log_path(path)
    try:
        parsed = startup.read_file(str(target))
    except OSError as exc:
        raise UserError(f"cannot read the log: {exc.strerror or exc}", file=target) from exc
    result = parsed.to_dict()
    result["overrides"] = startup.compare(parsed, expect, by)
    return result


def parse_expect(items: list[str]) -> dict[str, str]:
    """``KEY=VALUE`` items (semantic field or SGLang's name) -> {semantic field: value}; else UserError."""
    expect: dict[str, str] = {}
    valid = ", ".join(vocabulary.REPORT_FIELDS)
    for item in items:
        try:
            key, value = settings.expect_pair(item)
        except settings.UsageError as exc:
            raise UserError(f"{exc} (keys: {valid})") from None
        field = vocabulary.field_for_name(key)
        if field is None:
            raise UserError(f"--expect {item!r}: unknown key {key!r} (valid: {valid})")
        expect[field] = value
    return expect


def probe_class(output: str) -> str | None:
    """The class of a healthcheck's last output line (``healthy: …`` / ``unhealthy: <class>: …``)."""
    found = Verdict.parse(output)
    return found.cls if found is not None and found.cls in signatures.CLASSES else None


def profile_request(stack_file: Path, name: str) -> dict[str, str]:
    """What profile ``name`` of the stack file asks for (its backend fields and the TP size)."""

    return launch.launch_spec(loader.load_stack(stack_file), name).requested()
