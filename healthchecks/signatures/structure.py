"""A log's structure, as a person reads it: the last traceback, the process that died, the last errors, an
open CUDA-graph capture, a collapsed output; and the rules that name a class by that structure when no
line-level signature does (the serving and clean-stop evidence are counted by the scanner itself).

Stdlib only; part of the one failure catalog (:meth:`healthchecks.signatures.Scanner.structure` reads the last
:data:`TAIL` characters the scanner was fed, already without paste noise). The line-level signatures name most
failures; these rules name the ones whose class is in the *combination* -- an exception's type with the module
that raised it (a ``FileNotFoundError`` raised by a JIT build is a failed build, a ``TimeoutError`` raised in
``torch.distributed`` is a collective failure) -- and the ones no single line shows (a capture that began and
never ended while the log's clock ran on). Every rule names the public text it was written from.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from healthchecks.signatures import paste
from healthchecks.signatures.classes import CLASS_PRIORITY
from healthchecks.signatures.entry import NEVER_ANSWERED, WARNING, Signature, sig

#: how much of a log's end the structure is read from (a traceback and what killed the process are there)
TAIL = 64 * 1024
#: an open CUDA-graph capture this long (log clock) with nothing after it never returned
CAPTURE_HUNG_S = 600

_FRAME = r'^\s*File "([^"]+)", line \d+, in (\S+)'
#: a paste that starts inside a frame line (read only as the first line of what is read):
#: ``sg_env/lib/python3.10/site-packages/sglang/srt/layers/linear.py", line 1226, in weight_loader``
_CUT_FRAME = r'^\s*(?:[^"\s]*/)?[^"\s/]+\.py", line \d+, in (\S+)'
#: an exception line: ``Type: message``, or a bare ``AssertionError`` (an ``assert`` without a message)
_EXCEPTION = (
    r"^((?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Interrupt|Exit|Warning)?): ?(.*)$"
    r"|^((?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Interrupt|Exit))$"
)
#: exception types an excerpt may end inside (``AssertionErro``): the last line, cut, names its type
_CUT_TYPES = ("AssertionError", "RuntimeError", "ValueError", "KeyError", "TypeError", "AttributeError")
_CUT_TYPE_MIN = 6
#: uvicorn's line before the traceback of one request's handler (uvicorn/protocols/http/h11_impl.py and
#: httptools_impl.py: logger.error("Exception in ASGI application\n", exc_info=exc)); the server goes on
_REQUEST_FAILED = "Exception in ASGI application"
#: SGLang's OpenAI-compatible handler on a request it failed: it logs the traceback and answers the request
#: with a 500 of its own (sglang 0.5.23 srt/entrypoints/openai/serving_base.py handle_request:
#: logger.exception(f"Error in request: {e}") then create_error_response(..., status_code=500)); round 20
#: (in-sample sgl-project/sglang#8833). Like uvicorn's line it marks one request's traceback; the server
#: answering is still shown by an access-log line only (a handler also fails when the scheduler died)
_HANDLER_FAILED = "Error in request: "
#: a paste that starts inside an access-log line: ``1.1" 500 Internal Server Error`` (its first line only)
_CUT_ANSWER = r'^\s*[\d.]*" ([1-5])\d\d [A-Z][a-z]'
#: an HTTP server's access-log line (uvicorn: '127.0.0.1:51720 - "POST /v1/chat/completions HTTP/1.1" 500')
_ANSWER = r'"(?:GET|POST|PUT|DELETE|PATCH|HEAD|OPTIONS) /[^"\s]* HTTP/[\d.]+" (\d)\d\d\b'
_DIED = r"(?i:exit(?:ed with)? ?code[:=]? ?|exitcode=|signal |killed by |Signals\.)(-?\d+|SIG[A-Z]+)"
#: glog's level prefix (``E1205 10:00:00.123 ..``, also behind a launcher's or inside brackets), for the
#: level letters ``{}``; absl's pre-init ``E0000 00:00`` is no date
_GLOG_STAMP = r"\d{4} \d\d:\d\d"  # glog's date and time after its level letter
_GLOG_LEVEL = r"(?:^|[\s:\]|])\[?[{}](?!0000)" + _GLOG_STAMP.replace("{", "{{").replace("}", "}}")
_ERROR_WORDS = ("ERROR", "CRITICAL", "FATAL")
#: a logger's error level as pasted: Python logging's, loguru's, glog's E and F
_ERROR_LINE = r"\b(?:" + "|".join(_ERROR_WORDS) + r")\b|" + _GLOG_LEVEL.format("EF")
#: what every line _ERROR_LINE matches holds: one of its words or glog's level shape, each found in the whole
#: text at once from its first letter (_ERROR_LINE has no literal to search for: run on every line, it would
#: try every offset)
_ERROR_HINT = (*_ERROR_WORDS, *(level + _GLOG_STAMP for level in "EF"))
_STAMP = r"\[(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)"
_CAPTURE_BEGIN = r"\bCapture (?:[\w ]+ )?(?:cuda|CUDA) graph begin\b"
_CAPTURE_END = r"\bCapture (?:[\w ]+ )?(?:cuda|CUDA) graph end\b|ready to roll"
#: a generation collapsed to one repeated punctuation mark (NaN logits at temperature 0 decode as '!')
_COLLAPSE_MARKS, _COLLAPSE_RUN = "!?.,#*", 64
_COLLAPSE = r"([" + re.escape(_COLLAPSE_MARKS) + r"])\1{" + str(_COLLAPSE_RUN - 1) + ",}"


_COMPILED: dict[str, re.Pattern[str]] = {}


def _re(pattern: str) -> re.Pattern[str]:
    """``pattern`` compiled on first use (the healthcheck's start-up compiles none of this module's)."""
    found = _COMPILED.get(pattern)
    if found is None:
        found = _COMPILED[pattern] = re.compile(pattern)
    return found


@dataclass
class Structure:
    """What a person reads off a log's end. Lines are 1-based in the whole log."""

    exception: str = ""  # the last traceback's exception type (``FileNotFoundError``)
    module: str = ""  # the file of its innermost frame (``.../flashinfer/jit/cpp_ext.py``)
    function: str = ""
    frames: list[str] = field(default_factory=list)  # every frame's file, outermost first
    functions: list[str] = field(default_factory=list)  # every frame's function, outermost first
    message: str = ""
    exception_line: int = 0
    died: str = ""  # the last line saying a process exited or was signalled
    exit: str = ""  # its exit code or signal (``-9``, ``SIGKILL``)
    died_line: int = 0
    errors: list[tuple[int, str]] = field(default_factory=list)  # the last ERROR/CRITICAL lines
    capture_open: int = 0  # line of a capture that began and did not end (0: none)
    capture_seconds: float = 0.0  # log-clock seconds from that line to the log's last stamp
    collapse_line: int = 0  # a line holding a collapsed output (``!!!!...``)
    cut_line: int = 0  # the excerpt's last line, cut inside a fatal header (``Trace``, ``hit an ex``)
    modules_line: int = 0  # a line of CPython's fatal-error dump of extension modules
    request_line: int = 0  # the last traceback's header follows "Exception in ASGI application" (uvicorn) or
    # "Error in request: .." (SGLang's OpenAI handler)
    answered_line: int = 0  # the last line where the HTTP server answered a request (an access-log line)
    failed_line: int = 0  # the last such answer that was a server error (5xx)
    trace_line: int = 0  # the last traceback's first line (its header, else its first frame)
    raised_line: int = 0  # the last exception line outside a traceback (``RuntimeError: ..`` pasted alone)
    end_error: int = 0  # the run's last line, when it reports a failure (:func:`ended_in_error`)
    cut_assert: int = 0  # an ``assert ..`` source line ending a traceback cut before its exception line
    cut_assert_in: str = ""  # the function of that assert's frame

    def to_dict(self) -> dict[str, object]:
        """The non-empty fields (``bwstack classify-log`` prints them; ``--json`` as ``structure``)."""
        return {k: v for k, v in self.__dict__.items() if v not in ("", 0, 0.0, [])}


