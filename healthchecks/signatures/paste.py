"""Read a pasted log the way a person does: the paste noise around each line is dropped before the scan.

Stdlib only; part of the one failure catalog (:class:`healthchecks.signatures.Scanner` normalises every chunk
it is fed with :func:`normalise`). A log pasted into an issue, exported from a log viewer or read through a
container runtime carries text around SGLang's own line that no signature should have to know:

- markdown: quote markers (``> ``, nested ``> > ``), list bullets (``- ``, ``* ``, ``+ ``), inline-code
  backticks at a line's ends;
- terminals: ANSI colour sequences (also in caret notation, ``^[[36m``), CR of CRLF line ends;
- launchers and log stores: Docker Compose's ``svc-1  | ``, ``kubectl logs --prefix``'s
  ``[pod/name/container]``, journald's ``Mon DD HH:MM:SS host unit[pid]: ``, the kernel's ``[  12.345678]``
  and ``dmesg -T``'s ``[Fri Jun  5 01:02:42 2026]``, Kibana's ``Dec 3, 2025 @ 10:00:00.000``, ISO time
  stamps (also CRI's ``… stdout F``, and a CI runner's bracketed ``[2025-11-06T02:10:00.702Z]``), a
  viewer's year-less ``04-20 13:32:25.784`` or bare ``13:32:25``, mpirun's ``--tag-output`` /
  ``--timestamp-output`` ``Thu Jan 23 11:55:50 2025[1,1]<stderr>:``, glog's (torch's C++ and dynamo
  logging, c10d, Mooncake) ``W0914 16:10:28.557000 4727 torch/_dynamo/convert_frame.py:1009]`` (round 18,
  in-sample sgl-project/sglang#1423: a traceback logged by dynamo line by line, each behind it), a
  Python-logging or loguru ``- name - LEVEL -`` / ``| LEVEL | name |`` after them, Ray's
  ``(Worker pid=N, ip=…)``, torchrun's ``[rank0]:`` (``--tee``'s ``[default0]:``); several in a row (a
  viewer's time stamp before the runtime's before SGLang's);
- a line wrapped in two: a long line cut mid-sentence whose rest starts the next line in lower case.

Each line keeps its place (nothing is added or removed, so line numbers stay the log's): a wrapped line is
read joined with its rest, the rest stays where it was. SGLang's own ``[time TPn]`` prefix stays (the
signatures know it). The work is bounded: one regex pass whose search jumps between line starts at C speed.
"""

from __future__ import annotations

