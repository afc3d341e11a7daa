"""Paste noise (healthchecks/signatures/paste.py): every form a person reads past is read past by the scanner.

Each case wraps real SGLang lines (from the corpus: sgl-project/sglang#8296's illegal memory access, #22331's
decode batches, #35080's arch gate) in one noise form and checks the verdict, the line number and that the
match shows the line as pasted.
"""

from __future__ import annotations

import pytest
from healthchecks.signatures import paste

from healthchecks import signatures

IMA = "RuntimeError: CUDA error: an illegal memory access was encountered"
GATE = (
    "AssertionError: Only {'trtllm_mha', 'triton', 'fa4'} backends are supported on Blackwell GPUs for "
    "hybrid GDN models. Got attention_backend=flashinfer."
)
DECODE = (
    "[2026-04-08 14:05:21 TP0] Decode batch, #running-req: 5, #token: 20800, token usage: 0.29, cuda graph: "
    "True, gen throughput (token/s): 144.95, #queue-req: 0"
)

#: form -> a function that wraps one log line in it
FORMS = {
    "markdown quote": lambda line: "> " + line,
    "nested quote": lambda line: "> > " + line,
    "bullet": lambda line: "- " + line,
    "backticks": lambda line: "`" + line + "`",
    "compose": lambda line: "sglang-1  | " + line,
    "kubectl --prefix": lambda line: "[pod/sglang-0/server] " + line,
    "journald": lambda line: "Dec 03 10:00:01 gpu-node-1 python3[4242]: " + line,
    "kernel ring buffer": lambda line: "[  123.456789] " + line,
    "dmesg -T": lambda line: "[Fri Jun  5 01:02:42 2026] " + line,
    "kibana double timestamp": lambda line: "Dec 3, 2025 @ 10:00:01.123\t2025-12-03T10:00:01.123Z " + line,
    "CRI": lambda line: "2025-12-03T10:00:01.123456789Z stderr F " + line,
    "python logging": lambda line: "2025-03-07 23:50:27,531 - __main__ - INFO - " + line,
    "loguru": lambda line: "2025-07-02 16:41:32 | ERROR | stderr | " + line,
    "ray": lambda line: " (SGLangEngine pid=952, ip=10.0.0.1) " + line,
    # round 5: torchrun's per-rank prefix after a GitHub Actions time stamp (flashinfer-ai/flashinfer#1892's
    # SGLang CI log; pytorch/pytorch#117383 '[rank1]:', #75087 --tee's '[default3]:')
    "actions + torchrun rank": lambda line: "2025-10-09T04:13:06.6371779Z [rank0]: " + line,
    "torchrun --tee": lambda line: "[default3]:" + line,
    # round 7: a CI runner's bracketed ISO stamp (Jenkins' timestamper), alone and after a quote marker
    "bracketed ISO stamp": lambda line: "[2025-11-06T02:10:00.702Z] " + line,
    "quoted bracketed ISO stamp": lambda line: "> [2025-11-06T02:10:00.702Z] " + line,
    # round 8: a viewer's year-less stamp (sgl-project/sglang#23195), a bare time, a slashed date
    "year-less stamp": lambda line: "04-20 13:32:25.784 " + line,
    "bare time": lambda line: "13:32:25 " + line,
    "slashed date": lambda line: "2025/04/20 13:32:25.784 " + line,
    # round 10: mpirun --tag-output's rank tag, with --timestamp-output's ctime before it (sgl-project/sglang#3065)
    "mpirun tag": lambda line: "[1,1]<stderr>:" + line,
    "mpirun time stamp and tag": lambda line: "Thu Jan 23 11:55:50 2025[1,1]<stderr>:" + line,
    "ansi": lambda line: "\x1b[31m" + line + "\x1b[0m",
    # round 16: the same in caret notation, around Ray's prefix (verl-project/verl#1208)
    "caret-notation ansi and ray": lambda line: "^[[36m(WorkerDict pid=38869)^[[0m " + line,
    "crlf": lambda line: line + "\r",
    # round 18: glog's prefix behind torchrun's, as torch's dynamo logs a traceback line by line
    # (sgl-project/sglang#1423)
    "glog": lambda line: (
        "[rank0]:W0914 16:10:28.557000 47272548425472 torch/_dynamo/convert_frame.py:1009] " + line
    ),
}


@pytest.mark.parametrize("form", sorted(FORMS))
@pytest.mark.parametrize(("line", "cls"), [(IMA, "illegal_memory"), (GATE, "unsupported_arch")])
def test_a_failure_line_reads_the_same_through_each_noise_form(form: str, line: str, cls: str) -> None:
    pasted = FORMS[form](line)
    log = f"{FORMS[form]('[2026-01-01 00:00:00] Load weight begin. avail mem=78.84 GB')}\n{pasted}\n"
    scanner = signatures.scan_text(log)
    match = scanner.result()
    assert match is not None and (match.cls, match.line) == (cls, 2)
    assert match.text == pasted.replace("\x1b[31m", "").replace("\x1b[0m", "").strip()  # shown as pasted


@pytest.mark.parametrize("form", sorted(FORMS))
def test_serving_lines_read_as_serving_through_each_noise_form(form: str) -> None:
    assert (
        signatures.scan_text("\n".join(FORMS[form](DECODE) for _ in range(6)) + "\n").verdict() == "healthy"
    )