@dataclass
class _Trace:
    """The traceback being read: its frames (file, function), whether the next line is a frame's source
    line, and its last source line when that is an ``assert`` (line, the frame's function)."""

    open: bool = False
    frames: list[tuple[str, str]] = field(default_factory=list)
    source_next: bool = False
    asserted: tuple[int, str] | None = None

    def begin(self, frames: list[tuple[str, str]] | None = None) -> None:
        self.open, self.frames, self.source_next, self.asserted = True, frames or [], False, None

    def read(self, found: Structure, line: str, number: int, last: bool) -> bool:
        """Read ``line`` of the open traceback into ``found``; False when the traceback was cut before it
        (the line is the log's again). ``last``: the line is the text's last non-blank one."""
        frame = _re(_FRAME).match(line)
        if frame:
            self.frames.append((frame.group(1), frame.group(2)))
            self.source_next, self.asserted = True, None
            return True
        exception = _re(_EXCEPTION).match(line.strip()) or _cut_type(line, self.frames, last)
        if exception and self.frames:
            found.exception = exception.group(1) or exception.group(3)
            found.message = (exception.group(2) or "")[:300]
            found.module, found.function = self.frames[-1]
            found.frames = [file for file, _ in self.frames]
            found.functions = [function for _, function in self.frames]
            found.exception_line, self.open, self.asserted = number, False, None
            return True
        if not line or line[0].isspace() or self.source_next:  # a frame's source line, its carets, a blank
            if self.source_next and line.lstrip().startswith("assert "):  # line; the source line also when
                self.asserted = (number, self.frames[-1][1])  # the paste lost its indentation (round 20,
            self.source_next = False  # in-sample sgl-project/sglang#8833: a traceback pasted flush left)
            return True
        self.close(found)
        return False

    def close(self, found: Structure) -> None:
        """The traceback ends without its exception line (cut): an ``assert`` it ended at is kept (round 27,
        in-sample: round 26's sgl-project/sglang#19587, a loader's shape assert)."""
        self.open = False
        if self.asserted is not None:
            found.cut_assert, found.cut_assert_in = self.asserted


