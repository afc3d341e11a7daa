"""The in-image contract, stdlib only: the environment variables and defaults of docs/design.md "Image
layout" (the paths themselves are ``imagelayout.py``'s), the duration grammar, secret-file reading that never
echoes the secret,
redaction, and atomic file writes. ``warmup.py`` and ``serve.py`` read it in the image; ``launch`` renders
from it on the host.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shlex
import stat
import tempfile
import urllib.parse
from typing import Any

from healthchecks import imagelayout

ENV_HC_URL = "BWSTACK_HC_URL"
ENV_HC_TIMEOUT = "BWSTACK_HC_TIMEOUT"
ENV_HC_EXPECT = "BWSTACK_HC_EXPECT"
ENV_HC_EXPECT_TEXT = "BWSTACK_HC_EXPECT_TEXT"
ENV_HC_MODE = "BWSTACK_HC_MODE"
ENV_HC_DECODE_EVERY = "BWSTACK_HC_DECODE_EVERY"
ENV_HC_STATE = "BWSTACK_HC_STATE"
ENV_HC_BASELINE = "BWSTACK_HC_BASELINE"
ENV_HC_MARGIN = "BWSTACK_HC_MARGIN"
ENV_HC_LONG_BASELINE = "BWSTACK_HC_LONG_BASELINE"
ENV_HC_LONG_LEN = "BWSTACK_HC_LONG_LEN"
ENV_HC_LONG_EVERY = "BWSTACK_HC_LONG_EVERY"
ENV_LOG = "BWSTACK_LOG"
ENV_HC_STALL_AFTER = "BWSTACK_HC_STALL_AFTER"
ENV_LOG_MAX_BYTES = "BWSTACK_LOG_MAX_BYTES"
ENV_API_KEY_FILE = "BWSTACK_API_KEY_FILE"
ENV_HF_TOKEN_FILE = "BWSTACK_HF_TOKEN_FILE"  # noqa: S105 - an env var name, not a secret
ENV_SERVER_MODULE = "BWSTACK_SERVER_MODULE"
ENV_FAIL_FAST = "BWSTACK_FAIL_FAST"
ENV_READY_PROBE = "BWSTACK_READY_PROBE"
ENV_LINGER = "BWSTACK_LINGER"
ENV_ENV_FILE = "BWSTACK_ENV_FILE"
#: the serve wrapper's hang watchdog (on unless ``0``): adds ``--enable-metrics`` and samples ``/metrics``
ENV_HANG_WATCH = "BWSTACK_HANG_WATCH"
#: seconds requests may be in flight with no token before the server is ``hang``: the profile's derived bound
#: (``bwstack.stack.hangbound``), rendered by ``launch``; read by the watchdog, the healthcheck and the soak
ENV_HC_HANG_AFTER = "BWSTACK_HC_HANG_AFTER"
#: Docker's ``retries`` of the rendered healthcheck: after fail-fast the wrapper stays until that many
#: failing probes are recorded, so Docker's own status turns ``unhealthy`` before the container exits
ENV_HC_RETRIES = "BWSTACK_HC_RETRIES"

DEFAULT_HC_URL = "http://127.0.0.1:30000"
DEFAULT_HC_TIMEOUT = 30.0
DEFAULT_HC_MODE = "full"
DEFAULT_HC_DECODE_EVERY = 300.0
#: seconds between two long-context probes of a running server (it also runs at start-up and in calibrate)
DEFAULT_HC_LONG_EVERY = 600.0
#: beside the state file: the verdict fail-fast stopped the server on (``serve.py`` writes it; the healthcheck
#: repeats it while the server is gone, so Docker records the class even when the readiness probe, not a
#: Docker probe, found it)
STOPPED_SUFFIX = ".stopped"
#: seconds a server log may stay unchanged while the port refuses before the server counts as dead (start-up:
#: a 371 GB load or a JIT compile may keep the log quiet for minutes)
DEFAULT_HC_STALL_AFTER = 900.0
#: the hang bound where no derived one was rendered (a bare ``docker run`` of the image): the derivation's
#: result for a 8192-token prefill pass at 418 tok/s (bwstack.stack.hangbound)
DEFAULT_HC_HANG_AFTER = 50.0
DEFAULT_LOG_MAX_BYTES = 64 * 1024 * 1024
DEFAULT_API_KEY_FILE = f"{imagelayout.SECRETS_DIR}/api_key"
DEFAULT_HF_TOKEN_FILE = f"{imagelayout.SECRETS_DIR}/hf_token"
DEFAULT_SERVER_MODULE = "sglang.launch_server"

REDACTED = "***"

#: verdicts that do not heal by waiting: with fail-fast on, serve.py stops the server when the healthcheck
#: records one, so the container exits (Docker then reports it unhealthy) instead of serving garbage.
#: Defined with each class in the failure catalog (signatures.CLASS_INFO): not starting, timeout and
#: health_timeout (a busy or loading server), crash (already gone) and warmup_failed (covers transient HTTP
#: errors; SGLang kills itself after a real warmup failure).
EXIT_FAIL_FAST = 3


#: a Compose duration: one or more number+unit parts (``30s``, ``45m``, ``1h30m``, ``1.5s``, ``500ms``);
#: the one grammar of every duration bwstack reads (the stack file's healthcheck timings, k8s probes,
#: up's wait, the environment)
DURATION_PATTERN = r"(?:\d{1,6}(?:\.\d{1,3})?(?:ms|s|m|h)){1,4}"
DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def duration_seconds(text: str) -> float | None:
    """Seconds in a Compose duration (``DURATION_PATTERN``); None when ``text`` is not one."""
    text = text.strip()
    if not re.fullmatch(DURATION_PATTERN, text):
        return None
    return sum(float(n) * DURATION_UNITS[u] for n, u in re.findall(r"(\d+(?:\.\d+)?)(ms|s|m|h)", text))


def parse_seconds(text: str, default: float) -> float:
    """Seconds in a bare number (``30``) or a duration (``30s``, ``5m``, ``1h30m``); ``default`` when empty or
    malformed (an environment variable must never stop the healthcheck)."""
    seconds = duration_seconds(text)
    if seconds is not None:
        return seconds
    try:
        return float(text.strip())
    except ValueError:
        return default


def env_or(name: str, default: str) -> str:
    """The environment variable's value, or ``default`` when unset or empty."""
    value = os.environ.get(name, "")
    return value if value.strip() else default


