"""The scanner's shortcuts change nothing: the folded scan finds every line that holds a key, with exactly the
keys it holds, and skipping what cannot change the verdict gives the same scanner state as matching it all.

The catalog's outcomes are checked by the corpus and signature tests; these tests check the shortcuts against a
plain reading (every key looked up on every line, every candidate signature matched) on the real logs under
``corpus/`` and ``logs/``, fed whole, in chunks, and continued from a saved state.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from healthchecks.signatures import catalog, paste

from healthchecks import signatures

Scanner = signatures.Scanner
HERE = Path(__file__).resolve().parent
LOGS = sorted((HERE / "corpus").glob("*.log")) + sorted((HERE / "logs").glob("*.log"))
#: every corpus log in one text: many runs, many classes, start banners (the benchmark's worst case)
ALL = "".join(path.read_text(encoding="utf-8") + "\n" for path in LOGS)


def _plain_keys(line: str) -> list[int]:
    return [k for k, key in enumerate(catalog.KEYS) if key in line]


def _state(scanner: Scanner) -> list[Any]:
    def match(found: signatures.Match | None) -> Any:
        if found is None:
            return None
        sig = found.signature  # a structural rule's signature is not in the catalog's table
        return [
            found.to_dict(),
            signatures.SIGNATURES.index(sig) if sig in signatures.SIGNATURES else sig.regex,
        ]

    return [
        scanner.to_state(),
        match(scanner.result()),
        match(scanner.result(strong_only=True)),
        scanner.verdict(),
    ]


def _plainly(monkeypatch: pytest.MonkeyPatch) -> None:
    """No shortcut: every candidate line is read, every candidate signature matched."""
    monkeypatch.setattr(Scanner, "_settled", lambda self, words, line_no: False)
    monkeypatch.setattr(Scanner, "_changing", lambda self, indexes, line_no: list(indexes))


def test_every_key_is_reached_by_a_folded_scan_word() -> None:
    for k, key in enumerate(catalog.KEYS):
        folded = key.lower().encode().translate(None, catalog.FOLD_DROP)
        reached = [
            (word, spelt)
            for w, word in enumerate(catalog.SCAN_FOLDED)
            for spelt, group in catalog.FOLDED_KEYS[w]
            if k in group
        ]
        assert reached, key
        for word, spelt in reached:
            assert word in folded and spelt in key, (key, word, spelt)
    assert all(len(word) >= 3 for word in catalog.SCAN_FOLDED)


@pytest.mark.parametrize("path", LOGS[:60] + LOGS[-20:], ids=lambda path: path.name)
def test_the_scan_finds_exactly_the_lines_with_keys_and_their_keys(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = path.read_text(encoding="utf-8")
    seen: list[tuple[int, list[int]]] = []
    monkeypatch.setattr(Scanner, "_settled", lambda self, words, line_no: False)
    monkeypatch.setattr(
        Scanner,
        "_consider",
        lambda self, line, line_no, keys, shown=None: seen.append((line_no, sorted(keys))),
    )
    Scanner().feed(text)
    lines = paste.normalise(text).split("\n")  # the scan reads each line without its paste noise
    want = [(i + 1, keys) for i, line in enumerate(lines) if (keys := _plain_keys(line))]
    assert seen == want


def test_skipping_what_cannot_change_the_verdict_changes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    lines = ALL.splitlines(keepends=True)

    def states() -> list[Any]:
        found = [_state(signatures.scan_text(ALL))]
        scanner = Scanner()
        for at in range(0, len(lines), 37):  # in chunks, saved and restored now and then
            scanner.feed("".join(lines[at : at + 37]))
            if at % 5 == 0:
                scanner = Scanner.from_state(json.loads(json.dumps(scanner.to_state())))
        found.append(_state(scanner))
        for path in LOGS:
            found.append(_state(signatures.scan_text(path.read_text(encoding="utf-8"))))
        return found

    fast = states()
    _plainly(monkeypatch)
    assert states() == fast


def test_a_restored_state_that_refers_to_later_lines_is_read_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    lines = ALL.splitlines(keepends=True)

    def continued() -> list[Any]:
        found = []
        for cut, back in ((200, 150), (500, 499), (800, 10)):
            state = signatures.scan_text("".join(lines[:cut])).to_state()
            state["lines_seen"] = max(0, state["lines_seen"] - back)
            scanner = Scanner.from_state(state)
            scanner.feed("".join(lines[cut:]))
            found.append(_state(scanner))
        return found

    fast = continued()
    _plainly(monkeypatch)
    assert continued() == fast