def read(text: str, first_line: int = 1, since: int = 0, *, normal: str | None = None) -> Structure:
    """The structure of ``text`` (a log's end as pasted; its first line is line ``first_line`` of the log).

    Frames and exceptions are read without the paste noise (:func:`paste.normalise`; ``normal``: ``text``
    already normalised, when the caller has it); ERROR lines as pasted (a logger's level is noise to the
    signatures, not to a person). A frame line opens a traceback also without its header (a paste that starts
    inside one). Lines up to ``since`` (the last start banner: an earlier run's) are passed over, unread
    (:func:`_after`)."""
    start = first_line
    text, first_line = _after(text, start, since)
    pasted = text.split("\n")
    erring = _lines_holding(_ERROR_HINT, text)  # the lines a logger's error level may be on, as pasted
    text = paste.normalise(text) if normal is None else _after(normal, start, since)[0]
    found = Structure()
    trace = _Trace()
    begin: tuple[int, int | None] | None = None
    stamped: list[int] = []  # the offsets of the lines read outside a traceback that may hold a time stamp
    frame_re, died_re, error_re = _re(_FRAME), _re(_DIED), _re(_ERROR_LINE)
    stamp_re = _re(_STAMP)
    collapse = any(mark * _COLLAPSE_RUN in text for mark in _COLLAPSE_MARKS)  # long needles: C speed
    lines = text.split("\n")
    last = text.rstrip().count("\n")  # the offset of the last non-blank line
    request = 0  # the line of the last "Exception in ASGI application"
    for offset, line in enumerate(lines):
        number = first_line + offset
        if number <= since:
            continue
        if "Traceback (most recent call last)" in line:
            trace.begin()
            found.trace_line = number
            found.request_line = number if request and 0 < number - request <= 2 else 0
            continue
        if not trace.open and 'File "' in line and frame_re.match(line):
            trace.begin()
            found.trace_line, found.request_line = number, 0
        elif offset == 0 and (cut := _re(_CUT_FRAME).match(line)):  # a paste that starts inside a frame
            trace.begin([(line.strip().split('"', 1)[0], cut.group(1))])
            found.trace_line, found.request_line = number, 0
            continue
        if trace.open and trace.read(found, line, number, offset == last):
            continue
        if offset == 0 or "HTTP/" in line or "Error" in line or "Exception" in line:  # what it reads
            request = _mark_requests(found, line, number, offset == 0, request)
        if "[" in line:
            stamped.append(offset)
        if "raph " in line or (begin and "ready to roll" in line):  # what _capture reads
            begin = _capture(begin, line, number, stamp_re)
        if ("xit" in line or "ignal" in line or "killed" in line) and (died := died_re.search(line)):
            found.died, found.exit, found.died_line = line.strip()[:300], died.group(1), number
        shown = pasted[offset] if offset < len(pasted) else line
        if offset in erring and error_re.search(shown):
            found.errors = [*found.errors[-2:], (number, shown.strip()[:300])]
        _mark_output(found, line, number, collapse)
    if trace.open:  # the excerpt ends inside the traceback
        trace.close(found)
    last_stamp = None  # the log's clock at its end: the last time stamp on a line read outside a traceback
    for at in reversed(stamped):
        if stamp := stamp_re.search(lines[at]):
            last_stamp = _seconds(stamp)
            break
    _read_end(found, text, first_line, since, capture=(begin, last_stamp), pasted=pasted)
    return found


def _read_end(
    found: Structure,
    text: str,
    first_line: int,
    since: int,
    *,
    capture: tuple[tuple[int, int | None] | None, int | None],
    pasted: list[str],
) -> None:
    """What the log's end says: a paste cut inside a fatal header, a capture still open (``capture``: its
    begin line and stamp, and the log's last stamp: how long it stayed open by the log's clock)."""
    begin, last = capture
    end = _last_line(text)
    if end is not None and first_line + end[0] > since and _cut_fatal(end[1]):
        found.cut_line = first_line + end[0]
    if end is not None and first_line + end[0] > since:
        found.end_error = _end_error(text, pasted, end[0], first_line, since)
    if begin is not None:
        found.capture_open = begin[0]
        if begin[1] is not None and last is not None:
            found.capture_seconds = float(last - begin[1])


#: the headers a dying process prints that an excerpt may end inside: CPython's traceback header, SGLang's
#: ``<Component> hit an exception: <traceback>`` (sglang 0.5.23 srt/managers/scheduler.py,
#: data_parallel_controller.py, detokenizer_manager.py, tokenizer_manager.py)
_TRACEBACK = "Traceback (most recent call last):"
_HIT = "hit an exception:"
_HIT_CUT = r"\b[A-Z]\w+ (hit an e[a-z]*:?)$"
_CUT_MIN = 5  # 'Trace': shorter stubs ('T', 'Tr') are no evidence a person would read
#: CPython's headers between the tracebacks of chained exceptions (Lib/traceback.py _cause_message,
#: _context_message): a paste that ends at one (or inside one) was cut as the next traceback began (round 19,
#: from CPython's own text)
_CHAINED = (
    "The above exception was the direct cause of the following exception:",
    "During handling of the above exception, another exception occurred:",
)
_CHAINED_MIN = 16  # 'The above except', 'During handling ': a stub that says which header it is
#: CPython's fatal-error dump lists the loaded extension modules on one long line ('Extension modules:
#: numpy._core._multiarray_umath, torch._C, ... (total: N)', Python/pylifecycle.c _Py_DumpExtensionModules,
#: 3.10+); a paste may hold a piece of it alone, with neither its head nor its tail
_MODULES_MIN = 8
_MODULES = r"(?:\b[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+, ){8}"


