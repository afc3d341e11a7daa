"""The catalog assembled and its keys prefilter: which lines the scanner reads, and which signatures a line
leads to.

``SIGNATURES`` joins the family tables in their fixed order (a saved scan numbers the entries);
``START_TEXTS`` and ``READY_TEXT`` are the lines that open a run and mark it ready. Every signature lists
literal keys; the scanner (``__init__.py``) finds the lines that hold one through the folded scan words built
here, then matches only the signatures of the keys a line holds. Stdlib only.
"""

from __future__ import annotations

import hashlib

from healthchecks import verdict
from healthchecks.signatures import evidence, gpu, runtime, shapes
from healthchecks.signatures.entry import Signature

#: SGLang's line once its own warmup request passed (srt/entrypoints/http_server.py, 0.2 .. 0.5.23)
READY_TEXT = "The server is fired up and ready to roll"
#: the lines that open a new server run in one log: SGLang's ServerArgs dump (a repr up to 0.5.1x, a dict in
#: 0.5.23: ``server_args={'model_path': …``, seen in real 0.5.23 logs), this project's serve wrapper
START_TEXTS: tuple[str, ...] = (
    "server_args=ServerArgs(",
    "server_args={",
    verdict.marker(verdict.STARTING) + " ",
)


#: the catalog, root causes first (see the package docstring); the order is part of it: a saved scan
#: numbers the entries, and names the catalog it numbered (CATALOG_ID)
SIGNATURES: tuple[Signature, ...] = (
    *gpu.SIGNATURES,
    *runtime.SIGNATURES,
    *shapes.SIGNATURES,
    *evidence.SIGNATURES,
)
#: the catalog's identity (its entries in order): a saved scan made by another catalog is not continued
CATALOG_ID = hashlib.sha256(
    "\n".join(
        f"{s.cls}\t{s.priority}\t{s.weak}\t{s.pattern.pattern}\t{s.unless}" for s in SIGNATURES
    ).encode()
).hexdigest()[:16]
#: every literal key, each once: the start texts, the ready line, the signatures' keys, the host-arch keys
KEYS: tuple[str, ...] = tuple(
    dict.fromkeys(
        (
            *START_TEXTS,
            READY_TEXT,
            *(key for sig in SIGNATURES for key in sig.keys),
            *shapes.HOST_ARCH_KEYS,
        )
    )
)
#: lower-case scan words: the text is scanned once per word (not once per key), a line holding one is
#: checked for the exact keys that contain it. Chosen to cover many keys, to be long (a longer needle scans
#: faster) and rare in healthy logs; a key that contains none of them is scanned for itself.
SCAN_WORDS: tuple[str, ...] = (
    "error", "support", "ustom", "requires", "watchdog", "exit", "assert", "fail", verdict.MARKER[:-1],
    "recognize", "illegal", "sigquit", "signal", "kernel", "ptx", "tensor",
    "not compatible with the current pytorch", "resource", "apability", "invalid",
    "should have a `model_type` key", "unable to determine the device",
    "dynamic shared memory size", "out of range float values", "is not defined for option", "repo",
    "server_args=serverargs(", "server_args={", "terminate called after", "trtllm fmhav2 prefill",
    "init state: traceback",
    "ninja: build stopped", "_kv_cache_store_fp8", "fallen off the bus", "segmentation fault", "nccl",
    "misaligned address", "size mismatch for", "tllmgenfmharunner", "not enough memory", "undefined symbol",
    "hit an exception", "unknown recipe", "gloo/transport", "exception in ", "nan detected", "contains nan",
    "no compiled ", "gpu is lost", "core dumped", "peer access", "config.json", "aborted", "killed",
    "the server is fired up and ready to roll", "traceback (most recent call last)", "out of memory", "xid",
    "exception", 'file "', "timed out", "warmup", "corrupt", "crash", "died", "mpirun ",
)  # fmt: skip
KEYS_LOW: tuple[str, ...] = tuple(key.lower() for key in KEYS)
_SCAN: tuple[str, ...] = (
    *SCAN_WORDS,
    *(low for low in KEYS_LOW if not any(word in low for word in SCAN_WORDS)),
)
SCAN_BYTES: tuple[bytes, ...] = tuple(word.encode() for word in _SCAN)
START_KEYS = frozenset(range(len(START_TEXTS)))
READY_KEY = len(START_TEXTS)
HOST_KEYS = frozenset(KEYS.index(key) for key in shapes.HOST_ARCH_KEYS)
#: key index -> indexes of the signatures that list it
_KEY_INDEX: dict[str, int] = {key: i for i, key in enumerate(KEYS)}
_SIGS_OF: list[set[int]] = [set() for _ in KEYS]
for _i, _sig_entry in enumerate(SIGNATURES):
    for _key in _sig_entry.keys:
        _SIGS_OF[_KEY_INDEX[_key]].add(_i)
KEY_SIGS: tuple[frozenset[int], ...] = tuple(frozenset(found) for found in _SIGS_OF)

#: The scan reads the log folded: lower-cased, with every byte dropped but letters, newlines and four rare
#: marks (white space, digits and punctuation are a third to two thirds of a log), each distinct folded line
#: once (without digits and time stamps a log repeats its lines: SGLang's batch lines fold to a handful).
#: A scan word is folded alike, so a line that holds a key holds its word's folded form: the scan finds every
#: candidate line (and a few more), and the exact keys are then checked on the line itself.
FOLD = bytes(range(256)).lower()
FOLD_DROP = bytes(
    sorted(set(range(256)) - set(b'\n"`({abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ'))
)
_FOLDED_WORDS = [word.translate(None, FOLD_DROP) for word in SCAN_BYTES]  # scan words are lower-case


