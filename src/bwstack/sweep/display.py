"""What the operator sees while a sweep runs: the live per-profile status line and the closing summary."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bwstack import record, textlayout
from bwstack.sweep import bench, report
from bwstack.sweep.judge import Judge, last_line
from healthchecks import phases

#: longest live status line (the elapsed-time column follows it)
STATUS_WIDTH = 100


class Display:
    """Progress: a rich live view with per-profile elapsed time on a terminal, plain lines otherwise."""

    def __init__(self, console: Any, total: int) -> None:
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        self.console = console
        self.total = total
        self.live = bool(console.is_terminal)
        self.progress = Progress(
            SpinnerColumn(finished_text="•"),
            TextColumn("{task.description}"),
            TimeElapsedColumn(),
            console=console,
            disable=not self.live,
        )
        self.task: Any = None
        self.label = ""
        self.last_status = ""

    def __enter__(self) -> Display:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def note(self, text: str) -> None:
        (self.progress.console if self.live else self.console).print(text, highlight=False, markup=False)

    def begin(self, index: int, name: str, detail: str) -> None:
        self.label = f"[{index}/{self.total}] {name}"
        self.last_status = ""
        if self.live:
            self.task = self.progress.add_task(_escape(f"{self.label} ({detail}): starting"), total=1)
        else:
            self.note(f"{self.label} ({detail}): starting")

    def status(self, text: str) -> None:
        if text == self.last_status:
            return
        self.last_status = text
        if self.live and self.task is not None:
            line = f"{self.label}: {text}"
            line = line if len(line) <= STATUS_WIDTH else line[: STATUS_WIDTH - 1] + "…"
            self.progress.update(self.task, description=_escape(line))

    def end(self, row: Mapping[str, Any]) -> None:
        outcome = "matches" if row["match"] else f"DOES NOT MATCH expect {row['expect']}"
        text = f"{self.label}: {row['verdict']} (decided by {row['decided_by']}) - {outcome}"
        if self.live and self.task is not None:
            style = "green" if row["match"] else "red"
            self.progress.update(self.task, description=f"[{style}]{_escape(text)}[/]", completed=1)
            self.progress.stop_task(self.task)
        else:
            self.note(f"{text} in {row['elapsed_s']:.1f} s")
        if row.get("speed"):
            self.note(f"  speed: {bench.speed_words(row['speed'])}")
        if row.get("next_try"):
            following = row["next_try"]
            self.note(f"  next to try: {following['profile'] or 'nothing'}: {following['why']}")


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)


def status_text(judge: Judge, now: float | None = None) -> str:
    """One line for the progress display: while the server starts, the phase its own log shows (weights
    n/N, KV cache, CUDA graphs done/total, a JIT compile, the first decode) and the seconds per phase."""
    fatal = judge.fatal_log()
    if fatal is not None:
        return f"{fatal.cls} in the server log (line {fatal.line}); collecting evidence"
    if judge.exited:
        return f"exited with status {judge.exit_code}; reading the rest of the log"
    found = judge.phases.progress(now)
    last = judge.probes[-1].verdict_class if judge.probes else "starting"
    if found.phase is not None and found.phase != phases.READY and last == "starting":
        return f"starting: {found.line()}"
    if not judge.probes:
        return "container started, waiting for the first healthcheck"
    return f"last healthcheck: {last_line(judge.probes[-1].output)}"


def print_summary(doc: report.Document, out: Path, console: Any) -> None:
    """The matrix as plain rows (names whole at any width), where the report is, whether all matched."""

    measured = any(row.get("speed") for row in doc["results"].values())
    rows = []
    for name in doc["plan"]:
        row = doc["results"].get(name)
        if row is None:
            rows.append([name, "", "not decided", "", ""] + ([""] if measured else []))
            continue
        mode = " (fast)" if row.get("fast") else ""
        match = "yes" if row["match"] else "NO"
        cells: list[Any] = [
            name,
            row["expect"],
            f"{row['verdict']}{mode}",
            match,
            f"{row['elapsed_s']:.1f} s",
        ]
        rows.append(cells + ([bench.short_words(row.get("speed"))] if measured else []))
    console.print("bwstack sweep", markup=False)
    header = ["profile", "expect", "verdict", "matches", "time"] + (["speed"] if measured else [])
    for line in textlayout.table(rows, textlayout.terminal_width(), header=header):
        console.print(line, markup=False)
    summary = report.summarize(doc)
    console.print(
        f"report: {out / record.HTML_FILE} (also {record.RESULTS_FILE}, {record.MARKDOWN_FILE})", markup=False
    )
    if report.all_match(doc):
        console.print(f"all {summary['planned']} profile(s) match their expectation", markup=False)
    else:
        bad = [n for n in report.decided(doc) if not doc["results"][n]["match"]]
        pending = summary["planned"] - summary["decided"]
        parts = [f"{len(bad)} do not match their expectation" + (f" ({', '.join(bad)})" if bad else "")]
        if pending:
            parts.append(f"{pending} not decided")
        console.print("; ".join(parts), markup=False)