def _mark_requests(found: Structure, line: str, number: int, first: bool, request: int) -> int:
    """Mark what ``line`` (not in a traceback) says of requests: an answer (and a 5xx one), an exception line
    pasted alone; returns the line of the last "Exception in ASGI application" or SGLang's "Error in request"
    (``request`` or this one). Neither is an answer: a handler fails also when the scheduler behind it died
    (its own 500 proves no server alive), so an access-log line must still show the server answering."""
    if _REQUEST_FAILED in line or _HANDLER_FAILED in line:
        return number
    if "Error" in line or "Exception" in line:
        raised = _re(_EXCEPTION).match(line.strip())
        if raised and (raised.group(1) or raised.group(3)).endswith(("Error", "Exception")):
            found.raised_line = number
    answer = _re(_ANSWER).search(line) if "HTTP/" in line else None
    if answer is None and first:  # a paste that starts inside an access-log line
        answer = _re(_CUT_ANSWER).match(line)
    if answer is not None:
        found.answered_line = number
        if answer.group(1) == "5":
            found.failed_line = number
    return request


def _mark_output(found: Structure, line: str, number: int, collapse: bool) -> None:
    """Mark a collapsed output on ``line`` (the text holds one: ``collapse``) and a piece of CPython's fatal
    dump of extension modules (every item a dotted name and ', ': cheap counts first)."""
    if collapse and not found.collapse_line and _re(_COLLAPSE).search(line):
        found.collapse_line = number
    if line.count(", ") >= _MODULES_MIN and line.count(".") >= _MODULES_MIN and _re(_MODULES).search(line):
        found.modules_line = number


def request_failed(found: Structure) -> bool:
    """Whether the run's traceback evidence was one request's and the server went on (round 13, in-sample:
    sgl-project/sglang#3552, sgl-project/sglang-omni#214): the last traceback follows uvicorn's "Exception
    in ASGI application" (a handler raised; uvicorn answers 500 and serves the next request) in a log where
    the server answers requests, or the last exception line is followed at once by the request's own 5xx
    answer. Nothing may look fatal after it (a death notice, CPython's fatal dump, a cut header). An answer
    of the HTTP front alone proves nothing: it answers /health while a dead scheduler serves no one
    (sgl-project/sglang#17874)."""
    end = max(found.died_line, found.modules_line, found.cut_line)
    if found.request_line and found.request_line == found.trace_line:
        return found.answered_line > 0 and end < found.trace_line
    raised = max(found.exception_line, found.raised_line)
    return raised > 0 and 0 < found.failed_line - raised <= 2 and end < raised and found.trace_line <= raised


def _cut_type(line: str, frames: list[tuple[str, str]], is_last: bool) -> re.Match[str] | None:
    """An excerpt's last line cut inside an exception type after a traceback's frames (``AssertionErro``),
    matched as that type's bare line; else None."""
    stub = line.strip()
    if not (is_last and frames and len(stub) >= _CUT_TYPE_MIN):
        return None
    for name in _CUT_TYPES:
        if name.startswith(stub):
            return _re(_EXCEPTION).match(name)
    return None


def _lines_holding(patterns: tuple[str, ...], text: str) -> set[int]:
    """The offsets (0-based) of ``text``'s lines where one of ``patterns`` is found: a search of the whole
    text each, at C speed (each starts with a literal or a letter class)."""
    found: set[int] = set()
    for pattern in patterns:
        line, at = 0, 0
        for hit in _re(pattern).finditer(text):
            line += text.count("\n", at, hit.start())
            at = hit.start()
            found.add(line)
    return found


def _last_line(text: str) -> tuple[int, str] | None:
    """The offset and stripped text of ``text``'s last non-blank line, else None."""
    text = text.rstrip()
    line = text.rsplit("\n", 1)[-1].strip()
    return (text.count("\n"), line) if line else None


def _cut_fatal(line: str) -> bool:
    """Whether ``line`` ends inside a fatal header: the excerpt was cut as a traceback or SGLang's
    ``hit an exception`` began (a person reads the process as dying there)."""
    if len(line) >= _CUT_MIN and _TRACEBACK.startswith(line):
        return True
    if len(line) >= _CHAINED_MIN and any(header.startswith(line) for header in _CHAINED):
        return True
    hit = _re(_HIT_CUT).search(line) if "hit an e" in line else None
    return hit is not None and _HIT.startswith(hit.group(1))


