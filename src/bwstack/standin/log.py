"""SGLang's log format for the stand-in: ``[YYYY-mm-dd HH:MM:SS] message`` on stderr.

SGLang configures ``logging.basicConfig(format="[%(asctime)s{prefix}] %(message)s",
datefmt="%Y-%m-%d %H:%M:%S")`` (``configure_logger`` in srt/utils/common.py of the 0.5.9 and 0.5.23
wheels); the scheduler process uses the prefix `` TP0``. Uvicorn's lines use
``[%(asctime)s] %(levelprefix)s %(message)s`` (``set_uvicorn_logging_configs``), access lines go to stdout.
Deprecation warnings are wrapped in ANSI yellow like ``print_deprecated_warning`` does.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import TextIO

_LOCK = threading.Lock()

HTTP_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    405: "Method Not Allowed",
    422: "Unprocessable Entity",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


def timestamp() -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime())


def write(text: str, stream: TextIO | None = None) -> None:
    """Write raw text (several lines at once stay together) and flush."""
    out = stream if stream is not None else sys.stderr
    with _LOCK:
        out.write(text if text.endswith("\n") else text + "\n")
        out.flush()


def log(message: str, *, tp: int | None = None) -> None:
    """One SGLang log record; ``tp`` adds the scheduler's `` TP<rank>`` prefix."""
    prefix = f" TP{tp}" if tp is not None else ""
    write(f"[{timestamp()}{prefix}] {message}")


def deprecation(message: str) -> None:
    """SGLang's ``print_deprecated_warning``: a warning in bold yellow.

    It fires while argparse runs, before SGLang configures logging, so Python's last-resort handler prints the
    bare message (no timestamp) on stderr.
    """
    write(f"\033[1;33m{message}\033[0m")


def uvicorn(message: str) -> None:
    """A uvicorn INFO line (``levelprefix`` is ``INFO:`` padded to 9 columns, then a space)."""
    write(f"[{timestamp()}] INFO:     {message}")


def access(client: str, method: str, path: str, status: int) -> None:
    """Uvicorn's access line on stdout: ``127.0.0.1:5000 - "GET /health HTTP/1.1" 200 OK``."""
    reason = HTTP_REASONS.get(status, "")
    write(
        f'[{timestamp()}] INFO:     {client} - "{method} {path} HTTP/1.1" {status} {reason}'.rstrip(),
        sys.stdout,
    )