def _holders(words: list[bytes]) -> set[bytes]:
    """The words that hold another of ``words`` (the other's pass finds their lines)."""
    lines = b"\n" + b"\n".join(words) + b"\n"
    found = set()
    for word in set(words):
        at = lines.find(word)
        while at >= 0:
            holder = lines[lines.rfind(b"\n", 0, at) + 1 : lines.find(b"\n", at)]
            if holder != word:
                found.add(holder)
            at = lines.find(word, at + 1)
    return found


_HOLDERS = _holders(_FOLDED_WORDS)
#: the folded scan words, each once, without one that holds another
SCAN_FOLDED: tuple[bytes, ...] = tuple(word for word in dict.fromkeys(_FOLDED_WORDS) if word not in _HOLDERS)
#: every key lower-cased, and folded, one a line (_FOLDED_KEY_AT: the offset of a line -> its key's index)
_KEYS_LOW_BYTES = [key.lower().encode() for key in KEYS]
_FOLDED_KEY_LIST = [low.translate(None, FOLD_DROP) for low in _KEYS_LOW_BYTES]
_FOLDED_KEYS_ALL = b"\n".join(_FOLDED_KEY_LIST)
_FOLDED_KEY_AT: dict[int, int] = {}
_at = 0
for _i, _folded_key in enumerate(_FOLDED_KEY_LIST):
    _FOLDED_KEY_AT[_at] = _i
    _at += len(_folded_key) + 1


def _key_groups(word: bytes) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """The keys whose folded form holds a folded scan word, grouped by their spelling of it (``Error``,
    ``error``, ``ERROR``; dropped characters included): a line can hold a key only if it holds that text."""
    groups: dict[str, list[int]] = {}
    plain = _SCAN[_FOLDED_WORDS.index(word)]  # a scan word that folds to ``word``
    at = _FOLDED_KEYS_ALL.find(word)
    while at >= 0:
        line_at = _FOLDED_KEYS_ALL.rfind(b"\n", 0, at) + 1
        k = _FOLDED_KEY_AT[line_at]
        low = KEYS_LOW[k]
        if plain in low:  # the usual case: the key holds the scan word itself
            spelt = KEYS[k][low.index(plain) :][: len(plain)]
        else:  # only its folded form: map the folded offsets back to the key's
            kept = [i for i, char in enumerate(_KEYS_LOW_BYTES[k]) if char not in FOLD_DROP]
            start = at - line_at
            spelt = KEYS[k][kept[start] : kept[start + len(word) - 1] + 1]
        groups.setdefault(spelt, []).append(k)
        at = _FOLDED_KEYS_ALL.find(b"\n", at)
        at = -1 if at < 0 else _FOLDED_KEYS_ALL.find(word, at)
    return tuple((spelt, tuple(keys)) for spelt, keys in groups.items())


#: folded scan word index -> its keys (indexes in KEYS) by their spelling of the word
FOLDED_KEYS: tuple[tuple[tuple[str, tuple[int, ...]], ...], ...] = tuple(
    _key_groups(word) for word in SCAN_FOLDED
)
#: the same, each key with its text: folded scan word index -> ((spelling, ((key index, key), ..)), ..), what
#: the scanner checks on a candidate line
FOLDED_CHECKS: tuple[tuple[tuple[str, tuple[tuple[int, str], ...]], ...], ...] = tuple(
    tuple((spelt, tuple((k, KEYS[k]) for k in group)) for spelt, group in groups) for groups in FOLDED_KEYS
)
#: scan word index -> indexes (in KEYS) of the keys that contain it; built when first needed (text with lone
#: surrogates: a key then counts where the raw line holds one of its scan words, as it always did)
_WORD_KEYS: list[tuple[int, ...]] = []


def word_keys() -> list[tuple[int, ...]]:
    """_WORD_KEYS, built on first use."""
    if not _WORD_KEYS:
        _WORD_KEYS.extend(tuple(i for i, low in enumerate(KEYS_LOW) if word in low) for word in _SCAN)
    return _WORD_KEYS


#: folded scan word index -> the signatures (indexes) its keys lead to, when they are few and none of its keys
#: is a start, ready or host-arch key (else None): a line holding only such words is skipped, unread, once
#: none of those signatures could change the verdict
FOLDED_SIGS: tuple[tuple[int, ...] | None, ...] = tuple(
    None
    if len(sigs) > 8 or any(k in START_KEYS or k in HOST_KEYS or k == READY_KEY for _, g in groups for k in g)
    else tuple(sorted(sigs))
    for groups in FOLDED_KEYS
    for sigs in [set().union(*(KEY_SIGS[k] for _, g in groups for k in g))]
)
_CANDIDATES: dict[tuple[int, ...], tuple[int, ...]] = {}


def candidates(keys: list[int]) -> tuple[int, ...]:
    """The indexes (in SIGNATURES, in order) of the signatures that list one of ``keys``."""
    held = tuple(keys)
    found = _CANDIDATES.get(held)
    if found is None:
        if len(_CANDIDATES) >= 4096:  # a bound for a long-lived process fed odd logs
            _CANDIDATES.clear()
        found = _CANDIDATES[held] = tuple(sorted(frozenset().union(*(KEY_SIGS[k] for k in keys))))
    return found


#: the folded (letters-only, lower-case) spellings one of which every STOPPED line holds: a chunk whose folded
#: text holds none cannot stop, and its raw text is not searched
STOP_FOLDED: tuple[bytes, ...] = (
    b"sigterm",
    b"gracefully",
    b"finishedserverprocess",
    b"exitcode",
    b"withcode",
    b"exitingnormally",
    b"terminatedwith",
    b"codekilledstatusterm",
)