#: a line that reports a failure, as a person reads one whatever its wording: a logger's error level
#: (:data:`_ERROR_LINE`), or a failure word
_END_ERROR = (
    _ERROR_LINE + r"|(?i:\b(?:errors?|fail(?:ed|ure|s)?|faults?|abort(?:ed|ing)?|panic(?:ked)?|killed"
    r"|crash(?:ed)?|exceptions?|fatal|timed out|time-?out)\b)"
)
#: ... unless it only warns, names what the server does instead, counts no failure, or is a piece of a
#: settings dump (``watchdog_timeout=300, ..``: SGLang's ServerArgs line cut where the paste ends)
_END_BENIGN = (
    _GLOG_LEVEL.format("W")
    + "|"
    + WARNING
    + r"|(?i:skipp|\bretry|retrying|ignor|deprecat|\b(?:no|0|zero|without) (?:errors?|failures?)\b"
    r"|server_?args"
    # round 20 (in-sample sgl-project/sglang#26122): a checkpoint without a generation config is normal,
    # SGLang goes on without it (0.5.23 srt/utils/hf_transformers/common.py get_generation_config)
    r"|generation[ _]config)|(?:\b\w+=[^,\n]*, ){2}"
)


#: how far above an indented last line the head of its message may be (a kernel name wrapped over lines)
_CONTINUED_MAX = 20


def _end_error(text: str, pasted: list[str], end: int, first_line: int, since: int) -> int:
    """The line of a failure report the run ends in (its last non-blank line, or the head of the message
    its indented last lines continue), else 0. The level is read as pasted (glog's ``E1205`` is paste noise
    to the signatures, not to a person)."""
    near = text.rstrip().rsplit("\n", _CONTINUED_MAX + 1)  # the last lines (and what is above them, joined)
    near = near if len(near) <= _CONTINUED_MAX + 1 else near[1:]
    lines = {end - back: line for back, line in enumerate(reversed(near))}  # offset -> line
    at = [end]
    head = end
    while lines[head][:1].isspace() and head > 0 and end - head < _CONTINUED_MAX:
        head -= 1  # the message's indented continuation: its head line says what failed
    if head != end and not lines[head][:1].isspace():
        at.append(head)
    for offset in at:
        line = pasted[offset] if offset < len(pasted) else lines[offset]
        if first_line + offset > since and _re(_END_ERROR).search(line) and not _re(_END_BENIGN).search(line):
            return first_line + offset
    return 0


def _after(text: str, first_line: int, since: int) -> tuple[str, int]:
    """``text`` from the line after ``since`` on, and that line's number (``text`` itself when it starts
    later); paste noise keeps each line in its place, so the cut changes no line's number."""
    if since < first_line:
        return text, first_line
    skip = since - first_line + 1
    rest = text.split("\n", skip)
    return (rest[skip] if len(rest) > skip else ""), since + 1


def _capture(
    begin: tuple[int, int | None] | None, line: str, number: int, stamp_re: re.Pattern[str]
) -> tuple[int, int | None] | None:
    """The open capture after ``line``: (its line, its time stamp), a new one when it begins one, None once
    it ended or the server became ready."""
    if "raph " in line:
        if _re(_CAPTURE_BEGIN).search(line):
            stamp = stamp_re.search(line) if "[" in line else None
            return (number, _seconds(stamp) if stamp else None)
        if begin and _re(_CAPTURE_END).search(line):
            return None
    elif begin and "ready to roll" in line:
        return None
    return begin


def _seconds(stamp: re.Match[str]) -> int:
    """Seconds since 1970-01-01 of a matched ``[YYYY-MM-DD HH:MM:SS`` (H. Hinnant's days_from_civil; no
    datetime import: the healthcheck's start-up stays light)."""
    year, month, day, hour, minute, second = map(int, stamp.groups())
    year -= month <= 2
    era = year // 400
    yoe = year - era * 400
    doy = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    days = era * 146097 + yoe * 365 + yoe // 4 - yoe // 100 + doy - 719468
    return ((days * 24 + hour) * 60 + minute) * 60 + second


@dataclass(frozen=True)
class Rule:
    """Exception type + the module that raised it (+ its message) -> class, as regexes compiled on first use;
    ``signature`` carries the class, rank, source and fix like any entry of the catalog. ``function``, when
    set, must match one of the traceback's last :data:`LAST_FRAMES` functions (the code that raised it)."""

    exception: str
    module: str
    message: str
    signature: Signature
    function: str = ""


#: how many of a traceback's innermost frames a rule's ``function`` is looked for in
LAST_FRAMES = 4


def _rule(cls: str, match: tuple[str, str, str], source: str, fix: str, function: str = "") -> Rule:
    """A rule of ``cls`` for (exception type, a frame's module, message) regexes (and a function's)."""
    exception, module, message = match
    return Rule(exception, module, message, sig(cls, exception, (exception,), source, fix), function)


#: the functions that load a checkpoint into a model: SGLang's and vLLM's model classes, layers, loaders
_LOADER = r"^(?:load_weights|_?load_weights_\w*|weight_loader\w*|load_model|load_state_dict)$"

_LOADER_RULE = _rule(
    "model_load",
    (r"(?:^|\.)(?:KeyError|ValueError|AssertionError|IndexError|SafetensorError)$", r"", r""),
    "a weight the model class does not know, or of another shape, raised inside its loader: every SGLang "
    "model's load_weights (srt/models/*.py: 'param = params_dict[name]' -> KeyError: 'lm_head.weight', "
    "sgl-project/sglang#12031), the layers' weight_loader shape asserts (srt/layers/linear.py "
    "'assert param_data.shape == loaded_weight.shape'), DefaultModelLoader.load_model / load_weights_and_"
    "postprocess (srt/model_loader/loader.py); vLLM's loaders use the same names",
    "the checkpoint does not fit the model class: check the architecture, quantization and the "
    "SGLang version that supports this checkpoint",
    function=_LOADER,
)
#: a loader's check of a weight (a traceback cut at its ``assert``: the rule's reading of it)
LOADER_CHECK = _LOADER_RULE.signature