@pytest.mark.parametrize(
    ("prefixes", "untouched"),
    [
        # torchrun behind a container time stamp; a rank tag inside a line is no prefix
        (
            ("2025-10-09T04:13:06.6371779Z [rank0]: ", "2025-10-09T04:13:06.6372391Z [rank0]: "),
            "Loaded [rank0]: done",
        ),
        # mpirun's --timestamp-output ctime and --tag-output tag; a ctime not followed by the tag is left alone
        (("Thu Jan 23 11:55:50 2025[1,1]<stderr>:",) * 2, "Thu Jan 23 11:55:50 2025 boot"),
        # glog's level, time, thread and source behind torchrun's rank (sgl-project/sglang#1423)
        (
            ("[rank0]:W0914 16:10:28.557000 47272548425472 torch/_dynamo/convert_frame.py:1009] ",) * 2,
            "Loaded W0914 16:10:28.557000 4727 x.py:1] done",
        ),
    ],
    ids=["torchrun-rank", "mpirun-ctime-tag", "glog"],
)
def test_frames_behind_a_launchers_prefix_keep_their_indentation(
    prefixes: tuple[str, str], untouched: str
) -> None:
    """The frames of a traceback cut behind a launcher's per-line prefix read as frames, indented as the
    process wrote them (a cut traceback is crash); the same words not in prefix position stay."""
    frame = '  File "/sgl/srt/managers/scheduler.py", line 1799, in run_scheduler_process'
    source = "    scheduler.event_loop_overlap()"
    pasted = f"{prefixes[0]}{frame}\n{prefixes[1]}{source}\n"
    assert paste.normalise(pasted).splitlines() == [frame, source]
    match = signatures.scan_text(pasted).result()
    assert match is not None and (match.cls, match.line) == ("crash", 1)
    assert paste.normalise(untouched + "\n") == untouched + "\n"


def test_a_wrapped_line_is_read_joined_and_keeps_its_place() -> None:
    log = (
        "tvm.error.InternalError: Failed to set the allowed dynamic shared\nmemory size to 196608 [192 KB]\n"
    )
    assert paste.normalise(log).split("\n")[1] == "memory size to 196608 [192 KB]"
    match = signatures.scan_text(log).result()
    assert match is not None and (match.cls, match.line) == ("shared_memory", 1)


def test_a_short_line_or_a_sentence_end_is_no_wrap() -> None:
    assert paste.normalise("Loading weights\nfrom disk now\n") == "Loading weights\nfrom disk now\n"
    text = "The server is fired up and ready to roll, all model weights are loaded.\nwaiting for requests\n"
    assert paste.normalise(text) == text


def test_indentation_and_sglangs_own_prefix_stay() -> None:
    text = (
        '[2025-11-06 01:16:21 TP0] Scheduler hit an exception:\n  File "/x/scheduler.py", line 2857, in run\n'
    )
    assert paste.normalise(text) == text
    assert paste.normalise("sglang-1  |   File x\n") == "  File x\n"


def test_a_bracketed_iso_stamp_keeps_the_frames_indentation_and_sglangs_own_prefix_stays() -> None:
    """Round 7: frames behind ``> [ISO]`` still read as frames (their source lines stay indented)."""
    pasted = (
        '> [2025-11-06T02:10:00.702Z]   File "/sgl/srt/models/deepseek_vl2.py", line 252, in load_weights\n'
        "> [2025-11-06T02:10:00.702Z]     param = params_dict[name]\n"
        "> [2025-11-06T02:10:00.702Z] KeyError: 'lm_head.weight'\n"
        "[2025-11-06 02:10:00 TP0] Scheduler hit an exception\n"
    )
    lines = paste.normalise(pasted).split("\n")
    assert lines[0].startswith('  File "') and lines[1].startswith("    param")
    assert lines[3] == "[2025-11-06 02:10:00 TP0] Scheduler hit an exception"


def test_a_year_less_stamp_keeps_the_frames_indentation() -> None:
    """Round 8: a traceback's frames behind ``MM-DD hh:mm:ss.fff`` read as frames; a cut traceback is crash."""
    pasted = (
        '04-20 13:32:25.784   File "/sgl/srt/managers/scheduler.py", line 3770, in run_scheduler_process\n'
        "04-20 13:32:25.784     scheduler = Scheduler(\n"
    )
    lines = paste.normalise(pasted).split("\n")
    assert lines[0].startswith('  File "') and lines[1].startswith("    scheduler")
    match = signatures.scan_text(pasted).result()
    assert match is not None and (match.cls, match.line) == ("crash", 1)
    # a time inside a line, or a number that is no time, is no prefix
    assert paste.normalise("Loaded in 13:32:25 flat\n") == "Loaded in 13:32:25 flat\n"
    assert paste.normalise("1332:25 tokens\n") == "1332:25 tokens\n"


@pytest.mark.parametrize("ticks", ["`", "``", "```", "````"])
def test_closing_backticks_of_any_run_are_dropped_in_one_pass(ticks: str) -> None:
    pasted = f"a{ticks}\nb `c`{ticks}\n{ticks}\nd"
    assert paste.normalise(pasted) == "a\nb `c\n\nd"
