"""Headless Debian Chromium for the report tests (imported as ``support.headless``): one argv, one runner."""

from __future__ import annotations

import subprocess
from pathlib import Path


def run_chromium(
    binary: str, page: Path, tmp: Path, *mode: str, width: int = 1400, height: int = 1600
) -> subprocess.CompletedProcess[str]:
    """Open ``page`` with ``mode`` (``--screenshot=…``, ``--dump-dom``); no network, logging to stderr."""
    argv = [
        binary,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={tmp / 'profile'}",
        "--enable-logging=stderr",
        "--v=0",
        f"--window-size={width},{height}",
        *mode,
        page.resolve().as_uri(),
    ]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=180, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    return result