RULES: tuple[Rule, ...] = (
    _rule(
        "kernel_compile",
        (
            r"(?:^|\.)(?:FileNotFoundError|CalledProcessError|CompilationError|PTXASError)$",
            r"/(?:jit|cpp_extension|build_utils|compiler|_inductor|triton/backends)[/.]",
            r"",
        ),
        "a JIT build (FlashInfer flashinfer/jit/cpp_ext.py run_ninja, torch.utils.cpp_extension, Triton "
        "backends/nvidia/compiler.py make_cubin) failing to run its tool; issue 36's list",
        "a toolchain that knows the arch in the image: ninja, CUDA >= 12.8 nvcc/ptxas, a C compiler",
    ),
    # round 18: any exception raised in one of Triton's compile stages (make_ttir .. make_cubin: its MLIR and
    # LLVM passes, ptxas) is a kernel that failed to build, whatever its type (in-sample
    # sgl-project/sglang#1058: 'IndexError: map::at' from pm.run in make_llir on a T4)
    _rule(
        "kernel_compile",
        (r"(?:Error|Exception)$", r"/triton/backends/[^/]+/compiler\.py$", r""),
        "an exception raised in a Triton compile stage (triton/backends/nvidia/compiler.py make_ttir, "
        "make_ttgir, make_llir, make_ptx, make_cubin; the AMD backend's make_amdgcn, make_hsaco); round 18 "
        "(in-sample sgl-project/sglang#1058: 'IndexError: map::at' from make_llir's pm.run on sm_75)",
        "Triton could not build a kernel for this GPU: check the Triton version the image pins supports this "
        "arch, or pick another attention/MoE backend",
        function=r"^make_[a-z]+$",
    ),
    _rule(
        "nccl",
        (
            r"(?:^|\.)(?:TimeoutError|DistStoreError|DistNetworkError|DistBackendError|RuntimeError)$",
            r"/torch/distributed/|/c10d|rendezvous",
            r"(?i)time(?:d)? ?out|socket|store|connect",
        ),
        "torch.distributed raising on its store or process group (distributed_c10d.py, rendezvous; "
        "pytorch/pytorch#107021); issue 36's list",
        "the rank-0 store or a peer is unreachable: --dist-init-addr, ports, firewall; every node started",
    ),
    _rule(
        "model_load",
        (
            r"(?:^|\.)(?:ValueError|KeyError|OSError|EnvironmentError|JSONDecodeError|UnicodeDecodeError"
            r"|SafetensorError)$",
            r"/(?:transformers/(?:configuration|models/auto|modeling_utils)|hf_transformers_utils"
            r"|model_loader|safetensors)",
            r"",
        ),
        "the checkpoint's config or weights refused by the loader (transformers' AutoConfig, SGLang's "
        "srt/model_loader and hf_transformers_utils.py, safetensors); round 13: a config that is not text "
        "(UnicodeDecodeError in configuration_utils _dict_from_json_file, in-sample "
        "jingyaogong/minimind#741: a .pth file passed as the model path)",
        "check the model path, its config.json and the transformers version the image pins",
    ),
    _LOADER_RULE,
    _rule(
        "model_load",
        (r"(?:^|\.)RuntimeError$", r"", r"(?i)\b(?:size|shape)s?\b|mismatch"),
        "a tensor of another shape copied into a parameter inside the loader (torch's 'The size of tensor a "
        "(4096) must match the size of tensor b (2048) at non-singleton dimension 0' from param.data.copy_ "
        "in a weight_loader, 'size mismatch for ...' from load_state_dict)",
        "the checkpoint does not fit the model class (a wrong --tp split, quantization or architecture)",
        function=_LOADER,
    ),
    # round 10: written from round 9's misses (in-sample once round 9 joined the corpus)
    _rule(
        "import_error",
        (r"(?:^|\.)OSError$", r"/ctypes/__init__\.py$", r""),
        "a shared library that cannot be loaded (ctypes.CDLL's dlopen: 'cannot open shared object file', "
        "'undefined symbol: ..'), as torch.ops.load_library and torch.utils.cpp_extension load a built or "
        "cached extension; round 10 (in-sample, sgl-project/sglang#5695: a FlashInfer JIT cache built "
        "against another torch)",
        "an extension built for another torch/CUDA: clear the JIT cache (~/.cache/flashinfer) and rebuild "
        "the image from the pinned lock",
    ),
    _rule(
        "import_error",
        (r"(?:^|\.)AttributeError$", r"", r"^module '[\w.]+' has no attribute '"),
        "a package of another version than the code calling it was written for (Python's 'module 'triton."
        "language' has no attribute ..', 'module 'torch' has no attribute 'float8_e4m3fn''): the "
        "vocabulary's 'a module does not match'",
        "rebuild the image from the pinned lock (the packages must be the versions SGLang pins)",
    ),
    # round 16: a launcher's wait for the server raising (AReaL's _wait_for_server 'server launch failed',
    # olmocr's sglang_server_ready): the readiness wait ran out, whatever exception it raised
    _rule(
        "health_timeout",
        (r"(?:Error|Exception)$", r"", r""),
        "a launcher or trainer waiting for the SGLang server raises when it never answers "
        "(areal-project/AReaL "
        "areal/engine/sglang_remote.py _wait_for_server: RuntimeError('server launch failed'); round 16, "
        "in-sample areal-project/AReaL#240)",
        NEVER_ANSWERED,
        function=r"^_?wait_for_server\w*$|^\w*server_ready$|^_?wait_until_(?:server_)?ready$",
    ),
    # round 27 (in-sample: round 26's sgl-project/SpecForge#104, 'AssertionError: hidden_state is expected
    # to be non-nan'): a check for NaN that failed is NaN output, whatever exception the check raised
    _rule(
        "nan",
        (
            r"(?:^|\.)(?:AssertionError|ValueError|RuntimeError)$",
            r"",
            r"(?i)(?<![a-z])(?:non-?)?nan(?![a-z])",
        ),
        "a NaN check failing (an assert or a raise whose message names NaN: 'hidden_state is expected to be "
        "non-nan', 'Input contains NaN'); round 27",
        "the model produced NaN: check the dtype (fp16 overflow), the quantization scales and the kernels "
        "the run picked (--enable-nan-detection names the step)",
    ),
    # round 27 (in-sample: round 26's sgl-project/sglang#23233): an exception raised inside transformers'
    # own import (its lazy-module machinery) while a module is being imported: the installed transformers
    # is broken or mismatched, whatever exception it raised ('ValueError: Backend should be defined in the
    # BACKENDS_MAPPING')
    _rule(
        "import_error",
        (r"(?:Error|Exception)$", r"/transformers/utils/import_utils\.py$", r""),
        "transformers' lazy import machinery (transformers/utils/import_utils.py: _LazyModule, "
        "requires_backends, _get_module's 'Failed to import transformers.models.X because of the following "
        "error') raising while a module is imported; round 27",
        "rebuild the image from the pinned lock: transformers and its backends must be the versions SGLang "
        "pins",
        function=r"^<module>$",
    ),
    # round 13: a traceback ending in an AssertionError that no line-level signature read (its line cut:
    # 'AssertionErro', in-sample sgl-project/sglang#19503); weak like the bare line's signature
    Rule(
        r"(?:^|\.)AssertionError$",
        r"",
        r"",
        sig(
            "assertion",
            r"AssertionError",
            ("AssertionError",),
            "CPython's traceback of a failed assert; round 13 (in-sample, sgl-project/sglang#19503: "
            "'self.support_pp' then a cut 'AssertionErro')",
            "read the assert's source line above the exception: it names what the code expected",
            weak=True,
        ),
    ),
)
#: a capture that never returned: the log's own clock ran CAPTURE_HUNG_S past its begin line, nothing after
CAPTURE_HUNG = sig(
    "timeout",
    r"CUDA graph begin",
    ("graph begin",),
    "SGLang's 'Capture cuda graph begin.' / 'Capture {name} CUDA graph begin.' with no '... end.' "
    "(sglang 0.5.22 wheel srt/model_executor/model_runner_components/cuda_graph_setup.py); a capture "
    "that never returns (sglang PR #29580 comment, reference sm120-2026h2.md section 2 row 3)",
    "rerun with --disable-cuda-graph (or a breakable decode graph) to confirm; upgrade FlashInfer",
)
#: a generation collapsed to one punctuation mark (NaN logits decode as '!' at temperature 0)
COLLAPSED = Signature(  # garbage ranks after nan: the collapse is what NaN logits decode to
    cls="garbage",
    regex=r"([!?.,#*])\1{63,}",
    keys=("!!!!",),
    priority=CLASS_PRIORITY["nan"] + 1,
    source="GLM-5.2-NVFP4 long-context collapse to '!!!!' output (sgl-project/sglang#30989, reference "
    "sm120-2026h2.md section 2 row 6)",
    fix="the model's output is degenerate: check the quantization/attention backend on long contexts",
)