class SecretUnreadable(Exception):
    """A secret file exists but cannot be read (mode, owner, not a regular file): never serve without it."""


#: a secret file larger than this is not a key or a token (and is not read into memory)
SECRET_MAX_BYTES = 64 * 1024


def load_secret(path: str) -> str | None:
    """The stripped content of a secret file; None when it does not exist or is empty (whitespace only).

    Raises :class:`SecretUnreadable` (its message names the file, never the content) when the file exists but
    cannot be read: a mode or owner the serving user cannot read, a FIFO or folder, a file too large.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise SecretUnreadable(f"cannot read the secret file {path}: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise SecretUnreadable(f"the secret file {path} is not a regular file")
        if info.st_size > SECRET_MAX_BYTES:
            raise SecretUnreadable(f"the secret file {path} is larger than {SECRET_MAX_BYTES} bytes")
        data = os.read(fd, SECRET_MAX_BYTES + 1)
    except OSError as exc:
        raise SecretUnreadable(f"cannot read the secret file {path}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    value = data.decode("utf-8", errors="replace").strip()
    return value or None


def api_key_problem(key: str) -> str | None:
    """Why SGLang cannot take ``key`` as its ``--api-key``, else None. Its ``--config`` parser (0.5.9, 0.5.23)
    turns the file's ``api-key`` into the argv items ``--api-key KEY``, and argparse reads a value that
    begins with ``-`` as the next option ("expected one argument"). Never names the key."""
    if key.startswith("-"):
        return (
            "the API key begins with '-': SGLang's argument parser takes it for an option and exits "
            "('--api-key: expected one argument'); use a key that does not begin with '-'"
        )
    return None


def read_secret(path: str) -> str | None:
    """The stripped content of a secret file; None when missing, unreadable or empty. Never logs it."""
    try:
        return load_secret(path)
    except SecretUnreadable:
        return None


def secret_status(path: str) -> str:
    """A printable description of a secret file's state (never its content)."""
    try:
        value = load_secret(path)
    except SecretUnreadable as exc:
        return str(exc)
    if value is None:
        return f"{path} missing or empty"
    return f"{path} present"


def _py_quoted(text: str, quote: str) -> str:
    """``text`` as Python prints it between ``quote`` characters (repr's escapes)."""
    out = []
    for ch in text:
        if ch == "\\":
            out.append("\\\\")
        elif ch == quote:
            out.append("\\" + quote)
        elif ch in "'\"":
            out.append(ch)
        else:
            out.append(repr(ch)[1:-1])
    return "".join(out)


def _printed_once(text: str) -> set[str]:
    forms = {text, _py_quoted(text, "'"), _py_quoted(text, '"')}
    forms.add(json.dumps(text)[1:-1])
    forms.add(json.dumps(text, ensure_ascii=False)[1:-1])
    forms.add(shlex.quote(text))
    forms.add(urllib.parse.quote(text, safe=""))
    forms.add(urllib.parse.quote_plus(text, safe=""))
    return forms


def printed_forms(secret: str) -> list[str]:
    """Every way Python, JSON, a shell or a URL may print ``secret`` (also printed twice over, e.g. the repr
    inside a JSON document), longest first, so redaction catches the key in SGLang's ``server_args`` repr, in
    a JSON state file or in a quoted command line, not only byte for byte."""
    if not secret:
        return []
    forms: set[str] = set()
    for once in _printed_once(secret):
        forms |= _printed_once(once)
    return sorted((f for f in forms if f), key=lambda f: (-len(f), f))


def redact(text: str, secrets: list[str]) -> str:
    """Replace every printed form (:func:`printed_forms`) of each non-empty secret with ``***``."""
    for secret in secrets:
        for form in printed_forms(secret):
            text = text.replace(form, REDACTED)
    return text


def write_json_atomic(path: str, data: Any) -> None:
    """Write JSON to ``path`` via a temporary file in the same folder and os.replace."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, sort_keys=True)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def positive_int(text: str) -> int:
    """argparse type of the load clients (bench, soak): a whole number of at least 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value
