"""The phase of an SGLang start, told from the server's own log lines; stdlib only (runs in the image too).

A start on a real host is 10 to 30 minutes of ``starting``. SGLang says what it does meanwhile, in these words
(read in the sglang 0.5.9 and 0.5.23 wheels and FlashInfer 0.7.2's; the CPU server's real logs of both
versions are in ``tests/healthchecks/startup_corpus``):

* ``launch``: from the first line (the serve wrapper's ``bwstack-serve: starting …``) to the weights: imports,
  the tokenizer, ``Init torch distributed``;
* ``weights``: ``Load weight begin. avail mem=… GB`` (``model_runner.py``), the tqdm bar ``Loading safetensors
  checkpoint shards:  50% Completed | 1/2 […]`` (or ``Multi-thread loading shards``, ``model_loader/
  weight_utils.py``), ``Load weight end. elapsed=… mem usage=X GB.``;
* ``kv_cache``: after the weights, the memory profile and ``KV Cache is allocated. [dtype: …, ]#tokens: N,
  K size: a GB, V size: b GB`` (0.5.9 ``mem_cache/memory_pool.py``; 0.5.23 adds the dtype and a label such as
  ``SWA KV Cache``), up to ``Memory pool end``;
* ``cuda_graph``: ``Capture cuda graph begin`` (0.5.9 ``model_runner.py``), ``Capture target decode CUDA graph
  begin`` / ``Capture target prefill CUDA graph begin`` (0.5.23 ``cuda_graph_setup.py``), ``Capture piecewise
  CUDA graph begin``, the batch sizes ``Capture cuda graph bs [1, 2, 4, …]`` (0.5.9 ``cuda_graph_runner.py``)
  and the tqdm bar ``Capturing batches (bs=72 avail_mem=16.60 GB):  64%|…| 23/36 […]`` (both versions), or the
  piecewise ``Compiling num tokens (num_tokens=…)`` bar;
* ``jit``: a kernel compile the log names: FlashInfer 0.7.2's ``flashinfer.jit: Building JIT module NAME; this
  can take several minutes on first use.`` (``jit/core.py``; older FlashInfer: ``Loading JIT ops: NAME``),
  DeepGEMM's ``Entering DeepGEMM JIT Pre-Compile session``, ``Try DeepGEMM JIT Compiling for <KIND> N=…,
  K=…`` and its ``DeepGEMM warmup`` bar (SGLang ``deep_gemm_wrapper/compile_utils.py``), torch.compile's
  ``Compiling a graph for dynamic shape takes … s``. A compile interrupts another phase; that phase resumes
  with its next line. Triton and CuTe DSL compile without a line: :func:`compiling` finds their compilers;
* ``first_decode``: the HTTP server is up (``Uvicorn running on …``) and SGLang's own warmup request runs;
* ``ready``: ``The server is fired up and ready to roll!`` (``entrypoints/http_server.py``); the clock stops.

:class:`PhaseReader` takes lines one at a time with the time each was written: the caller's clock (``at``:
Docker's ``--timestamps``, or when the sweep's log stream delivered it), else the line's own stamp (Docker's
RFC 3339 prefix, SGLang's ``[2026-12-02 16:19:32 TP0]`` or ``[16:19:32 TP0]``); a line without one (tqdm)
has the time of the last line that had one. It gives the phase, a detail (shards n/N and GB, KV tokens and GB,
batch sizes done/total, the module being compiled) and the seconds spent in each phase so far. A later start
in the same log (``docker logs`` of a restarted container) starts the count again.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from healthchecks import verdict

PHASES = ("launch", "weights", "kv_cache", "cuda_graph", "jit", "first_decode")
READY = "ready"
#: how the live line names each phase
WORDS = {
    "launch": "launching",
    "weights": "loading weights",
    "kv_cache": "allocating the KV cache",
    "cuda_graph": "capturing CUDA graphs",
    "jit": "JIT-compiling",
    "first_decode": "first decode (SGLang's warmup request)",
    READY: "ready",
}
#: compiler processes of a JIT compile (``/proc/PID/comm``): nvcc and what it runs, ninja, the host compiler
COMPILERS = frozenset(
    {"nvcc", "cicc", "ptxas", "nvlink", "fatbinary", "cudafe++", "nvdisasm", "ninja", "cc1plus", "cc1", "gcc",
     "g++", "c++", "cc", "collect2", "ld"}
)  # fmt: skip
#: a Python process compiling kernels: ``python -m <module>`` with one of these words in the module
PYTHON_COMPILE = re.compile(r"(?:flashinfer|deep_gemm|triton|jit|compile)", re.IGNORECASE)

_COMPOSE = re.compile(r"^[\w.-]+\s+\|\s?")
_DOCKER_STAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:?\d\d)?\s")
_SGLANG_STAMP = re.compile(r"^\[(?:(\d{4}-\d\d-\d\d)[ T])?(\d\d):(\d\d):(\d\d)(?:[.,]\d+)?[^\]]*\]\s*")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")

#: a tqdm bar's ``NN%`` then ``| n/N`` (``Completed | 1/2`` or ``|████▉   | 23/36``; bar glyphs hold no ``/``)
_BAR = r"\s*(\d+)%[^/]*?\|\s*(\d+)/(\d+)"
_SHARDS = re.compile(rf"(?:checkpoint shards|loading shards):{_BAR}")
_WEIGHT_END = re.compile(r"Load weight end\.(?:.*?mem usage=(-?[\d.]+) GB)?")
_KV = re.compile(
    r"KV Cache is allocated\.(?: dtype: [\w.]+,)? #tokens: (\d+), "
    r"(?:K size: ([\d.]+) GB, V size: ([\d.]+) GB|KV size: ([\d.]+) GB)"
)
_CAPTURE_BEGIN = re.compile(r"\bCapture\b[\w ]*? graph begin\b", re.IGNORECASE)
_CAPTURE_BS = re.compile(r"Capture (?:cuda|cpu) graph bs \[([\d, ]*)\]")
_CAPTURING = re.compile(rf"Capturing batches \(bs=(\d+)[^)]*\):{_BAR}")
_PIECEWISE = re.compile(rf"Compiling num tokens \(num_tokens=(\d+)\):{_BAR}")
_FLASHINFER_JIT = re.compile(r"flashinfer\.jit: (?:Building JIT module|Loading JIT ops:) ([\w.-]+)")
_FLASHINFER_DONE = "flashinfer.jit: Finished loading JIT ops"
_DEEPGEMM = re.compile(r"Try DeepGEMM JIT Compiling for <(\w+)> N=(\d+), K=(\d+)")
_DEEPGEMM_WARMUP = re.compile(rf"DeepGEMM warmup:{_BAR}")
_UP = ("Uvicorn running on", "Application startup complete")
_READY = "The server is fired up and ready to roll!"
_START = f"{verdict.MARKER} starting "


@dataclass
class Progress:
    """Where a start is: its phase (None before the first line), a detail, seconds per phase so far."""

    phase: str | None
    detail: str
    seconds: dict[str, float] = field(default_factory=dict)
    starts: int = 0

    @property
    def total(self) -> float:
        return sum(self.seconds.values())

    def record(self) -> dict[str, Any]:
        """The shape results.json keeps under a row's ``start``."""
        return {
            "phase": self.phase,
            "detail": self.detail,
            "seconds": {name: round(value, 1) for name, value in self.seconds.items()},
            "total_s": round(self.total, 1),
            "starts": self.starts,
        }

    def line(self) -> str:
        """The live one-liner: ``loading weights: shard 12/47 for 140 s (launch 35 s)``."""
        if self.phase is None:
            return "no server log yet"
        if self.phase == READY:
            return f"ready after {self.total:.0f} s ({words(self.seconds)})"
        now = self.seconds.get(self.phase, 0.0)
        head = f"{WORDS[self.phase]}: {self.detail}" if self.detail else WORDS[self.phase]
        before = {k: v for k, v in self.seconds.items() if k != self.phase}
        return f"{head} for {now:.0f} s" + (f" ({words(before)})" if before else "")