#: an excerpt that ends inside a traceback's header or SGLang's 'hit an exception' line (read only in a paste:
#: the live healthcheck never counts structure alone as fatal)
CUT_FATAL = sig(
    "crash",
    r"^\s*Trace(?:b(?:a(?:c(?:k)?)?)?)?\s*$|\bhit an e[a-z]*:?\s*$"
    r"|^\s*(?:The above exception was the direct cause|During handling of the above exception)",
    ("Trace", "hit an e", "The above exception", "During handling"),
    "round 12 (in-sample, round 10's sgl-project/sglang#3695 and #5858): a paste cut inside CPython's "
    "'Traceback (most recent call last):' or SGLang's '<Component> hit an exception:' (sglang 0.5.23 "
    "srt/managers/scheduler.py 'Scheduler hit an exception: {traceback}'); round 19: or at CPython's header "
    "of a chained exception's traceback (Lib/traceback.py: 'The above exception was the direct cause of the "
    "following exception:', 'During handling of the above exception, another exception occurred:')",
    "the paste was cut where the process began to die: paste the lines after it",
    weak=True,
)


#: a piece of CPython's fatal-error module list: the process died (segfault, abort) before the paste's end
FATAL_MODULES = sig(
    "crash",
    _MODULES,
    (", ",),
    "round 12 (in-sample, round 10's gpustack/gpustack#5641): CPython's fatal-error dump of extension "
    "modules (Python/pylifecycle.c _Py_DumpExtensionModules), a piece of its one long line pasted alone",
    "a native crash: paste the 'Fatal Python error' line and the thread dump above the module list",
    weak=True,
)


