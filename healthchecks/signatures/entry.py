"""One entry of the failure catalog: the :class:`Signature` record, its builder, and the launcher prefixes.

Stdlib only; part of the one failure catalog (:mod:`healthchecks.signatures`). The signature tables
(:mod:`healthchecks.signatures.gpu`, :mod:`healthchecks.signatures.runtime`) are written with :func:`sig`,
which takes the rank from the class (:data:`~healthchecks.signatures.classes.CLASS_PRIORITY`) and refuses an
unknown class; anchored patterns start with :data:`LINE_START` to skip what launchers put before a log line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from healthchecks.signatures.classes import CLASS_PRIORITY


@dataclass(frozen=True)
class Signature:
    """One regex -> class entry with its public source and a typical fix."""

    cls: str
    regex: str
    keys: tuple[str, ...]  # literal texts, one of which every matching line contains (fast prefilter)
    priority: int
    source: str
    fix: str
    weak: bool = False  # generic traceback evidence: a verdict only once the server stopped answering
    generic: bool = False  # counts only on lines no specific signature explains (weak implies generic)
    #: a regex for the lines that are no match although the pattern finds them (a warning, a fallback the
    #: server takes instead); read only on a line the pattern found (a lookahead over the whole line before
    #: the pattern would cost every candidate line a scan of its own)
    unless: str = ""

    @property
    def pattern(self) -> re.Pattern[str]:
        """The compiled regex, compiled on first use (a light probe with no new log lines compiles none)."""
        found = _COMPILED.get(self.regex)
        if found is None:
            found = _COMPILED[self.regex] = re.compile(self.regex)
        return found

    def matches(self, line: str) -> bool:
        """Whether ``line`` is this signature's: the pattern finds it and ``unless`` does not."""
        if self.pattern.search(line) is None:
            return False
        if not self.unless:
            return True
        unless = _COMPILED.get(self.unless)
        if unless is None:
            unless = _COMPILED[self.unless] = re.compile(self.unless)
        return unless.search(line) is None


_COMPILED: dict[str, re.Pattern[str]] = {}


def sig(
    cls: str,
    regex: str,
    keys: tuple[str, ...],
    source: str,
    fix: str = "",
    *,
    priority: int | None = None,
    weak: bool = False,
    generic: bool = False,
    unless: str = "",
) -> Signature:
    """A :class:`Signature` of ``cls``, ranked as its class unless ``priority`` is given."""
    if cls not in CLASS_PRIORITY:
        raise ValueError(f"unknown failure class {cls!r}")
    prio = CLASS_PRIORITY[cls] if priority is None else priority
    return Signature(
        cls=cls,
        regex=regex,
        keys=keys,
        priority=prio,
        source=source,
        fix=fix,
        weak=weak,
        generic=generic or weak,
        unless=unless,
    )


#: what launchers put before a log line: ANSI colour, Ray's ``(SGLangWorker pid=..)``, ``[/bin/sh@<0,0>]:``,
#: mpirun's ``[1,0]<stderr>:``, the CRI ``<time> stdout F``, SGLang's ``[<time> DP1 PP1 TP3]``, compose's
#: ``service-1  |``, srun's ``0:``, bare rank tags (``TP3``, ``PP1 TP1``); anchored patterns skip them
_PREFIX = (
    r"(?:\x1b\[[0-9;]*[A-Za-z]"
    r"|\([\w.-]+ pid=\d+[^)\n]*\)"
    r"|\[[^\]\n]*@<[\d,]+>\]:"
    r"|\[\d+,\d+\]<std(?:out|err)>:"
    r"|\d{4}-\d\d-\d\dT[\d:.]+(?:Z|[+-]\d\d:?\d\d)?\s+(?:stdout|stderr)\s+[FP]"
    r"|\[\d{4}-\d\d-\d\d[^\]\n]*\]"
    r"|[\w.-]+\s+\|"
    r"|\d+:"
    r"|[A-Z]{2,}[A-Z_]*\d+"
    r")"
)
LINE_START = rf"(?:^|\r)\s*(?:{_PREFIX}\s*)*"
#: the fix of a full device memory (any vendor's words)
DEVICE_FULL = (
    "the device's memory is full: lower --mem-fraction-static or the batch, shard wider, or use a "
    "smaller model"
)
#: the fix of a readiness wait that ran out (a launcher's, a router's, a trainer's)
NEVER_ANSWERED = (
    "the server never answered its health checks: read the server's own log for why (still loading, crashed, "
    "or stuck), and raise the launcher's wait only for a slow start"
)
#: the fix of an arch gate
PICK_ARCH = "pick a backend or kernel built for this GPU's arch (bwstack explain lists them per arch)"
#: a line that only warns or names the fallback the server takes instead (an ``unless`` of the gates)
WARNING = r"(?i:warn|fall(?:s|ing)?[ -]?back|instead)"
#: an allocator's failure it retries (fzyzcjy/torch_memory_saver csrc/core.cpp: 'cuMemCreate
#: CUDA_ERROR_OUT_OF_MEMORY (may not be an issue e.g. torch allocator will free cache and retry)')
RETRIED = r"may not be an issue"
#: a model's architecture as transformers and SGLang's registry name it (``LlamaForCausalLM``,
#: ``ChatGLMForConditionalGeneration``, ``ChatGLMModel``): an "unsupported architecture" naming one is the
#: checkpoint's (model_load), not the GPU's (unsupported_arch)
MODEL_CLASS = r"[A-Z]\w*(?:For[A-Z]\w*|Model\b)"
