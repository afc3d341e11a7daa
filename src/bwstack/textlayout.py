"""Plain-text tables that stay readable at any terminal width (``list``, ``doctor``, the sweep summary).

The leading columns (names the user copies into the next command) are never cut: each is padded to its
longest cell. Only the last column adapts: :func:`table` clips it to one line with ``…``; with ``wrap=True``
it wraps under its own start, or on indented lines below when less than :data:`MIN_LAST` columns remain.
No line is longer than the width unless the leading cells alone are (names are never cut).
"""

from __future__ import annotations

import shutil
import textwrap
import unicodedata
from collections.abc import Sequence

GAP = "  "
MIN_LAST = 24
"""Fewest columns the last cell gets beside the others before it moves to indented lines of its own."""
INDENT = "    "
#: Unicode categories never printed raw: format characters (bidi overrides, zero-width), line and paragraph
#: separators, unassigned and private-use code points
_HIDDEN = frozenset({"Cf", "Zl", "Zp", "Cn", "Co", "Cs"})


def terminal_width(default: int = 80) -> int:
    """``COLUMNS`` when set, else the terminal's width, else ``default`` (a pipe)."""
    return max(20, shutil.get_terminal_size((default, 24)).columns)


def clip(text: str, width: int) -> str:
    """``text`` on one line, cut to ``width`` characters with a trailing ``…``."""
    flat = " ".join(text.split())
    if len(flat) <= width:
        return flat
    return flat[: max(0, width - 1)].rstrip() + "…" if width > 0 else ""


def wrap(text: str, width: int, indent: str = "") -> list[str]:
    """``text`` wrapped to ``width`` (long words broken, hyphenated names kept whole where they fit)."""
    return textwrap.wrap(
        " ".join(text.split()),
        width=max(8, width),
        initial_indent=indent,
        subsequent_indent=indent,
        break_on_hyphens=False,
    ) or [indent.rstrip()]


def table(
    rows: Sequence[Sequence[str]],
    width: int,
    *,
    header: Sequence[str] | None = None,
    wrap_last: bool = False,
) -> list[str]:
    """Lines of a table whose leading cells are whole and whose last cell fits the width."""
    all_rows = [list(header)] if header is not None else []
    all_rows += [list(r) for r in rows]
    if not all_rows:
        return []
    lead = len(all_rows[0]) - 1
    widths = [max(len(r[i]) for r in all_rows) for i in range(lead)]
    out: list[str] = []
    for row in all_rows:
        head = GAP.join(cell.ljust(widths[i]) for i, cell in enumerate(row[:lead]))
        prefix = head + GAP if lead else ""
        room = width - len(prefix)
        last = row[lead]
        if not wrap_last:
            if room >= MIN_LAST or len(last) <= room:
                out.append((prefix + clip(last, room)).rstrip())
            else:
                out.append(head.rstrip())
                if last.strip():
                    out.append(INDENT + clip(last, width - len(INDENT)))
            continue
        if room >= MIN_LAST:
            lines = wrap(last, room)
            out.append((prefix + lines[0]).rstrip())
            out.extend((" " * len(prefix) + line).rstrip() for line in lines[1:])
        else:
            out.append(head.rstrip())
            out.extend(wrap(last, width, INDENT) if last.strip() else [])
    return out


def printable(text: object) -> str:
    """``text`` with every control character (C0, DEL, C1: ESC sequences, carriage returns, bells) written
    as a ``\\xNN`` / ``\\uNNNN`` escape, and so every format and separator character (a right-to-left
    override, a zero-width space, U+2028): text from reports, logs and state files is printed through this,
    so a hostile file cannot move the cursor, rewrite a line, reorder or hide text in the terminal."""
    out = []
    for ch in str(text):
        code = ord(ch)
        if code < 0x20 or 0x7F <= code < 0xA0 or (code >= 0xA0 and unicodedata.category(ch) in _HIDDEN):
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
        else:
            out.append(ch)
    return "".join(out)
