"""Headless Debian Chromium for the report tests (imported as ``support.headless``): one argv, one runner."""

from __future__ import annotations

import subprocess
from html.parser import HTMLParser
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


class _Cells(HTMLParser):
    def __init__(self, css_class: str) -> None:
        super().__init__()
        self.css_class = css_class
        self.rows: list[list[str]] = []
        self.inside = False
        self.cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table" and ("class", self.css_class) in attrs:
            self.inside = True
        elif self.inside and tag == "tr":
            self.rows.append([])
        elif self.inside and tag in ("td", "th"):
            self.cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self.inside = False
        elif self.inside and tag in ("td", "th") and self.cell is not None:
            self.rows[-1].append("".join(self.cell).strip())
            self.cell = None

    def handle_data(self, data: str) -> None:
        if self.cell is not None:
            self.cell.append(data)


def table_cells(dom: str, css_class: str) -> list[list[str]]:
    """The text of each cell of ``<table class="CSS_CLASS">``, row by row, as a browser's ``--dump-dom``
    holds it (the DOM the browser built, not the page's source)."""
    parsed = _Cells(css_class)
    parsed.feed(dom)
    return parsed.rows
