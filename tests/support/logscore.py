"""The one scorer of labelled log folders: the corpus (``tests/healthchecks/corpus``) and a round's held-out
set are measured alike, each file through ``bwstack classify-log``'s own path (``classify_log_file``).

``python -m support.logscore FOLDER [--json OUT]`` (from ``tests/``) prints the score; ``--json`` also writes it.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

from bwstack.classify import classify_log_file
from bwstack.files import atomic_write, sha256_file

#: classes that mean the server is not dead (a log labelled otherwise must never be read as one of these)
ALIVE = ("healthy", "starting")


@dataclass
class Score:
    """Per file ``(expected, got)``; the derived counts the tests and the scores table use."""

    folder: Path
    results: dict[str, tuple[str, str]] = field(default_factory=dict)

    @property
    def right(self) -> int:
        return sum(expected == got for expected, got in self.results.values())

    @property
    def total(self) -> int:
        return len(self.results)

    @property
    def accuracy(self) -> float:
        return self.right / self.total if self.total else 0.0

    @property
    def wrong(self) -> dict[str, tuple[str, str]]:
        return {name: pair for name, pair in self.results.items() if pair[0] != pair[1]}

    def read_as(self, got: str) -> list[str]:
        """Files labelled as a failure (neither healthy nor starting) that the catalog read as ``got``."""
        return sorted(n for n, (exp, cls) in self.results.items() if cls == got and exp not in ALIVE)

    def to_dict(self) -> dict[str, object]:
        return {
            "right": self.right,
            "total": self.total,
            "accuracy": round(self.accuracy, 4),
            "failed_read_as_healthy": self.read_as("healthy"),
            "dead_read_as_starting": self.read_as("starting"),
            "wrong": {name: {"expected": exp, "got": got} for name, (exp, got) in sorted(self.wrong.items())},
        }


def labels(folder: Path) -> dict[str, dict[str, str]]:
    """The folder's ``EXPECTED.json``: file name -> {"class", "source", ...}."""
    found: dict[str, dict[str, str]] = json.loads((folder / "EXPECTED.json").read_text(encoding="utf-8"))
    return found


def score(folder: Path, names: list[str] | None = None) -> Score:
    """Classify every labelled file of ``folder`` (or only ``names``) and compare with its label."""
    expected = labels(folder)
    result = Score(folder)
    for name in names if names is not None else sorted(expected):
        result.results[name] = (expected[name]["class"], str(classify_log_file(folder / name)["class"]))
    return result


def digests(folder: Path, names: list[str]) -> dict[str, str]:
    """sha256 of each named file of ``folder`` (the pinned held-out set)."""
    return {name: sha256_file(folder / name) for name in sorted(names)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m support.logscore", description=__doc__)
    parser.add_argument("folder", type=Path)
    parser.add_argument("--json", type=Path, help="also write the score here")
    args = parser.parse_args(argv)
    found = score(args.folder)
    print(f"{found.right}/{found.total} right ({found.accuracy:.1%})")
    for name, (exp, got) in sorted(found.wrong.items()):
        print(f"  {name}: expected {exp}, got {got}")
    if args.json:
        atomic_write(args.json, json.dumps(found.to_dict(), indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
