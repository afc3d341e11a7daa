"""Requested vs effective backends, read from an SGLang server log alone; stdlib only (runs in the image too).

SGLang prints its resolved configuration once at startup and logs why it changed what it changed:

* ``server_args=ServerArgs(model_path='…', attention_backend='triton', …)`` (0.5.9 … 0.5.1x, the dataclass
  repr) or ``server_args={'model_path': '…', …}`` (0.5.23, ``resolved_dict()``), possibly wrapped over many
  lines by a terminal or an issue paste; values are the resolved ones (sglang ``srt/entrypoints/engine.py``).
* the resolution warnings: ``Set NSA backends for fp8_e4m3 KV Cache: prefill=…, decode=….`` (0.5.9 … 0.5.12,
  ``ServerArgs._set_default_nsa_backends``), ``Set DSA backends for … KV Cache: …`` (0.5.15+,
  ``arg_groups/overrides.py``), the GLM line ``Set DSA backends for GLM FP8 KV Cache on SM120/SM121: …``
  (0.5.17+), ``Setting KV cache dtype to fp8_e4m3 for DeepSeek DSA on SM12 device.``, ``Use nsa|dsa attention
  backend for DeepSeek with DSA.``, ``Use X as MoE runner backend …``, ``Use X as FP4 GEMM runner backend …``,
  the page-size notes (``Setting page size to 64 for DeepSeek DSA.``), the GLM-on-Blackwell prefill notes,
  the deprecated-flag notes (``srt/arg_groups/argparse_actions.py``), DeepGEMM's JIT lines
  (``layers/deep_gemm_wrapper/compile_utils.py``) and its UE8M0 scale warning
  (``srt/configs/model_config.py``); wording read in the sglang 0.5.9, 0.5.12, 0.5.17 and 0.5.23 wheels;
* the command line, when the log has it (``bwstack-serve: starting python3 -m sglang.launch_server …``, a
  pasted ``python3 -m sglang.launch_server …`` / ``sglang serve …``, a test harness's ``command=…``).

:class:`StartupReader` takes lines one at a time (the sweep feeds it as the log streams; the healthcheck and
``bwstack classify-log`` read a file). In a log of several starts (``docker logs`` of a restarted container)
a command line or a ``server_args`` record after a complete record begins a new start: the last one counts.
Launcher prefixes (``[2026-02-26 05:19:58 TP0] WARNING x.py:1: ``, compose's ``svc-1  | ``, Docker's
``--timestamps``), ANSI colours and wrapped lines are tolerated. Field
names and values come out in profile vocabulary (:mod:`healthchecks.vocabulary`): ``nsa_decode_backend`` is
``dsa_decode_backend``, ``nsa`` is ``dsa``, ``bf16`` is ``bfloat16``. :func:`compare` turns a request (an
``--expect`` list, a profile, or the log's own command line) into ``backend_override`` evidence.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from healthchecks import argsrecord, signatures, vocabulary

#: lines kept per wrapped ``server_args`` record before giving up on finding its end
MAX_WRAPPED_LINES = 400
#: characters of one wrapped server_args record before it counts as cut short
MAX_RECORD = 4 << 20
#: characters of one record kept in evidence
TEXT_LIMIT = 300
#: a log line longer than this is cut before the warning patterns run (server_args lines are read separately)
MAX_LINE = 64 * 1024

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
#: compose ``svc-1  | ``, Docker ``--timestamps``, SGLang ``[date time TP0] LEVEL file.py:12: ``
_PREFIXES = (
    re.compile(r"^[\w.-]+\s+\|\s?"),
    re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z?\s+"),
    re.compile(r"^\[\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d[^\]]*\]\s*"),
    re.compile(r"^(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\s+[\w./-]+\.py:\d+:\s*"),
)
#: a new log record (ends a wrapped server_args record that never closed)
_NEW_RECORD = re.compile(r"^(?:\[\d{4}-\d\d-\d\d[ T]\d\d:\d\d|\d{4}-\d\d-\d\dT\d\d:\d\d|\(\w+ pid=\d+\))")
_SERVER_ARGS = re.compile(r"\bserver_args=(ServerArgs\(|\{)")
_VERSION = (
    re.compile(r"\bsglang(?: version)?\s*(?::|==)\s*v?(\d+\.\d+\.\d+(?:\.?post\d+|rc\d+)?)", re.IGNORECASE),
    # image tags: lmsysorg/sglang:v0.5.9-cu129, lmsysorg/sglang-rocm:v…, rocm/sgl-dev:v0.5.9-rocm720-…
    re.compile(r"\b(?:sglang|sglang-rocm|sgl-dev):v(\d+\.\d+\.\d+(?:\.?post\d+|rc\d+)?)", re.IGNORECASE),
)
#: SGLang 0.5.23's own usage hint ("Example: sglang serve --model-path <model> [options]") is no command line
_USAGE = re.compile(r"\s*(?:Example|Usage|usage):")
#: what a line must contain to be worth the full look (every marker, command, version and rule; plain
#: substrings: one regex alternation per line costs more than the whole parse of a startup)
_INTERESTING = (
    "server_args",
    "launch_server",
    "sglang",
    "sgl-dev",
    "backend",
    "KV cache",
    "page size",
    "page_size",
    "Force NSA",
    "kv len",
    "deprecated",
    "DeepG",
    "DSA with TP",
)
#: length of ``server_args=ServerArgs(``: how much of the previous line a wrapped marker may start in
_MARK = len("server_args=ServerArgs(")
_COMMAND = re.compile(r"(?:-m\s+sglang\.launch_server|\bsglang\s+serve|\bsglang\.launch_server)\b")


@dataclass(frozen=True)
class _Rule:
    """One resolution warning: what it sets (field -> regex group) and the note kind it makes otherwise."""

    kind: str
    pattern: re.Pattern[str]
    sets: tuple[tuple[str, str], ...] = ()
    auto: bool = True  # the line is printed only when SGLang chose the value itself


_W = r"[\w.-]+"
RULES: tuple[_Rule, ...] = (
    _Rule(
        "dsa_backends",
        re.compile(
            rf"Set (?P<family>NSA|DSA) backends for (?P<what>[^:]+): prefill=(?P<prefill>{_W}), "
            rf"decode=(?P<decode>[\w-]+)"
        ),
        (("dsa_prefill_backend", "prefill"), ("dsa_decode_backend", "decode")),
        auto=False,  # printed whenever the DSA path resolves; a flag may have set either side
    ),
    _Rule(
        "dsa_backends",
        re.compile(
            rf"HiSparse enabled \((?P<kv>{_W})\): using DSA backends prefill=(?P<prefill>{_W}), "
            rf"decode=(?P<decode>[\w-]+)"
        ),
        (("dsa_prefill_backend", "prefill"), ("dsa_decode_backend", "decode")),
        auto=False,
    ),
    _Rule(
        "kv_cache_dtype",
        re.compile(r"Setting KV cache dtype to (?P<kv>\w+) for (?P<why>[^\n]+?)\.?$"),
        (("kv_cache_dtype", "kv"),),
    ),
    _Rule(
        "attention_backend",
        re.compile(r"\bUse (?P<backend>\w+) attention backend for (?P<why>[^\n]+?)[.,]"),
        (("attention_backend", "backend"),),
    ),
    _Rule(
        "attention_backend",
        re.compile(r"\bUse (?P<backend>\w+) as attention backend\b"),
        (("attention_backend", "backend"),),
    ),
    _Rule(
        "attention_backend",
        re.compile(r"Attention backend not specified\. Use (?P<backend>\w+) backend by default"),
        (("attention_backend", "backend"),),
    ),
    _Rule(
        "moe_runner_backend",
        re.compile(
            r"\bUse (?P<backend>\w+) as MoE runner backend\b|auto set moe_runner_backend=`(?P<b2>\w+)`"
            r"|resolved --moe-runner-backend auto -> (?P<b3>\w+)"
        ),
        (("moe_runner_backend", "backend|b2|b3"),),
    ),
    _Rule(
        "fp4_gemm_backend",
        re.compile(r"\bUse (?P<backend>\w+) as FP4 GEMM runner backend\b"),
        (("fp4_gemm_backend", "backend"),),
    ),
    _Rule(
        "page_size",
        re.compile(
            r"Setting page size to (?P<n>\d+) for [^\n]+|change page_size to (?P<n2>\d+)"
            r"|setting page_size to (?P<n3>\d+)"
        ),
    ),
    _Rule(
        "glm_prefill",
        re.compile(
            r"Force NSA prefill to use (?:sparse )?MLA [^\n]*|Set dense attention kv len "
            r"threshold to model index_topk=\d+[^\n]*"
        ),
    ),
    _Rule(
        "kv_dtype_advice",
        re.compile(
            r"When specifying --[nd]sa-prefill-backend or --[nd]sa-decode-backend, "
            r"you should also explicitly set --kv-cache-dtype"
        ),
    ),
    _Rule(
        "deprecated_flag",
        re.compile(
            r"'(?P<flag>--[\w-]+)' is deprecated and will be removed in a future "
            r"release\. Use '(?P<new>[^']+)' instead"
        ),
    ),
    _Rule(
        "deepgemm",
        re.compile(
            r"Entering DeepGEMM JIT Pre-Compile session|Try DeepGEMM JIT Compiling for"
            r"|DeepGemm is enabled but the scale_fmt of checkpoint is not ue8m0"
        ),
    ),
    _Rule(
        "dsa_tp",
        re.compile(r"DSA with TP mode is active, dp_size=\d+, tp_size=(?P<tp>\d+)"),
        (("tp_size", "tp"),),
        auto=False,
    ),
)


@dataclass
class Stated:
    """One field as a log line states it."""

    field: str
    value: str
    line: int
    text: str
    source: str  # server_args, warning, argv
    logged: str = ""  # the spelling in the log when it differs from ``value``

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "value": self.value,
            "line": self.line,
            "text": self.text,
            "source": self.source,
        }
        if self.logged and self.logged != self.value:
            out["logged"] = self.logged
        return out


@dataclass
class Startup:
    """What one server start logged about its backends."""

    version: str | None = None
    version_line: int | None = None
    server_args: dict[str, Any] | None = None  # line, format, truncated, field count
    argv: dict[str, Stated] = field(default_factory=dict)
    argv_line: int | None = None
    from_server_args: dict[str, Stated] = field(default_factory=dict)
    from_warnings: dict[str, Stated] = field(default_factory=dict)
    auto: set[str] = field(default_factory=set)  # fields a warning says SGLang chose
    notes: list[dict[str, Any]] = field(default_factory=list)
    deprecated_flags: dict[str, int] = field(default_factory=dict)  # field -> line of the deprecation note

    @property
    def found(self) -> bool:
        """Whether the log said anything about the backends at all."""
        return bool(self.server_args or self.from_warnings or self.argv)

    def effective(self) -> dict[str, Stated]:
        """Each field's effective value: the server_args record wins, then the last warning, then argv."""
        out: dict[str, Stated] = {}
        for name in vocabulary.REPORT_FIELDS:
            stated = self.from_server_args.get(name) or self.from_warnings.get(name) or self.argv.get(name)
            if stated is not None:
                out[name] = stated
        return out

    def origin(self, name: str) -> str:
        """``flag`` (the command line or a deprecation note shows it), ``sglang`` (SGLang chose it and says
        so), ``default`` (no flag, no warning, command line known) or ``unknown``."""
        if name in self.argv or name in self.deprecated_flags:
            return "flag"
        if name in self.auto:
            return "sglang"
        if self.argv_line is None:
            return "unknown"
        # the Set NSA/DSA backends line is printed whether or not a flag set a side: the command line decides
        return "sglang" if name in self.from_warnings and name.startswith("dsa_") else "default"

    def auto_set(self) -> list[str]:
        """The effective fields SGLang set by itself rather than from a flag."""
        return [name for name in self.effective() if self.origin(name) == "sglang"]

    def _effective_dict(self, name: str, stated: Stated) -> dict[str, Any]:
        out = {**stated.to_dict(), "origin": self.origin(name)}
        warned = self.from_warnings.get(name)
        if warned is not None and warned is not stated:
            out["warning_line"], out["warning"] = warned.line, warned.text
        return out

    def version_hint(self) -> str | None:
        """What the log's own format says about the SGLang version when it does not print one."""
        if not self.server_args:
            return None
        names = self.server_args.get("names", ())
        if "nsa_decode_backend" in names:
            return "nsa_* fields: SGLang before the DSA rename of 0.5.15"
        if "dsa_decode_backend" in names:
            fmt = "dict" if self.server_args.get("format") == "dict" else "ServerArgs"
            return f"dsa_* fields, logged as {fmt}: SGLang 0.5.15 or later"
        return None

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape ``classify-log --json`` prints under ``startup`` and the sweep keeps in evidence."""
        effective = self.effective()
        server_args = dict(self.server_args) if self.server_args else None
        if server_args is not None:
            server_args.pop("names", None)
        return {
            "version": self.version,
            "version_line": self.version_line,
            "version_hint": None if self.version else self.version_hint(),
            "server_args": server_args,
            "argv_line": self.argv_line,
            "requested": {name: s.value for name, s in self.argv.items()},
            "effective": {name: self._effective_dict(name, s) for name, s in effective.items()},
            "auto_set": self.auto_set(),
            "notes": list(self.notes),
        }


def strip_prefixes(line: str) -> str:
    """A log line without ANSI colours and launcher prefixes (compose, Docker timestamps, SGLang's)."""
    text = _ANSI.sub("", line).rstrip("\r\n")
    changed = True
    while changed:
        changed = False
        for prefix in _PREFIXES:
            stripped = prefix.sub("", text, count=1)
            if stripped != text:
                text, changed = stripped, True
    return text


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= TEXT_LIMIT else text[: TEXT_LIMIT - 1] + "…"


class StartupReader:
    """Feed it a server log line by line; :meth:`result` says what the startup logged about the backends."""

    def __init__(self) -> None:
        self.startup = Startup()
        self.line_no = 0
        self._record: list[str] | None = None  # the wrapped server_args record being collected
        self._tail = ""  # the end of the previous line (a wrap may cut the server_args= marker)
        self._record_line = 0
        self._record_format = ""
        self._balance = argsrecord.Balance()
        self._command: list[str] | None = None
        self._command_line = 0

    # -- input --

    def feed(self, raw: str) -> None:
        """Take the next line of the log (with or without its line end)."""
        self.line_no += 1
        line = raw.rstrip("\r\n")
        tail, self._tail = self._tail, line[-_MARK:]
        if (
            self._record is None
            and self._command is None
            and not any(word in line for word in _INTERESTING)
            and "server_args" not in tail + line[:_MARK]
        ):
            return  # the common case (request logs, tracebacks): nothing about the startup
        text = strip_prefixes(line)
        if self._record is not None:
            if _NEW_RECORD.match(_ANSI.sub("", raw)) or len(self._record) >= MAX_WRAPPED_LINES:
                self._close_record(truncated=True)
            else:
                self._record.append(text)
                self._try_close_record()
                return
        if self._command is not None:
            if self._command[-1].endswith("\\"):
                self._command[-1] = self._command[-1][:-1]
                self._command.append(text)
                if not text.rstrip().endswith("\\"):
                    self._close_command()
                return
            self._close_command()
        # a terminal may wrap inside the marker itself: look at the end of the previous line too
        joined, found = text, _SERVER_ARGS.search(text)
        if found is not None and self.startup.server_args is not None:
            self._new_start()  # a restart (docker logs keeps every start): the last one counts
        if self.startup.server_args is None:
            if found is None and tail:
                joined = tail + text
                found = _SERVER_ARGS.search(joined)
                if found is not None and found.start() >= len(tail):
                    found = None  # a word ending the last line glued to this one; not a wrapped marker
            if found:
                self._record = [joined[found.start(1) :]]
                self._balance = argsrecord.Balance()
                self._record_line = self.line_no - (1 if joined is not text else 0)
                self._record_format = "dict" if found.group(1) == "{" else "ServerArgs"
                self._tail = ""
                self._try_close_record()
                return
        self._scan(text[:MAX_LINE])

    def feed_all(self, lines: Iterable[str]) -> Startup:
        for line in lines:
            self.feed(line)
        return self.result()

    def result(self) -> Startup:
        """The findings so far (an unclosed wrapped record counts, marked truncated)."""
        if self._record is not None:
            self._close_record(truncated=True)
        if self._command is not None:
            self._close_command()
        return self.startup

    def _new_start(self) -> None:
        """Forget what an earlier start logged (the SGLang version named above still holds)."""
        self.startup = Startup(version=self.startup.version, version_line=self.startup.version_line)

    # -- the server_args record --

    def _try_close_record(self) -> None:
        """Scan only the newest piece of the record (the bracket state carries over), so a long wrapped
        record costs one pass; past MAX_RECORD characters it is taken as cut short."""
        assert self._record is not None
        piece = self._record[-1]
        end = self._balance.feed(piece)
        if end is not None:
            self._record[-1] = piece[: end + 1]
            self._close_record(truncated=False)
        elif sum(len(p) for p in self._record) > MAX_RECORD:
            self._close_record(truncated=True)

    def _close_record(self, truncated: bool) -> None:
        assert self._record is not None
        body = "".join(self._record)
        self._record = None
        fields = argsrecord.parse_record(body, self._record_format)
        if not fields:
            return
        line = self._record_line
        self.startup.server_args = {
            "line": line,
            "format": self._record_format,
            "truncated": truncated,
            "fields": len(fields),
            "names": tuple(fields),
        }
        for name, value in fields.items():
            semantic = vocabulary.field_for_name(name)
            if semantic is None or value is None:
                continue
            if semantic in self.startup.from_server_args and name != semantic:
                continue  # fp4_gemm_runner_backend beats a stray fp4_gemm_backend
            text = f"{name}={value!r}"
            self.startup.from_server_args[semantic] = Stated(
                semantic,
                vocabulary.semantic_value(value),
                line,
                f"server_args: {text}",
                "server_args",
                str(value),
            )
        if self.startup.version is None and isinstance(fields.get("version"), str):
            self.startup.version, self.startup.version_line = fields["version"], line

    # -- warnings, version, command line --

    def _scan(self, text: str) -> None:
        startup = self.startup
        if startup.version is None:
            for pattern in _VERSION:
                hit = pattern.search(text)
                if hit:
                    startup.version, startup.version_line = hit.group(1), self.line_no
                    break
        continued = text.rstrip().endswith("\\")
        command = _COMMAND.search(text) and (" --" in text or continued) and not _USAGE.match(text)
        if command and (startup.argv_line is None or startup.server_args is not None):
            if startup.server_args is not None:
                self._new_start()  # a restart after a full start: the last start counts
            self._command = [text]
            self._command_line = self.line_no
            if not continued:
                self._close_command()
            return
        for rule in RULES:
            hit = rule.pattern.search(text)
            if hit is None:
                continue
            self._apply(rule, hit, text)

    def _apply(self, rule: _Rule, hit: re.Match[str], text: str) -> None:
        startup = self.startup
        values = {k: v for k, v in hit.groupdict().items() if v is not None}
        note: dict[str, Any] = {"kind": rule.kind, "line": self.line_no, "text": _short(text)}
        for name, groups in rule.sets:
            value = next((values[g] for g in groups.split("|") if g in values), None)
            if value is None:
                continue
            startup.from_warnings[name] = Stated(
                name, vocabulary.semantic_value(value), self.line_no, _short(text), "warning", value
            )
            if rule.auto:
                startup.auto.add(name)
        if rule.kind == "dsa_backends":
            what = values.get("what", "")
            kv: str | None = values.get("kv")
            if what.endswith(" KV Cache") and " " not in what[: -len(" KV Cache")]:
                kv = what[: -len(" KV Cache")]
            elif what.startswith("GLM FP8 KV Cache"):  # printed only for an fp8_e4m3 KV cache (0.5.17+)
                kv = "fp8_e4m3"
                note["glm_sm12x"] = True
            if kv and "kv_cache_dtype" not in startup.from_warnings:
                startup.from_warnings["kv_cache_dtype"] = Stated(
                    "kv_cache_dtype",
                    vocabulary.semantic_value(kv),
                    self.line_no,
                    _short(text),
                    "warning",
                    kv,
                )
        elif rule.kind == "deprecated_flag":
            flagged = vocabulary.field_for_flag(values["flag"])
            if flagged:
                startup.deprecated_flags[flagged] = self.line_no
        elif rule.kind == "page_size":
            note["page_size"] = int(values.get("n") or values.get("n2") or values.get("n3") or 0)
        startup.notes.append(note)

    def _close_command(self) -> None:
        assert self._command is not None
        command = " ".join(part.strip() for part in self._command)
        self._command = None
        start = _COMMAND.search(command)
        tail = command[start.end() :] if start else command
        try:
            tokens = shlex.split(tail, posix=True)
        except ValueError:
            tokens = tail.split()
        if not any(token.startswith("--") for token in tokens):
            return
        flags = argsrecord.flags_from_argv(tokens)
        self.startup.argv_line = self._command_line  # known command line: a field it lacks was not a flag
        for name, value in flags.items():
            self.startup.argv[name] = Stated(
                name, vocabulary.semantic_value(value), self._command_line, _short(command), "argv", value
            )


def read_text(text: str) -> Startup:
    """Parse log text already in memory."""
    return StartupReader().feed_all(text.splitlines())


def read_file(path: str, max_bytes: int | None = None) -> Startup:
    """Parse a log file (its first ``max_bytes`` when given: the startup is at the top)."""
    reader = StartupReader()
    read = 0
    with open(path, "rb") as fh:
        while max_bytes is None or read < max_bytes:
            raw = fh.readline(signatures.MAX_LINE_BYTES)  # memory stays bounded on one endless line
            if not raw:
                break
            read += len(raw)
            if len(raw) == signatures.MAX_LINE_BYTES and not raw.endswith(b"\n"):
                while (rest := fh.readline(signatures.MAX_LINE_BYTES)) and not rest.endswith(b"\n"):
                    read += len(rest)  # the rest of an over-long line: skipped, its head was read
                read += len(rest)
            reader.feed(raw.decode("utf-8", errors="replace").rstrip("\n") + "\n")
    return reader.result()


# --- requested vs effective ---------------------------------------------------------------------------------


def compare(
    startup: Startup, expect: Mapping[str, Any] | None = None, by: str = "--expect"
) -> list[dict[str, Any]]:
    """``backend_override`` evidence: every requested field whose effective value differs, with line numbers.

    The request is ``expect`` (an ``--expect`` list or a profile: semantic field or SGLang name -> value;
    ``auto`` and None ask for nothing), else the log's own command line. A dense attention backend requested
    while SGLang set the DSA sparse-attention backends by itself is reported too (``kind: dsa_auto``): the
    seed's "you asked for triton, the sparse layers were set to flashmla_kv".
    """
    requested: dict[str, tuple[str, str]] = {}
    if expect:
        for key, value in expect.items():
            name = vocabulary.field_for_name(key) or key
            if value is None or vocabulary.semantic_value(value) == "auto":
                continue
            requested[name] = (vocabulary.semantic_value(value), by)
    else:
        for name, stated in startup.argv.items():
            requested[name] = (stated.value, f"command line (line {stated.line})")
    effective = startup.effective()
    evidence: list[dict[str, Any]] = []
    for name, (want, source) in requested.items():
        got = effective.get(name)
        if got is None or _same(want, got.value):
            continue
        shown = startup.from_warnings.get(name, got)  # the line saying why beats the repr
        evidence.append(
            {
                "class": "backend_override",
                "kind": "mismatch",
                "field": name,
                "requested": want,
                "requested_by": source,
                "effective": got.value,
                "origin": startup.origin(name),
                "line": shown.line,
                "text": shown.text,
                "lines": sorted({got.line, shown.line}),
                "message": f"{name}: requested {want} ({source}), effective {got.value} (line {shown.line})",
            }
        )
    attention = requested.get("attention_backend", (None, ""))[0]
    if attention is not None and attention != "dsa":
        for name in vocabulary.DSA_SIDES:
            got = effective.get(name)
            if got is None or name in requested or name not in startup.from_warnings:
                continue  # only a resolution SGLang announced, not a default the repr states
            if startup.origin(name) == "flag":
                continue
            shown = startup.from_warnings[name]
            evidence.append(
                {
                    "class": "backend_override",
                    "kind": "dsa_auto",
                    "field": name,
                    "requested": None,
                    "requested_by": f"attention_backend={attention} ({requested['attention_backend'][1]})",
                    "effective": got.value,
                    "origin": "sglang",
                    "line": shown.line,
                    "text": shown.text,
                    "lines": sorted({got.line, shown.line}),
                    "message": (
                        f"attention_backend={attention} was requested, yet SGLang set {name}={got.value} "
                        f"itself for the DSA sparse-attention layers (line {shown.line})"
                    ),
                }
            )
    return evidence


def _same(requested: str, effective: str) -> bool:
    if requested == effective:
        return True
    try:
        return float(requested) == float(effective)
    except ValueError:
        return False


def summary(startup: Startup) -> str:
    """One line: ``from the server log: attention_backend=triton (flag), dsa_decode_backend=flashmla_kv
    (set by SGLang), …``; empty when the log said nothing."""
    parts = []
    for name, stated in startup.effective().items():
        origin = startup.origin(name)
        tag = {"flag": "flag", "sglang": "set by SGLang"}.get(origin)
        parts.append(f"{name}={stated.value}" + (f" ({tag})" if tag else ""))
    return ", ".join(parts)
