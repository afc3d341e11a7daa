"""The sweep's speed column: a bounded load against each healthy profile (``bwstack sweep --bench``).

Once the sweep has decided a profile healthy, and before it stops the container, :func:`measure` runs the
load inside the serving container with ``docker exec`` against ``127.0.0.1``:

- SGLang's own client, ``python3 -m sglang.bench_serving`` (dataset ``random-ids``: random token ids and the
  model's local tokenizer, nothing downloaded), where the image can import it — asked once per image and
  sweep, with the reason kept when it cannot (the CPU image lacks ``datasets``);
- else bwstack's own stdlib client, ``healthchecks/bench_client.py`` (streaming ``/generate``).

Both get the stack's ``bench`` settings (``num_prompts``, ``input_len``, ``output_len``, ``concurrency``,
``time_limit_s``; :class:`bwstack.stack.schema.BenchSettings`) and a hard time limit (SGLang's client under
``timeout -s KILL``, ours by its own deadline; the ``docker exec`` itself a little later). With
``stack.api_key`` set only our client runs: it reads the key from the mounted secret file, where SGLang's
would need it in its environment.

The result is the row's ``speed`` (results.json): the figures of :data:`FIGURES` (output tokens/s,
requests/s, TTFT p50/p99 and ITL p50 in ms), ``completed``/``failed``/``timed_out``, the settings, the
``client`` and why SGLang's was not used, ``bench_s`` (wall time of the whole step), and ``host``: the GPUs
(model and count, the doctor's ``nvidia-smi`` query) or ``CPU: <model>, N cores``, marked as the stand-in's
where the stand-in served — so a CPU figure is never read as a Blackwell one. A run that completed nothing
has ``error`` and no figures. ``bwstack up`` ranks by ``output_tokens_per_s`` (:mod:`bwstack.ops.choose`),
``bwstack list`` shows it as "measured", the report prints it (:func:`speed_words`).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bwstack import launch
from bwstack.host.doctor.detect import detect_host
from bwstack.host.doctor.probe import default_probe
from bwstack.stack.schema import BenchSettings, Stack
from bwstack.textlayout import printable
from healthchecks import imagelayout

#: SGLang's benchmark client, run as a module inside the serving image
SGLANG_CLIENT = "sglang.bench_serving"
#: bwstack's own client inside the serving image (``COPY healthchecks/``)
OWN_CLIENT = f"{imagelayout.HC_DIR}/bench_client.py"
OWN_CLIENT_NAME = "bwstack bench_client"
#: the figures of a speed record, in the order the report prints them
FIGURES = ("output_tokens_per_s", "requests_per_s", "ttft_ms_p50", "ttft_ms_p99", "itl_ms_p50")
#: SGLang's result keys (its ``--output-file`` JSONL) for each figure
SGLANG_KEYS = {
    "output_tokens_per_s": "output_throughput",
    "requests_per_s": "request_throughput",
    "ttft_ms_p50": "median_ttft_ms",
    "ttft_ms_p99": "p99_ttft_ms",
    "itl_ms_p50": "median_itl_ms",
}
#: seconds the ``docker exec`` may outlast the client's own time limit (process start, imports, tokenizer)
EXEC_GRACE_S = 60.0
#: seconds the import probe of SGLang's client may take (importing sglang loads torch)
PROBE_TIMEOUT_S = 180.0
STANDIN_WORDS = "stand-in server (CPU imitation of SGLang; not a GPU figure)"

#: runs one argv on the host with a timeout: (argv, timeout seconds) -> completed process
Run = Callable[[Sequence[str], float], "subprocess.CompletedProcess[str]"]


def run_host(argv: Sequence[str], timeout: float) -> subprocess.CompletedProcess[str]:
    """The default :data:`Run`: no shell; a timeout is a completed process with status 124."""
    try:
        return subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        return subprocess.CompletedProcess(list(argv), 124, out, f"timed out after {timeout:g} s")
    except OSError as exc:
        return subprocess.CompletedProcess(list(argv), 127, "", str(exc))


def exec_argv(container: str, argv: Sequence[str]) -> list[str]:
    """``docker exec`` of ``argv`` in ``container`` (an argv list, never a shell line)."""
    return ["docker", "exec", container, *argv]


def probe_argv() -> list[str]:
    """Whether the image can run SGLang's client: its import, nothing else."""
    return ["python3", "-c", f"import {SGLANG_CLIENT}"]