import re

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
#: ANSI colour as caret notation prints it: ``^[[36m(WorkerDict pid=38869)^[[0m`` (round 16, in-sample:
#: verl-project/verl#1208, a Ray worker's traceback pasted that way)
_CARET_ANSI = re.compile(r"\^\[\[[0-9;?]*[A-Za-z]")
_STAMP = (
    r"\d{4}(?:-\d\d-\d\d|/\d\d/\d\d)[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?"
    r"(?:[ \t]+(?:stdout|stderr)[ \t]+[FP](?=[ \t]))?"
    r"(?:(?:[ \t]+-[ \t]+[\w.<>:-]+)*?[ \t]+-[ \t]+(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL)[ \t]+-)?"
)
#: one piece of noise before a line's text; ``_LEAD`` drops a run of them at every line start
_PIECE = (
    r"(?:>[ \t]?"  # markdown quote (each level)
    r"|[-*+][ \t]+(?=\S)"  # list bullet
    r"|`+"  # inline code opened at the line start
    r"|\[(?:pod|deployment|statefulset|job|daemonset|replicaset)/[^\]\s]+\][ \t]?"  # kubectl --prefix
    r"|[A-Z][a-z]{2}[ \t]+\d{1,2}[ \t]+\d\d:\d\d:\d\d(?:\.\d+)?[ \t]+\S+[ \t]+[\w@./:-]+(?:\[\d+\])?:[ \t]?"
    r"|\[[ \t]*\d+\.\d+\][ \t]?"  # kernel ring buffer
    r"|\[[A-Z][a-z]{2} [A-Z][a-z]{2}[ \t]+\d{1,2} \d\d:\d\d:\d\d \d{4}\][ \t]?"  # dmesg -T
    r"|[A-Z][a-z]{2} [A-Z][a-z]{2}[ \t]+\d{1,2} \d\d:\d\d:\d\d \d{4}(?=\[\d+,\d+\]<std)"  # mpirun's ctime
    r"|\[\d+,\d+\]<std(?:out|err)>:"  # mpirun --tag-output's [job,rank]<stderr>:
    r"|[A-Z][a-z]{2} \d{1,2}, \d{4} @ \d\d:\d\d:\d\d(?:\.\d+)?[ \t]*"  # Kibana
    r"|" + _STAMP + r"[ \t]*"
    r"|(?:\d\d[-/]\d\d[ \t]+)?\d\d:\d\d:\d\d(?:[.,]\d+)?[ \t]"  # a year-less stamp (04-20 13:32:25.784)
    r"|\[\d{4}-\d\d-\d\dT[\d:.,]+Z?\][ \t]?"  # a CI runner's bracketed ISO stamp ([2025-11-06T02:10:00.702Z])
    r"|\([\w.-]+ pid=\d+[^)\n]*\)[ \t]?"  # Ray
    r"|\[(?:rank|default)\d+\]:[ \t]?"  # torchrun's per-rank prefix ([rank0]:, --tee's [default0]:)
    r"|\[?[IWEF]\d{4} \d\d:\d\d:\d\d(?:\.\d+)?[ \t]+\d+[ \t]+[\w./<>-]+:\d+\][ \t]?"  # glog
    r"|[\w.-]+[ \t]+\|[ \t]?"  # Compose service, loguru field
    r"|\|[ \t]?"  # loguru's field separator after a stripped time stamp
    r")"
)
#: a run of pieces after a newline (the pattern starts with a literal newline: the search jumps from line
#: start to line start at C speed; the first line is given one). SGLang's own ``[YYYY-MM-DD hh`` lines and
#: indented ones (traceback frames) are passed over at once: most of a log, and no paste puts noise before
#: them
_LEAD = re.compile(r"\n(?!\[\d{4}-\d\d-\d\d |  )(?:[ \t]*" + _PIECE + r")+")
#: the rest of a wrapped line: starts the next line with two lower-case words
_WRAPPED = re.compile(r"\n(?=[a-z]+ [a-z])")
_WRAP_MIN = 40  # a wrapped line is long: the wrap came at a viewer's or terminal's width


def normalise(text: str) -> str:
    """``text`` with the paste noise of each line dropped; the same number of lines, each in its place.

    ``text`` starts at a line start (a chunk of a log cut at a newline)."""
    if "\r\n" in text:
        text = text.replace("\r\n", "\n")
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    if "^[[" in text:  # the same sequences in caret notation (cat -v, less, a terminal copied as text)
        text = _CARET_ANSI.sub("", text)
    text = _LEAD.sub("\n", "\n" + text)[1:]
    if "`\n" in text:  # inline code closed at a line end
        text = _drop_closing_ticks(text)
    if text.endswith("`"):
        text = text.rstrip("`")
    if _WRAPPED.search(text):
        text = _join_wrapped(text)
    return text


def _drop_closing_ticks(text: str) -> str:
    """``text`` without the backticks that end its lines (one pass: a replace per tick of a run rescans and
    copies the whole text each time)."""
    parts: list[str] = []
    done = 0  # text before this offset is in parts
    at = text.find("`\n")
    while at >= 0:
        start = at
        while start > done and text[start - 1] == "`":
            start -= 1
        parts.append(text[done:start])
        done = at + 1  # the newline starts the next part
        at = text.find("`\n", at + 2)
    parts.append(text[done:])
    return "".join(parts)


def _join_wrapped(text: str) -> str:
    """Each line cut mid-sentence read joined with its rest (the rest keeps its own line too)."""
    parts: list[str] = []
    done = 0  # text before this offset is in parts
    for found in _WRAPPED.finditer(text):
        newline = found.start()
        line = text[text.rfind("\n", 0, newline) + 1 : newline]
        if len(line) >= _WRAP_MIN and line[-1].isalnum() and not line[0].isspace():
            end = text.find("\n", newline + 1)
            parts += [text[done:newline], " ", text[newline + 1 : end if end >= 0 else len(text)]]
            done = newline
    return "".join(parts) + text[done:]
