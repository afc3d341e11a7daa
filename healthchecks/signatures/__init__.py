"""The one catalog of SGLang failure signatures: log text -> failure class, root cause first.

Stdlib only; imported by the in-container healthcheck (``warmup.py``), by the serve wrapper and by host-side
tools (``from healthchecks import signatures``). No other module maps log text to a class.

This module is the catalog's public face and its matcher (:class:`Scanner`); the parts it joins are
``classes.py`` (the classes: meaning, fix, rank, fail-fast, severity tier), ``entry.py``
(the :class:`Signature` record and its builder), the signature tables by failure family,
``gpu.py``, ``runtime.py``, ``shapes.py`` then ``evidence.py``, ``catalog.py`` (the tables joined in order,
the start and ready lines, and the keys prefilter that picks the lines to read), ``paste.py`` (the paste
noise dropped before the scan) and ``structure.py`` (the log's structure and the rules that read it). Import
the names from here.

Each :class:`Signature` carries the public source of its text (an issue/PR reference, or the wheel file it was
read in) and a priority taken from its class: when several signatures match one log, the root cause wins (the
class earliest in the causal chain, e.g. ``nan`` before the ``device_assert`` it triggers, a specific
``AssertionError`` before the generic crash lines that follow it); ties go to the earliest line. The other
classes seen are reported as ``also``. Generic traceback evidence (an exception line, frames, a bare
``Traceback`` header) is *weak*: it makes a log ``crash`` but, in the live healthcheck, only once the server
has stopped answering. Only what follows the last start banner counts. A log without any match is
``healthy`` when it reached SGLang's ready line or shows serving evidence (``SERVING``) and ``starting``
otherwise -- never ``healthy`` because nothing matched. The rules by shape (fatal evidence, arch gates,
resource limits, the host arch, serving evidence) live in ``shapes.py``.

Public API::

    CLASS_INFO / CLASSES         every class with its meaning, typical fix, rank and fail-fast flag
    DESCRIPTIONS                 class -> "meaning; fix: typical fix"
    FAIL_FAST_CLASSES            classes that do not heal by waiting
    RESTART_HEALS                classes a restart of the same spec may heal (norestart.py remembers the rest)
    SEVERITY                     class -> 0 (healthy) .. 3 (serves wrong output), for comparing sweeps
    SIGNATURES                   the catalog (tuple of Signature)
    FATAL, SERVING, SERVING_MIN  the fatal-evidence and serving-evidence rules (docs/healthcheck.md)
    classify_lines(lines)        -> Match | None   (Match: cls, line (1-based), text, also, signature)
    classify_text(text)          -> Match | None
    classify_file(path)          -> Match | None   (streams the file; decodes as UTF-8 with replacement)
    scan_text / scan_file        -> Scanner        (.result(), .verdict(): class or healthy/starting, .ready,
                                                    .serves, .host_arch, .ended_in_error(): a finished
                                                    paste's closing failure report)
    Scanner                      incremental scanning (feed chunks, persist with to_state/from_state)
    CATALOG_ID, state_is_current whether a saved scan was made by this catalog (else scan from the start)
    class_table()                the Markdown class table of the README and docs/healthcheck.md
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from healthchecks.signatures import catalog, evidence, paste, shapes, structure
from healthchecks.signatures.catalog import CATALOG_ID, READY_TEXT, SIGNATURES, START_TEXTS
from healthchecks.signatures.classes import (
    CLASS_INFO,
    CLASS_PRIORITY,
    CLASSES,
    DESCRIPTIONS,
    FAIL_FAST_CLASSES,
    NOT_FATAL_WHILE_ALIVE,
    RESTART_HEALS,
    SEVERITY,
    ClassInfo,
    class_table,
)
from healthchecks.signatures.entry import Signature

#: the public API of the failure catalog; its parts live in the modules of this package
__all__ = [
    "CATALOG_ID",
    "CLASSES",
    "CLASS_INFO",
    "DESCRIPTIONS",
    "FAIL_FAST_CLASSES",
    "FATAL",
    "MAX_TEXT",
    "NOT_FATAL_WHILE_ALIVE",
    "READY_TEXT",
    "RESTART_HEALS",
    "SERVING",
    "SERVING_MIN",
    "SEVERITY",
    "SIGNATURES",
    "START_TEXTS",
    "STOPPED",
    "ClassInfo",
    "Match",
    "Scanner",
    "Signature",
    "class_table",
    "classify_file",
    "classify_lines",
    "classify_text",
    "scan_file",
    "scan_text",
    "state_is_current",
]

MAX_TEXT = 500
#: the longest line the scanner looks at (a longer one is judged by its head; SGLang's longest, the
#: ServerArgs line, is ~20 KB): memory and time stay bounded on a log that is one endless line
MAX_LINE_BYTES = 64 * 1024


@dataclass(frozen=True)
class Match:
    """The root-cause match of a log: class, 1-based line, the line's text, other classes seen."""

    cls: str
    line: int
    text: str
    also: tuple[str, ...]
    signature: Signature
    host_arch: str | None = None  # the GPU arch the log states (sm_120), for arch-related classes

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape used by ``bwstack classify-log --json`` and the sweep report."""
        found: dict[str, Any] = {
            "class": self.cls,
            "line": self.line,
            "text": self.text,
            "also": list(self.also),
        }
        if self.host_arch:
            found["host_arch"] = self.host_arch
        return found


#: fatal evidence and serving evidence, each one rule (defined in shapes.py, documented in
#: docs/healthcheck.md): a log with fatal evidence is never ``starting``; a run with serving evidence serves
FATAL: tuple[Signature, ...] = shapes.FATAL
SERVING: tuple[bytes, ...] = shapes.SERVING
#: clean-stop evidence (evidence.py): a run that ends in one with no fatal evidence is ``healthy`` (stopped)
STOPPED: tuple[bytes, ...] = evidence.STOPPED
SERVING_MIN = shapes.SERVING_MIN

#: the classes a stated host arch explains (Match.host_arch is set for them)
_ARCH_CLASSES = frozenset({"unsupported_arch", "no_kernel_image", "kernel_compile", "shared_memory"})
#: the classes whose evidence says that something failed, not why: the structural rules may name the cause
#: (an AssertionError raised in a weight loader is the checkpoint's shape, round 13: sgl-project/sglang#4431)
_EXPLAINED = frozenset({"crash", "assertion"})
#: what a line says when the server goes on another way after a failure ('.., falling back to native version')
_FELL_BACK = ("falling back to", "falls back to", "fall back to", "fallback to")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
#: how far above a strong exception line a weak match may be and still be its failing source line (a
#: traceback prints ``File ..``, the source line, then the exception; a caret line may come between)
_SOURCE_LINE_REACH = 3


_Best = tuple[int, int, str, Signature]


def _clean(line: str) -> str:
    text = _ANSI.sub("", line).strip()
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 3] + "..."


class Scanner:
    """Incremental classifier: feed complete lines (or text chunks ending at a newline), read result().

    Only what follows the last start banner (``START_TEXTS``) counts: a log that holds an earlier run keeps
    the verdict of the newest one. ``ready`` tells whether that run reached SGLang's ready line.
    """

    def __init__(self) -> None:
        self.lines_seen = 0
        self.start_line = 0  # 1-based line of the last start banner (0: none seen)
        self.ready_line = 0  # 1-based line of the last ready line after it (0: none)
        self._best: _Best | None = None
        self._strong: _Best | None = None
        self._previous: _Best | None = None  # the root cause of the run before the last banner (not saved)
        self._seen: dict[str, tuple[int, int]] = {}
        self._seen_strong: dict[str, tuple[int, int]] = {}
        self.serving = 0  # serving evidence after the start banner (SERVING lines), counted up to SERVING_MIN
        self.stopped = 0  # clean-stop evidence after the start banner (STOPPED lines): SIGTERM, exit -15
        self.host_arch: str | None = None  # the last host arch the log stated (sm_120)
        #: remembered until the state changes: signature index -> whether its match would change anything,
        #: folded scan word index -> whether a line holding it is settled (see _settled). A later line and a
        #: state that only grew can make a signature unable to change anything, never able again: a
        #: remembered "no" stays right until a start banner or the ready line drops what was seen
        self._changes: dict[int, bool] = {}
        self._quiet: dict[int, bool] = {}
        #: the last structure.TAIL characters fed (as pasted), for the structural rules
        self._tail: deque[str] = deque()
        self._tail_size = 0
        self._tail_normal: str | None = None  # the tail without paste noise, while it is one chunk fed
        self._structure: tuple[int, structure.Structure] | None = None  # (lines_seen, its structure)

    @property
    def ready(self) -> bool:
        """True when the current run logged SGLang's ready line."""
        return self.ready_line > 0

    @property
    def serves(self) -> bool:
        """True when the current run reached the ready line or shows serving evidence (SERVING_MIN lines)."""
        return self.ready or self.serving >= SERVING_MIN

    def _consider(self, line: str, line_no: int, keys: list[int], shown: str | None = None) -> None:
        """Match one candidate line; ``keys`` are the indexes (in ``catalog.KEYS``) of the literal keys it
        holds; ``shown`` is the line as pasted when paste noise was dropped from it (a match shows that)."""
        if not catalog.START_KEYS.isdisjoint(keys):
            self.start_line, self.ready_line, self.serving, self.stopped = line_no, 0, 0, 0
            self._previous = self._best or self._previous
            self._best = self._strong = None
            self._seen, self._seen_strong = {}, {}
            self._changes, self._quiet = {}, {}
            return
        if not catalog.HOST_KEYS.isdisjoint(keys):
            self.host_arch = shapes.host_arch(line) or self.host_arch
        if catalog.READY_KEY in keys:
            # the run went on to be ready: generic traceback evidence before this line was handled (real
            # 0.5.9 logs a ModuleNotFoundError for openai_harmony, then serves); specific signatures stay
            self.ready_line = line_no
            self._best, self._seen = self._strong, dict(self._seen_strong)
            self._changes, self._quiet = {}, {}
        if evidence.RECOVERED in line:  # SGLang's warning on a failure it went on from: no fatal evidence
            return
        candidates = catalog.candidates(keys)
        # only signatures whose match could still change what the scanner holds are matched (a class already
        # seen as early in the causal chain gains nothing from one more line), and the generic ones only when
        # no specific one matches the line (they would not count): the same outcome, fewer regexes run
        live = self._changing(candidates, line_no)
        if not live:
            return
        found = [SIGNATURES[i] for i in live if not SIGNATURES[i].generic and SIGNATURES[i].matches(line)]
        generic = [SIGNATURES[i] for i in live if SIGNATURES[i].generic]
        if (
            generic
            and not found
            and not any(
                not SIGNATURES[i].generic and i not in live and SIGNATURES[i].matches(line)
                for i in candidates
            )
        ):
            found = [sig for sig in generic if sig.matches(line)]
        if found:
            self._changes, self._quiet = {}, {}
        for sig in found:
            rank = (sig.priority, line_no)
            if sig.cls not in self._seen or rank < self._seen[sig.cls]:
                self._seen[sig.cls] = rank
            if self._best is None or rank < (self._best[0], self._best[1]):
                self._best = (sig.priority, line_no, _clean(shown or line), sig)
            if not sig.weak and (self._strong is None or rank < (self._strong[0], self._strong[1])):
                self._strong = (sig.priority, line_no, _clean(shown or line), sig)
            if not sig.weak and (sig.cls not in self._seen_strong or rank < self._seen_strong[sig.cls]):
                self._seen_strong[sig.cls] = rank

    def _would_change(self, sig: Signature, line_no: int) -> bool:
        """Whether a match of ``sig`` on line ``line_no`` changes anything (the updates of _consider)."""
        rank = (sig.priority, line_no)
        seen = self._seen.get(sig.cls)
        if seen is None or rank < seen or self._best is None or rank < (self._best[0], self._best[1]):
            return True
        if sig.weak:
            return False
        strong = self._seen_strong.get(sig.cls)
        return (
            strong is None
            or rank < strong
            or self._strong is None
            or rank < (self._strong[0], self._strong[1])
        )

    def _changing(self, indexes: tuple[int, ...], line_no: int) -> list[int]:
        """The signatures among ``indexes`` whose match on line ``line_no`` would change anything."""
        known = self._changes
        for i in indexes:
            if i not in known:
                known[i] = self._would_change(SIGNATURES[i], line_no)
        return [i for i in indexes if known[i]]

    def _settled(self, words: list[int], line_no: int) -> bool:
        """Whether a line that holds (only) these folded scan words cannot change anything: none of the
        signatures their keys lead to could, and none of their keys is a start, ready or host-arch key."""
        for w in words:
            quiet = self._quiet.get(w)
            if quiet is None:
                sigs = catalog.FOLDED_SIGS[w]
                quiet = self._quiet[w] = sigs is not None and not self._changing(sigs, line_no)
            if not quiet:
                return False
        return True

    def feed(self, text: str) -> None:
        """Scan ``text``; its first character starts a new line (a partial last line counts as a line).

        Candidate lines are found with bytes.find (C speed), once per scan word (each signature key contains
        one), in the folded text: lower-cased, only letters and a few marks, each distinct line once. A
        candidate line is checked for the exact keys of the words it holds, and only the signatures of those
        keys are matched to it (none once nothing they could find would change the verdict). The paste noise
        around each line (quote markers, launcher and log-store prefixes, ANSI, CR) is dropped first
        (:func:`paste.normalise`).
        """
        pasted = text
        text = paste.normalise(text)
        self._keep_tail(pasted)
        self._tail_normal = text if len(self._tail) == 1 else None  # normalise() spares the structure a pass
        shown = pasted.split("\n") if text != pasted else None  # a match shows its line as pasted
        try:
            raw = text.encode("utf-8")
            odd = False
        except UnicodeEncodeError:  # lone surrogates (dropped from the decoded lines, kept in the raw ones)
            raw, odd = text.encode("utf-8", "surrogatepass"), True
        folded = raw.translate(catalog.FOLD, catalog.FOLD_DROP).split(b"\n")  # line for line
        distinct = b"\n".join(dict.fromkeys(folded)) + b"\n"  # each line ends with a newline
        found: dict[int, list[int]] = {}  # end of a distinct folded line -> the folded scan words on it
        find = distinct.find
        for index, word in enumerate(catalog.SCAN_FOLDED):
            pos = find(word)
            while pos >= 0:
                end = find(b"\n", pos)
                on_line = found.get(end)
                if on_line is None:
                    found[end] = [index]
                else:
                    on_line.append(index)
                pos = find(word, end)
        held = {distinct[distinct.rfind(b"\n", 0, end) + 1 : end]: words for end, words in found.items()}
        may_stop = any(word in distinct for word in catalog.STOP_FOLDED)
        del distinct
        last_start = -1  # raw offset of the last start banner's line
        if held:
            lines = raw.split(b"\n")
            checks = catalog.FOLDED_CHECKS
            offset = offset_line = 0  # line offset_line starts at raw offset ``offset``
            for index, line_folded in enumerate(folded):
                words = held.get(line_folded)
                if words is None or self._settled(words, self.lines_seen + index + 1):
                    continue
                line = lines[index][:MAX_LINE_BYTES].decode("utf-8", "ignore")  # the cap holds inside a line
                if odd:
                    low, word_keys = lines[index].lower(), catalog.word_keys()
                    keys = sorted(
                        {k for i, word in enumerate(catalog.SCAN_BYTES) if word in low for k in word_keys[i]}
                    )
                    keys = [k for k in keys if catalog.KEYS[k] in line]
                else:
                    keys = [
                        k
                        for w in words
                        for spelt, group in checks[w]
                        if spelt in line
                        for k, key in group
                        if key in line
                    ]
                    if len(words) > 1:  # a key two of the words lead to is there once
                        keys = list(dict.fromkeys(keys))
                if keys:
                    self._consider(line, self.lines_seen + index + 1, keys, shown[index] if shown else None)
                    if not catalog.START_KEYS.isdisjoint(keys):
                        offset += sum(map(len, lines[offset_line:index])) + index - offset_line
                        offset_line = index
                        last_start = offset
            del lines
        self._count_evidence(raw, last_start, may_stop)
        self.lines_seen += len(folded) - 1  # the newlines
        if text and not text.endswith("\n"):
            self.lines_seen += 1

    def _keep_tail(self, text: str) -> None:
        """Keep the last structure.TAIL characters fed (whole chunks: the tail starts at a line start)."""
        self._tail.append(text)
        self._tail_size += len(text)
        while len(self._tail) > 1 and self._tail_size - len(self._tail[0]) >= structure.TAIL:
            self._tail_size -= len(self._tail.popleft())

    def tail_missing(self) -> bool:
        """Whether the structural rules lack part of the log's end: a scanner restored from a saved state
        (:meth:`from_state` keeps no text) has been fed less than :data:`structure.TAIL` since."""
        fed = "".join(self._tail)
        return self._tail_size < structure.TAIL and self._tail_first(fed) > 1

    def restore_tail(self, text: str) -> None:
        """Give the structural rules the log's end as the scan read it: ``text`` is the log up to where this
        scanner has read, from a line start (the caller reads it back from the file)."""
        self._tail, self._tail_size, self._structure = deque([text]), len(text), None
        self._tail_normal = None

    def structure(self) -> structure.Structure:
        """The structure of the current run's end (:mod:`structure`): last traceback, died process, errors."""
        if self._structure is None or self._structure[0] != self.lines_seen:
            tail = "".join(self._tail)
            found = structure.read(tail, self._tail_first(tail), self.start_line, normal=self._tail_normal)
            self._structure = (self.lines_seen, found)
        return self._structure[1]

    def _count_evidence(self, raw: bytes, last_start: int, may_stop: bool) -> None:
        """Serving and clean-stop evidence after the last start banner: C-speed counts of SERVING lines
        (until enough) and of STOPPED lines (only when the chunk's folded text can hold one)."""
        counting = last_start >= 0 or self.serving < SERVING_MIN
        if not counting and not may_stop:
            return
        low = raw.lower()
        if counting:
            self.serving += sum(low.count(word, last_start + 1) for word in SERVING)
            # only whether SERVING_MIN is reached counts: the rarer evidence is looked for only below it
            if self.serving < SERVING_MIN and b"x across cluster]" in low:
                self.serving += shapes.repeated_serving(low, last_start + 1)
            if self.serving < SERVING_MIN and shapes.served(low, last_start + 1):
                self.serving += SERVING_MIN
        if may_stop:
            self.stopped += sum(low.count(word, last_start + 1) for word in STOPPED)

    def result(self, strong_only: bool = False, answering: bool | None = None) -> Match | None:
        """The root cause of the current run, or None; ``strong_only`` skips generic traceback evidence.

        ``answering``: whether the server is known to answer now (the live healthcheck knows; a paste does
        not: None). Unless it is known not to, traceback evidence that was one failed request's, with the
        server answering on (:func:`structure.request_failed`), is set aside.

        When no specific signature explains the run (nothing, or only crash evidence: a traceback, a child
        that died, a failed capture, none of which names a cause), the structural rules
        (:func:`structure.explain`) may: an exception type with the module or function that raised it, a
        capture that never returned, a collapsed output. Those read the end of what this scanner was fed."""
        best = self._strong if strong_only else self._best
        if strong_only and best is not None and self._explains(best):
            best = self._best  # e.g. the arch gate's `assert is_sm100_supported()` above its AssertionError
        if best is None or best[3].cls in _EXPLAINED or best[3].weak:
            found = structure.explain(self.structure()) if self._tail else None
            # live (strong_only), a traceback alone is no fatal evidence; once strong crash evidence is there
            # (a child died, a capture failed) the structure only names its cause. An assert, and weak
            # evidence of any class, give way to a structure that names a cause (raised in a weight loader)
            if found is not None and (not strong_only or found[0].cls == "garbage" or best is not None):
                sig, line_no = found
                if line_no > self.start_line and (
                    best is None
                    or sig.priority < best[0]
                    or (best[3].weak and (best[3].cls == "crash" or not sig.weak))
                ):
                    best = (sig.priority, line_no, _clean(self._line_of(line_no)), sig)
        if best is not None and best[3].weak and answering is not False and self._request_failed(best):
            return None
        if best is not None and len(self._seen) == 1 and self._fell_back(best[1]):
            return None
        return self._match(best)

    def _fell_back(self, line_no: int) -> bool:
        """Whether one of the two lines after ``line_no`` says the server went on another way ('Error while
        loading customized transformer, falling back to native version' after its OOM, round 14: in-sample
        gpustack/gpustack#4026): the failure was caught, as SGLang's RECOVERED warning says on one line."""
        if not any("back to" in chunk or "BACK TO" in chunk for chunk in self._tail):
            return False  # the usual case, without joining and splitting the kept tail
        after = [self._line_of(line_no + n).lower() for n in (1, 2)]
        return any(said in line for line in after for said in _FELL_BACK)

    def _request_failed(self, best: _Best) -> bool:
        """Whether the run's traceback evidence (all weak, from ``best``'s line on) was one failed request's
        and the server went on answering (:func:`structure.request_failed`)."""
        return bool(self._tail) and best[1] > self.start_line and structure.request_failed(self.structure())

    def _explains(self, strong: _Best) -> bool:
        """Whether the best match overall is weak evidence that names the strong match's cause: a more
        specific class on a line just above it (the failing source line a traceback prints above its
        exception line). Live, the strong line makes the run dead; the weak one then names why, as
        classify-log does."""
        best = self._best
        return (
            best is not None
            and best[3].weak
            and best[3].cls != "crash"
            and best[0] < strong[0]
            and 0 < strong[1] - best[1] <= _SOURCE_LINE_REACH
        )

    def _tail_first(self, tail: str) -> int:
        """The log's line number of the kept tail's first line."""
        return self.lines_seen - tail.count("\n") + (1 if tail.endswith("\n") else 0)

    def _line_of(self, line_no: int) -> str:
        """Line ``line_no`` of the log if it is in the kept tail (else empty)."""
        tail = "".join(self._tail)
        at = line_no - self._tail_first(tail)
        lines = tail.split("\n")
        return lines[at] if 0 <= at < len(lines) else ""

    def previous_run(self) -> Match | None:
        """The root cause of the run before the last start banner (a finished log whose last run logged
        nothing after its banner: a paste with the error above the command). Not kept by to_state."""
        return self._match(self._previous)

    def _match(self, best: _Best | None) -> Match | None:
        if best is None:
            return None
        _prio, line_no, text, sig = best
        others = sorted((v, k) for k, v in self._seen.items() if k != sig.cls)
        arch = self.host_arch if sig.cls in _ARCH_CLASSES else None
        return Match(sig.cls, line_no, text, tuple(k for _, k in others), sig, arch)

    def verdict(self) -> str:
        """The log's class: the root cause (fatal evidence), else ``healthy`` after the ready line, with
        serving evidence or after a clean stop (``STOPPED``: SIGTERM, exit -15), else ``starting``."""
        match = self.result()
        if match is not None:
            return match.cls
        if self.serves or self.stopped:
            return "healthy"
        best = self._best  # evidence result() set aside: one failed request, and the server answered on
        if best is not None and best[3].weak and self._request_failed(best):
            return "healthy"
        ended = self._ended_in_error()  # result() is None here: not read twice
        return ended.cls if ended is not None else "starting"

    def ended_in_error(self) -> Match | None:
        """A finished paste's last word: the failure report its run ends in
        (:func:`structure.ended_in_error`), when nothing else names the run (no match, no serving, no clean
        stop); else None. Only for a log read whole (``classify-log``, :meth:`verdict`): live, a server still
        starting may log an error it goes on from, and the healthcheck never reads this. A run whose HTTP
        server answered requests (an access-log line) is not read so: one failed request is no dead server."""
        return None if self.result() is not None else self._ended_in_error()

    def _ended_in_error(self) -> Match | None:
        """:meth:`ended_in_error` for a run whose :meth:`result` is known to be None."""
        if not self._tail or self.serves or self.stopped:
            return None
        found = self.structure()
        if found.end_error <= self.start_line or found.answered_line > self.start_line:
            return None  # nothing to read, or the HTTP server answered requests: its port was alive
        line = self._line_of(found.end_error)
        sig = structure.ended_in_error(found, line)
        return None if sig is None else self._match((sig.priority, found.end_error, _clean(line), sig))

    def to_state(self) -> dict[str, Any]:
        """A JSON-able snapshot, so a later process can continue the scan."""

        def best(found: _Best | None) -> dict[str, Any] | None:
            if found is None:
                return None
            return {"index": SIGNATURES.index(found[3]), "line": found[1], "text": found[2]}

        return {
            "catalog": CATALOG_ID,
            "lines_seen": self.lines_seen,
            "start": self.start_line,
            "ready": self.ready_line,
            "best": best(self._best),
            "strong": best(self._strong),
            "seen": {k: list(v) for k, v in self._seen.items()},
            "seen_strong": {k: list(v) for k, v in self._seen_strong.items()},
            "serving": self.serving,
            "stopped": self.stopped,
            "host_arch": self.host_arch,
        }

    @classmethod
    def from_state(cls, state: Any) -> Scanner:
        """Rebuild a scanner from :meth:`to_state`; anything malformed gives a fresh scanner."""

        def best(found: Any) -> _Best | None:
            if found is None:
                return None
            sig = SIGNATURES[int(found["index"])]
            return (sig.priority, int(found["line"]), str(found["text"]), sig)

        scanner = cls()
        if not state_is_current(state):
            return scanner
        try:
            scanner.lines_seen = int(state["lines_seen"])
            scanner.start_line = int(state.get("start", 0))
            scanner.ready_line = int(state.get("ready", 0))
            scanner.serving = int(state.get("serving", 0))
            scanner.stopped = int(state.get("stopped", 0))
            arch = state.get("host_arch")
            scanner.host_arch = str(arch) if arch else None
            scanner._best = best(state["best"])
            scanner._strong = best(state.get("strong"))
            scanner._seen = {
                str(k): (int(v[0]), int(v[1])) for k, v in dict(state["seen"]).items() if k in CLASS_PRIORITY
            }
            scanner._seen_strong = {
                str(k): (int(v[0]), int(v[1]))
                for k, v in dict(state.get("seen_strong", {})).items()
                if k in CLASS_PRIORITY
            }
        except (KeyError, IndexError, TypeError, ValueError, AttributeError):
            return cls()
        return scanner