def sglang_argv(
    settings: BenchSettings, *, port: int, tokenizer: str, served_name: str | None, output_file: str
) -> list[str]:
    """``sglang.bench_serving`` with the random-ids dataset and the local tokenizer, under a hard limit."""
    argv = [
        "timeout", "-s", "KILL", str(settings.time_limit_s),
        "python3", "-m", SGLANG_CLIENT,
        "--backend", "sglang",
        "--host", "127.0.0.1",
        "--port", str(port),
        "--dataset-name", "random-ids",
        "--random-input-len", str(settings.input_len),
        "--random-output-len", str(settings.output_len),
        "--random-range-ratio", "1",
        "--num-prompts", str(settings.num_prompts),
        "--max-concurrency", str(settings.concurrency),
        "--tokenizer", tokenizer,
        "--model", tokenizer,
        "--seed", "0",
        "--ready-check-timeout-sec", "0",
        "--disable-tqdm",
        "--output-file", output_file,
    ]  # fmt: skip
    if served_name:
        argv += ["--served-model-name", served_name]
    return argv


def own_argv(settings: BenchSettings, *, port: int, api_key_file: str | None) -> list[str]:
    """bwstack's stdlib client (``healthchecks/bench_client.py``) with the same settings."""
    argv = [
        "python3", OWN_CLIENT,
        "--url", f"http://127.0.0.1:{port}",
        "--num-prompts", str(settings.num_prompts),
        "--input-len", str(settings.input_len),
        "--output-len", str(settings.output_len),
        "--concurrency", str(settings.concurrency),
        "--time-limit", str(settings.time_limit_s),
    ]  # fmt: skip
    if api_key_file:
        argv += ["--api-key-file", api_key_file]
    return argv


def _last_json(text: str) -> dict[str, Any] | None:
    for raw in reversed(text.splitlines()):
        line = raw.strip()
        if line.startswith("{"):
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict):
                return value
    return None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return round(float(value), 3)


def _count(value: Any) -> int:
    """A count from a client's JSON: 0 for anything that is not a whole number."""
    return int(value) if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def parse_sglang(text: str, settings: BenchSettings) -> dict[str, Any]:
    """The figures of ``sglang.bench_serving``'s result (the last JSON line of its ``--output-file``)."""
    found = _last_json(text)
    if found is None:
        return {"error": "sglang.bench_serving wrote no result"}
    completed = _count(found.get("completed"))
    out: dict[str, Any] = {key: _number(found.get(theirs)) for key, theirs in SGLANG_KEYS.items()}
    out.update(
        completed=completed,
        failed=max(0, settings.num_prompts - completed),
        timed_out=False,
        duration_s=_number(found.get("duration")),
        output_tokens=_count(found.get("total_output_tokens")),
    )
    return out


def parse_own(text: str) -> dict[str, Any]:
    """The figures of ``bench_client.py``'s one JSON line."""
    found = _last_json(text)
    if found is None:
        return {"error": "bench_client printed no result"}
    out: dict[str, Any] = {key: _number(found.get(key)) for key in FIGURES}
    out.update(
        completed=_count(found.get("completed")),
        failed=_count(found.get("failed")),
        timed_out=found.get("timed_out") is True,
        duration_s=_number(found.get("duration_s")),
        output_tokens=_count(found.get("output_tokens")),
    )
    if isinstance(found.get("errors"), list) and found["errors"]:
        out["errors"] = [str(e)[:300] for e in found["errors"]][:5]
    return out