#: the class a person names from a failure report's own words (the first that fits), else crash
_END_CLASSES: tuple[tuple[str, str], ...] = (
    (
        "oom",
        r"(?i:out of (?:device |gpu |npu )?memory|\bOOM\b|insufficient (?:device |gpu |npu )?memory"
        r"|memory (?:is )?(?:exhausted|insufficient)|cannot allocate memory)",
    ),
    ("illegal_memory", r"(?i:illegal (?:memory|address)|invalid (?:device )?address|memory access fault)"),
    ("gpu_fault", r"\bXid\b|(?i:fallen off the bus)|\bGSP\b"),
    (
        "import_error",
        r"No module named|cannot import|undefined symbol|cannot open shared object"
        r"|\b(?:ImportError|ModuleNotFoundError)\b",
    ),
    (
        "kernel_compile",
        r"\b(?:nvcc|ptxas|ninja)\b|(?i:\bcompil(?:e|ation|ing) (?:failed|error)|failed to compile)",
    ),
    ("nccl", r"\b(?:NCCL|HCCL|RCCL|[Gg]loo|c10d|TCPStore|[Rr]endezvous|ProcessGroup\w*)\b"),
)
_END_SOURCE = (
    "round 17 (issue 36: 'the last ERROR/CRITICAL lines'; written from the rule a person reads a paste by, "
    "before round 17's held-out misses were opened): a paste whose last line reports a failure (a logger's "
    "ERROR/CRITICAL/FATAL level, glog's E/F prefix, or words: error, failed, fault, aborted, panicked, "
    "killed, crashed, exception, timed out) and that shows no serving and no clean stop ended where the "
    "server died; its own words name the class where they can (out of memory, illegal address, Xid, a "
    "missing module, a compiler, a collective library)"
)
_END_FIX = "the paste ends in this failure report: read it and the lines above it (the root cause is there)"
#: literal texts of each class's words (documentation only: these are read off the structure, not scanned)
_END_KEYS: dict[str, tuple[str, ...]] = {
    "oom": ("memory", "OOM"),
    "illegal_memory": ("illegal", "invalid", "access fault"),
    "gpu_fault": ("Xid", "fallen off", "GSP"),
    "import_error": ("No module named", "cannot import", "undefined symbol", "shared object", "ImportError"),
    "kernel_compile": ("nvcc", "ptxas", "ninja", "ompil"),
    "nccl": ("NCCL", "HCCL", "RCCL", "loo", "c10d", "TCPStore", "endezvous", "ProcessGroup"),
    "crash": (
        "ERROR",
        "CRITICAL",
        "FATAL",
        "rror",
        "ail",
        "ault",
        "bort",
        "anic",
        "illed",
        "rash",
        "xception",
    ),
}
ENDED_IN_ERROR: dict[str, Signature] = {
    cls: sig(cls, pattern, _END_KEYS[cls], _END_SOURCE, _END_FIX, weak=True)
    for cls, pattern in (*_END_CLASSES, ("crash", _END_ERROR))
}


def ended_in_error(found: Structure, line: str) -> Signature | None:
    """For a finished paste with no other evidence: the signature of the failure report ``line`` (the text of
    ``found.end_error``) that the run ends in, by its words' class, else None. Never read live: a server
    still starting may log an error line it goes on from."""
    if not found.end_error:
        return None
    for cls, pattern in _END_CLASSES:
        if _re(pattern).search(line):
            return ENDED_IN_ERROR[cls]
    return ENDED_IN_ERROR["crash"]


def explain(found: Structure) -> tuple[Signature, int] | None:
    """The class the structure proves (its signature and evidence line), else None."""
    if found.collapse_line:
        return COLLAPSED, found.collapse_line
    if found.exception:
        for rule in RULES:
            if (
                _re(rule.exception).search(found.exception)
                and any(_re(rule.module).search(file) for file in found.frames)
                and _re(rule.message).search(found.message)
                and (
                    not rule.function
                    or any(_re(rule.function).search(f) for f in found.functions[-LAST_FRAMES:])
                )
            ):
                return rule.signature, found.exception_line
    if (
        found.cut_assert > max(found.exception_line, found.trace_line - 1)  # the last traceback's
        and _re(_LOADER).search(found.cut_assert_in)
    ):
        return LOADER_CHECK, found.cut_assert  # the loader rule's reading of a traceback cut at its assert
    if found.capture_open and found.capture_seconds >= CAPTURE_HUNG_S:
        return CAPTURE_HUNG, found.capture_open
    if found.modules_line:
        return FATAL_MODULES, found.modules_line
    if found.cut_line:
        return CUT_FATAL, found.cut_line
    return None