def state_is_current(state: Any) -> bool:
    """Whether a saved scan (:meth:`Scanner.to_state`) was made by this catalog: its signature indexes mean
    nothing to another one (an image upgraded under a kept state file); the caller then scans from the
    start."""
    return isinstance(state, dict) and state.get("catalog") == CATALOG_ID


def classify_lines(lines: Iterable[str]) -> Match | None:
    """Classify log lines (with or without their newlines); line numbers are 1-based."""
    scanner = Scanner()
    for line in lines:
        scanner.feed(line.rstrip("\r\n").replace("\n", " ") + "\n")
    return scanner.result()


def classify_text(text: str) -> Match | None:
    """Classify a whole log given as one string."""
    return scan_text(text).result()


def scan_text(text: str) -> Scanner:
    """A scanner that has read ``text`` (for ``verdict()`` and ``ready`` besides ``result()``)."""
    scanner = Scanner()
    scanner.feed(text)
    return scanner


def classify_file(path: str, chunk_bytes: int = 1 << 20) -> Match | None:
    """Classify a log file by streaming it in chunks cut at line ends; raises OSError if unreadable."""
    return scan_file(path, chunk_bytes).result()


def scan_file(path: str, chunk_bytes: int = 1 << 20) -> Scanner:
    """A scanner that has streamed the file (UTF-8 with replacement); raises OSError if unreadable."""
    scanner = Scanner()
    tail = b""
    skipping = False  # inside a line longer than MAX_LINE_BYTES: its rest is dropped up to the next newline
    with open(path, "rb") as fh:
        while True:
            chunk = fh.read(chunk_bytes)
            if not chunk:
                break
            if skipping:
                newline = chunk.find(b"\n")
                if newline < 0:
                    continue
                chunk, skipping = chunk[newline + 1 :], False
            data = tail + chunk
            cut = data.rfind(b"\n") + 1
            tail = data[cut:]
            if cut:
                scanner.feed(data[:cut].decode("utf-8", errors="replace"))
            if len(tail) > MAX_LINE_BYTES:  # one line without end: scan its head once, never copy it again
                scanner.feed(tail[:MAX_LINE_BYTES].decode("utf-8", errors="replace") + "\n")
                tail, skipping = b"", True
    if tail:
        scanner.feed(tail.decode("utf-8", errors="replace"))
    return scanner