def words(seconds: dict[str, Any]) -> str:
    """``launch 35 s, weights 612 s, cuda_graph 70 s``: seconds per phase in start order."""
    known = [name for name in PHASES if isinstance(seconds.get(name), int | float)]
    return ", ".join(f"{name} {float(seconds[name]):.0f} s" for name in known)


def record_words(found: Any) -> str:
    """A results.json ``start`` record in words (empty when there is none)."""
    if not isinstance(found, dict) or not isinstance(found.get("seconds"), dict):
        return ""
    spent = words(found["seconds"])
    if found.get("phase") == READY:
        return f"{spent}; ready after {float(found.get('total_s') or 0):.0f} s"
    detail = f" ({found['detail']})" if found.get("detail") else ""
    return f"{spent}; stopped in {found.get('phase')}{detail}"


def _epoch(date: str, hour: str, minute: str, second: str) -> float:
    stamp = datetime.strptime(f"{date} {hour}:{minute}:{second}", "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC)
    return stamp.timestamp()


class PhaseReader:
    """Feed it a server log line by line (with the time each was written); :meth:`progress` says where the
    start is."""

    def __init__(self) -> None:
        self._reset()
        self.starts = 0
        self.last: float | None = None  # the time of the newest line
        self._date = "1970-01-01"  # for SGLang's date-less stamps

    def _reset(self) -> None:
        self.phase: str | None = None
        self.detail = ""
        self.since: float | None = None
        self.seconds: dict[str, float] = {}
        self._resume: tuple[str, str] | None = None  # the phase a compile interrupted
        self._graph_total: int | None = None
        self._weights_gb: float | None = None

    # -- input --

    def feed(self, raw: str, at: float | None = None) -> None:
        """Take one line (tqdm's ``\\r`` updates in it are read one by one); ``at``: when it was written."""
        text = _ANSI.sub("", raw).rstrip("\r\n")
        text = _COMPOSE.sub("", text, count=1)
        stamp = _DOCKER_STAMP.match(text)
        if stamp is not None:
            text = text[stamp.end() :]
            if at is None:
                at = self._docker_time(stamp)
        for piece in text.split("\r"):
            own = _SGLANG_STAMP.match(piece)
            body = piece[own.end() :] if own is not None else piece
            if own is not None and at is None:
                if own.group(1):
                    self._date = own.group(1)
                at = _epoch(self._date, own.group(2), own.group(3), own.group(4))
                if self.last is not None and at < self.last - 12 * 3600:  # a date-less stamp after midnight
                    at += 24 * 3600
            if at is not None:
                self.last = at if self.last is None else max(self.last, at)
                if self.phase is not None and self.since is None:
                    self.since = at  # the first stamp of a start whose first lines had none
            if body.strip():
                self._line(body)

    def feed_all(self, lines: Iterable[str]) -> Progress:
        for line in lines:
            self.feed(line)
        return self.progress()

    @staticmethod
    def _docker_time(stamp: re.Match[str]) -> float | None:
        zone = stamp.group(3) or "Z"
        fraction = (stamp.group(2) or ".0")[:7]
        zone = "+00:00" if zone == "Z" else zone
        try:
            return datetime.fromisoformat(f"{stamp.group(1)}{fraction}{zone}").timestamp()
        except ValueError:
            return None

    def _enter(self, phase: str, detail: str = "") -> None:
        if phase != self.phase:
            self._account()
            self.phase = phase
            if phase != READY:
                self.seconds.setdefault(phase, 0.0)
        self.detail = detail

    def _account(self) -> None:
        """Charge the time since the last change to the phase that held it."""
        if self.last is None:
            return
        if self.phase is not None and self.phase != READY and self.since is not None:
            self.seconds[self.phase] = self.seconds.get(self.phase, 0.0) + max(0.0, self.last - self.since)
        self.since = self.last

    def _line(self, text: str) -> None:
        if text.startswith(_START) or (
            "server_args=" in text and self.phase not in (None, "launch")
        ):  # another start in the same log (docker logs keeps every start)
            self._reset()
        if self.phase is None:
            self.starts += 1
            self.since = self.last
            self._enter("launch")
        if self.phase != READY and not self._jit(text):
            self._marker(text)

    def _marker(self, text: str) -> bool:
        """A line of a phase other than jit: True when it was one."""
        if "Load weight begin" in text:
            self._enter("weights", "")
        elif (found := _SHARDS.search(text)) is not None:
            self._enter("weights", f"shard {found.group(2)}/{found.group(3)}")
        elif (found := _WEIGHT_END.search(text)) is not None:
            self._weights_gb = float(found.group(1)) if found.group(1) else self._weights_gb
            took = f"weights took {self._weights_gb:.2f} GB" if self._weights_gb is not None else ""
            self._enter("kv_cache", took)
        elif (found := _KV.search(text)) is not None:
            size = float(found.group(4)) if found.group(4) else float(found.group(2)) + float(found.group(3))
            self._enter("kv_cache", f"{found.group(1)} tokens, {size:.2f} GB")
        elif _CAPTURE_BEGIN.search(text) is not None:
            self._enter("cuda_graph", "")
        elif (found := _CAPTURE_BS.search(text)) is not None:
            self._graph_total = len([n for n in found.group(1).split(",") if n.strip()])
            self._enter("cuda_graph", f"0/{self._graph_total} batch sizes")
        elif (found := _CAPTURING.search(text)) is not None:
            self._enter("cuda_graph", f"{found.group(3)}/{found.group(4)} batch sizes (bs={found.group(1)})")
        elif (found := _PIECEWISE.search(text)) is not None:
            self._enter("cuda_graph", f"piecewise: {found.group(3)}/{found.group(4)} token sizes")
        elif any(word in text for word in _UP):
            if self.phase != "first_decode":
                self._enter("first_decode", "")
        elif _READY in text:
            self._enter(READY, "")
        else:
            return False
        self._resume = None
        return True

    def _jit(self, text: str) -> bool:
        """A kernel compile the log names: True when the line was one."""
        if (found := _FLASHINFER_JIT.search(text)) is not None:
            detail = f"FlashInfer {found.group(1)}"
        elif (found := _DEEPGEMM.search(text)) is not None:
            detail = f"DeepGEMM {found.group(1)} N={found.group(2)} K={found.group(3)}"
        elif (found := _DEEPGEMM_WARMUP.search(text)) is not None:
            detail = f"DeepGEMM warmup {found.group(2)}/{found.group(3)}"
        elif "Entering DeepGEMM JIT Pre-Compile session" in text:
            detail = "DeepGEMM pre-compile"
        elif "Compiling a graph for dynamic shape" in text:
            detail = "torch.compile"
        elif _FLASHINFER_DONE in text and self.phase == "jit" and self._resume is not None:
            self._enter(*self._resume)  # the compile is done: back to what it interrupted
            self._resume = None
            return True
        else:
            return False
        if self.phase != "jit" and self.phase is not None:
            self._resume = (self.phase, self.detail)
        self._enter("jit", detail)
        return True

    # -- output --

    def progress(self, now: float | None = None) -> Progress:
        """The phase, its detail and the seconds per phase; the current phase counts up to ``now`` (same clock
        as the times fed), else up to the newest line."""
        seconds = dict(self.seconds)
        until = self.last if now is None else now
        if self.phase not in (None, READY) and self.since is not None and until is not None:
            seconds[str(self.phase)] = seconds.get(str(self.phase), 0.0) + max(0.0, until - self.since)
        ordered = {name: seconds[name] for name in PHASES if name in seconds}
        return Progress(self.phase, self.detail, ordered, self.starts)


def read_text(text: str) -> Progress:
    """The progress of a whole log already in memory (its own timestamps)."""
    return PhaseReader().feed_all(text.splitlines())


# --- a compile that keeps the log quiet ---------------------------------------------------------------------


@dataclass(frozen=True)
class _Process:
    comm: str
    ppid: int
    argv: tuple[str, ...]
    zombie: bool


def _processes(proc: str) -> dict[int, _Process]:
    """Every process /proc shows (pid -> name, parent, argv); those that vanish meanwhile are left out."""
    try:
        pids = [int(name) for name in os.listdir(proc) if name.isdigit()]
    except OSError:
        return {}
    found = {}
    for pid in pids:
        try:
            with open(os.path.join(proc, str(pid), "stat"), encoding="utf-8", errors="replace") as fh:
                stat = fh.read()
            with open(os.path.join(proc, str(pid), "cmdline"), "rb") as fh:
                argv = tuple(part.decode("utf-8", "replace") for part in fh.read().split(b"\0") if part)
        except OSError:
            continue  # gone meanwhile, or not ours to read
        name, _, rest = stat.rpartition(")")
        fields = rest.split()
        if len(fields) < 2 or not fields[1].isdigit():
            continue
        found[pid] = _Process(name.partition("(")[2], int(fields[1]), argv, fields[0] == "Z")
    return found


def _under_sglang(pid: int, table: dict[int, _Process]) -> bool:
    """Whether an ancestor of ``pid`` is the SGLang server (its argv or process title names sglang)."""
    seen = set()
    while pid in table and pid not in seen:
        seen.add(pid)
        pid = table[pid].ppid
        if pid in table and any("sglang" in part for part in table[pid].argv):
            return True
    return False


def compiling(proc: str = "/proc") -> list[str]:
    """The JIT compiler processes the SGLang server runs (``nvcc pid 812``, ``python -m flashinfer.jit pid
    90``): nvcc and what it runs, ninja, the host compiler, a Python module compiling kernels, each with the
    server (a process whose argv or title names sglang: ``python3 -m sglang.launch_server``,
    ``sglang::scheduler``) among its ancestors: a compile elsewhere in a shared PID namespace does not
    count, nor does a zombie. Empty when /proc cannot be read."""
    table = _processes(proc)
    found = []
    for pid in sorted(table):
        entry = table[pid]
        if entry.zombie or not _under_sglang(pid, table):
            continue
        if entry.comm in COMPILERS:
            found.append(f"{entry.comm} pid {pid}")
        elif entry.comm.startswith("python") and "-m" in entry.argv[:-1]:
            module = entry.argv[entry.argv.index("-m") + 1]
            if PYTHON_COMPILE.search(module) and not module.startswith("sglang."):
                found.append(f"python -m {module} pid {pid}")
    return found