# --- the host label -----------------------------------------------------------------------------------------


def cpu_label(cpuinfo: Path = Path("/proc/cpuinfo"), cores: int | None = None) -> str:
    """``CPU: <model name>, N cores`` of this host."""
    name = "unknown model"
    try:
        for line in cpuinfo.read_text(encoding="utf-8", errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("model name", "Model", "cpu model") and value.strip():
                name = " ".join(value.split())
                break
    except OSError:
        pass
    count = cores if cores is not None else (os.cpu_count() or 0)
    return f"CPU: {name}, {count} cores"


def host_label(stack: Stack, *, standin: bool, gpus: Callable[[], str] | None = None) -> str:
    """Where the figures were measured: the GPUs (model x count), else the CPU; the stand-in says so."""
    if standin:
        return f"{STANDIN_WORDS} on {cpu_label()}"
    if stack.is_cpu:
        return f"{cpu_label()} (real SGLang, no GPU)"
    return (gpus or gpu_label)()


def gpu_label() -> str:
    """``GPU: 8x NVIDIA RTX PRO 6000 … (sm120)`` from the doctor's probe, or why no GPU was seen."""

    host = detect_host(default_probe())
    return f"GPU: {host.summary}"


# --- one profile --------------------------------------------------------------------------------------------


@dataclass
class Bench:
    """The bench step of one sweep: settings, host label, and which client each image runs (asked once)."""

    stack: Stack
    standin: bool
    run: Run = run_host
    host: str | None = None
    #: image -> None (SGLang's client runs there) or why it does not
    clients: dict[str, str | None] = field(default_factory=dict)

    def label(self) -> str:
        if self.host is None:
            self.host = host_label(self.stack, standin=self.standin)
        return self.host

    def sglang_problem(self, container: str, image: str) -> str | None:
        """None when the image runs SGLang's client, else why not (asked once per image)."""
        if self.stack.settings.api_key:
            return "stack.api_key is set: the key stays in its secret file, which only bwstack's client reads"
        if image not in self.clients:
            result = self.run(exec_argv(container, probe_argv()), PROBE_TIMEOUT_S)
            if result.returncode == 0:
                self.clients[image] = None
            else:
                last = _last_line(result.stderr or result.stdout) or f"exit status {result.returncode}"
                self.clients[image] = f"{SGLANG_CLIENT} does not import in this image: {last}"
        return self.clients[image]

    def measure(self, name: str, container: str, image: str) -> dict[str, Any]:
        """The ``speed`` record of profile ``name`` served by ``container`` (running, healthy)."""
        settings = self.stack.settings.bench
        started = time.monotonic()
        problem = self.sglang_problem(container, image)
        port = self.stack.settings.port
        if problem is None:
            figures = self._sglang(name, container, settings, port)
            client = SGLANG_CLIENT
        else:
            key = f"{imagelayout.SECRETS_DIR}/api_key" if self.stack.settings.api_key else None
            result = self.run(
                exec_argv(container, own_argv(settings, port=port, api_key_file=key)),
                settings.time_limit_s + EXEC_GRACE_S,
            )
            figures = parse_own(result.stdout)
            if "error" in figures:
                figures["error"] += f" (exit {result.returncode}: {_last_line(result.stderr)})"
            client = OWN_CLIENT_NAME
        return record(
            figures,
            settings=settings,
            client=client,
            why_client=problem,
            host=self.label(),
            standin=self.standin,
            bench_s=time.monotonic() - started,
        )

    def _sglang(self, name: str, container: str, settings: BenchSettings, port: int) -> dict[str, Any]:
        output = f"{imagelayout.BENCH_OUTPUT_PREFIX}{uuid.uuid4().hex[:12]}.jsonl"
        argv = sglang_argv(
            settings,
            port=port,
            tokenizer=launch.model_path_in_container(self.stack, name),
            served_name=self.stack.model.served_name,
            output_file=output,
        )
        result = self.run(exec_argv(container, argv), settings.time_limit_s + EXEC_GRACE_S)
        written = self.run(exec_argv(container, ["cat", output]), 30.0)
        self.run(exec_argv(container, ["rm", "-f", output]), 30.0)
        figures = parse_sglang(written.stdout if written.returncode == 0 else "", settings)
        if "error" in figures:
            why = "time limit reached" if result.returncode in (124, 137) else _last_line(result.stderr)
            figures["error"] += f" (exit {result.returncode}: {why})"
        return figures


def record(
    figures: Mapping[str, Any],
    *,
    settings: BenchSettings,
    client: str,
    why_client: str | None,
    host: str,
    standin: bool,
    bench_s: float,
) -> dict[str, Any]:
    """One row's ``speed``: figures (absent when nothing completed: ``error`` says why), what ran, where."""
    out: dict[str, Any] = {}
    error = figures.get("error")
    if not error and not figures.get("completed"):
        error = "no request completed within the time limit"
    elif not error and not has_figures(figures):
        error = "the client reported no output rate"
    if error:
        out["error"] = str(error)
        if figures.get("errors"):
            out["error"] += f"; first error: {figures['errors'][0]}"
    else:
        out.update({key: figures.get(key) for key in FIGURES})
    for key in ("completed", "failed", "timed_out", "duration_s", "output_tokens", "errors"):
        if key in figures:
            out[key] = figures[key]
    out.update(
        settings=settings.model_dump(),
        client=client,
        client_note=why_client,
        host=host,
        standin=standin,
        bench_s=round(bench_s, 2),
    )
    return out


def _last_line(text: str | None) -> str:
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


# --- words --------------------------------------------------------------------------------------------------


def figure(value: Any) -> str:
    """A figure as the report prints it: whole above 100 (tokens/s of a GPU), else 3 significant digits."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "-"
    number = float(value)
    if abs(number) >= 100:
        return f"{number:.0f}"
    return f"{number:.3g}"


def has_figures(speed: Any) -> bool:
    """Whether a row's ``speed`` carries a measured output rate."""
    return isinstance(speed, Mapping) and isinstance(speed.get("output_tokens_per_s"), int | float)


def short_words(speed: Any) -> str:
    """``123 tok/s`` for a table cell; ``bench failed`` or '' (not measured)."""
    if not isinstance(speed, Mapping):
        return ""
    if not has_figures(speed):
        return "bench failed"
    return f"{figure(speed['output_tokens_per_s'])} tok/s"


def speed_words(speed: Any) -> str:
    """The whole record in one line: figures, settings, client, host."""
    if not isinstance(speed, Mapping):
        return ""
    return printable(_speed_words(speed))


def _speed_words(speed: Mapping[str, Any]) -> str:
    settings = speed.get("settings")
    settings = settings if isinstance(settings, Mapping) else {}
    load = (
        f"{settings.get('num_prompts')} requests of {settings.get('input_len')} in / "
        f"{settings.get('output_len')} out tokens, {settings.get('concurrency')} at once"
    )
    if not has_figures(speed):
        return f"bench failed: {speed.get('error')} ({load}; {speed.get('client')}; on {speed.get('host')})"

    def num(key: str) -> str:
        return figure(speed.get(key))

    partial = " (time limit reached: completed requests only)" if speed.get("timed_out") else ""
    return (
        f"{num('output_tokens_per_s')} output tok/s, {num('requests_per_s')} req/s, "
        f"TTFT p50 {num('ttft_ms_p50')} ms / p99 {num('ttft_ms_p99')} ms, ITL p50 {num('itl_ms_p50')} ms; "
        f"{speed.get('completed')} completed, {speed.get('failed')} failed{partial} ({load}; "
        f"{speed.get('client')}; on {speed.get('host')})"
    )
