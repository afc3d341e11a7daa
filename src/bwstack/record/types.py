"""The record's types: a ``results.json`` document and its rows, and a merged matrix (``merged.json``) with
its cells and the runs seen in each, one ``TypedDict`` per object with a docstring per field.

These are the shapes the writers build (:mod:`bwstack.sweep.runner` a row, :mod:`bwstack.sweep.report` the
document, :mod:`bwstack.sweep.reportmerge` the merge) and every reader reads. They are plain dicts at
run time, so the file keeps today's keys in today's order byte for byte; ``mypy --strict`` checks every key
a room reads or writes. The JSON schemas ``data/schemas/results.schema.json`` and ``merged.schema.json``
are generated from them (:mod:`bwstack.record.schema`). Sub-records another room owns (the bench's
``speed``, the soak's ``soak``, the startup reader's ``startup``) are typed as objects here and documented
in their room.

Adding a row field is one declaration here (then ``python -m bwstack.record.schema --write``).
"""

from typing import Any, NotRequired, TypedDict


class StackFacts(TypedDict, total=False):
    """The stack a sweep ran (the document's ``stack``; each key where the stack has it)."""

    file: str | None
    """profiles.yaml's file name"""
    project: str | None
    """the Compose project name"""
    model: str | None
    """the model path the stack serves"""
    revision: str | None
    """the model's pinned revision (null: unpinned)"""
    served_name: str | None
    """the name the server answers to"""
    gpu_arch: str | None
    """the GPU arch of the stack (``sm120``), ``cpu`` for a CPU stack"""
    tp_size: int | str | None
    """tensor-parallel size (a combined report joins its parts' values as text)"""


class Mode(TypedDict):
    """How the sweep ran (the document's ``mode``)."""

    standin: bool | None
    """the CPU stand-in answered instead of SGLang (null: a combined report of both)"""
    fast: bool
    """``--fast``: dummy weights and fewer layers"""
    variant: str | None
    """``--variant``: every profile on this image variant (null: each its own)"""
    kind: NotRequired[str]
    """``mixed`` for a combined report (``bwstack demo``); absent otherwise"""
    timeout_s: NotRequired[float]
    """the per-profile budget in seconds"""
    source: NotRequired[str]
    """where the verdicts came from, in words (``real SGLang on the CPU``)"""
    bench: NotRequired[bool]
    """``--bench``: healthy profiles were measured"""
    soak_s: NotRequired[float]
    """``--soak``: seconds of load on each healthy profile (0: none)"""
    compare_to: NotRequired[str | None]
    """``--compare-to``: the reference profile each healthy row was compared with"""
    retrieval: NotRequired[bool]
    """``--retrieval`` or ``--compare-to``: each healthy row's needle retrieval was measured"""


class Summary(TypedDict):
    """Counts over the planned profiles (the document's ``summary``)."""

    planned: int
    """profiles in the plan"""
    decided: int
    """planned profiles with a verdict"""
    matching: int
    """decided profiles whose verdict is their ``expect``"""
    mismatching: int
    """decided profiles whose verdict is not their ``expect``"""


class Health(TypedDict):
    """Docker's health record of the container (the row's ``evidence.health``)."""

    status: str | None
    """Docker's health status at the end (``healthy``, ``unhealthy``, ``starting``)"""
    probes: int
    """healthcheck runs seen"""
    last: list[dict[str, Any]]
    """the last runs: ``exit`` (the check's exit status), ``output`` (its last line), ``at``"""


class Evidence(TypedDict):
    """What the sweep kept of a decided profile (the row's ``evidence``), read before the container went."""

    readiness: NotRequired[str | None]
    """the serve wrapper's readiness verdict line"""
    log_match: NotRequired[dict[str, Any] | None]
    """the log line that decided or explains the verdict: ``class``, ``line``, ``text``, ``also`` (other
    classes), ``source`` (the signature's source), ``context`` (lines around it);
    :mod:`healthchecks.signatures`"""
    log_tail: NotRequired[list[str]]
    """the server log's last lines"""
    exit_code: NotRequired[int | None]
    """the server's exit status (null: still running)"""
    oom_killed: NotRequired[bool]
    """the kernel's OOM killer stopped it"""
    health: NotRequired[Health | None]
    """Docker's health record"""
    requested: NotRequired[dict[str, Any] | None]
    """the backend fields the profile asked for"""
    effective: NotRequired[dict[str, Any] | None]
    """the backend fields ``/server_info`` reported"""
    startup: NotRequired[dict[str, Any] | None]
    """the server log's startup record (:mod:`healthchecks.startup`): each effective backend with its log
    line and origin, and the ``overrides`` it saw"""
    server_version: NotRequired[str | None]
    """SGLang's version as ``/server_info`` gave it"""
    timeout_s: NotRequired[float]
    """the budget the profile had"""
    image_id: NotRequired[str | None]
    """the image the container ran, as Docker names it (``sha256:…``)"""


class NextTry(TypedDict):
    """The profile worth trying after a failed one (:mod:`bwstack.know.next_try`)."""

    profile: str | None
    """its name (null: none is)"""
    why: str
    """why, in words"""


class RetrievalAt(TypedDict):
    """The needle task at one prompt length (:mod:`bwstack.quality.retrieval`)."""

    length: int
    """the prompt's length in tokens"""
    right: int
    """needles whose value was the greedy next token"""
    asked: int
    """needles asked"""
    accuracy: float
    """right / asked"""


class Comparison(TypedDict):
    """A healthy row's token distributions against the reference profile's, on the same seeded prompts,
    teacher-forced (``sweep --compare-to``; :mod:`bwstack.quality.compare`)."""

    to: str
    """the reference profile"""
    positions: int
    """teacher-forced positions compared"""
    mean_kl: float
    """mean KL(reference || this row) over the positions, nats"""
    p99_kl: float
    """its 99th percentile"""
    max_kl: float
    """its largest value"""
    top1_agreement: float
    """the share of positions whose most likely token is the same (0-1)"""
    passed: bool
    """within every threshold (docs/compare.md)"""
    failures: list[str]
    """each threshold passed, in words"""
    worst: list[str]
    """the prompts of largest mean KL"""


class Quality(TypedDict):
    """What a healthy row's server answered on the comparison's seeded prompts (``sweep --compare-to`` or
    ``--retrieval``)."""

    window: int | None
    """the sparse window the prompt lengths were made for (null: the default, 2048)"""
    retrieval: list[RetrievalAt]
    """the needle task's accuracy at half the window, the window and twice it (capped by the context)"""
    answers: str | None
    """the file of its recorded answers in the report folder (``quality/<profile>.json``; null: none)"""
    reference: NotRequired[bool]
    """this row is the ``--compare-to`` reference the others were scored against"""
    compare: NotRequired[Comparison | None]
    """against the reference profile (null: the reference has no recorded answers; absent: this row is the
    reference, or no ``--compare-to``)"""
    note: NotRequired[str]
    """why there is no comparison or no measurement"""


class Row(TypedDict):
    """One decided profile (a value of the document's ``results``)."""

    profile: str
    """the profile's name (the row's key)"""
    variant: str | None
    """the image variant it ran on"""
    model: NotRequired[str]
    """the model path it served"""
    expect: str | None
    """the verdict profiles.yaml expects"""
    verdict: str
    """the failure class reached, or ``healthy``"""
    match: bool
    """the verdict is the ``expect``"""
    fast: NotRequired[bool]
    """run with ``--fast``"""
    standin: NotRequired[bool]
    """the stand-in answered instead of SGLang"""
    source: NotRequired[str]
    """where the verdict came from, in words"""
    fault: NotRequired[str | None]
    """the stand-in's fault (null: real SGLang)"""
    decided_by: str | None
    """what decided: ``healthcheck``, ``log``, ``exit``, ``unhealthy``, ``timeout`` or ``soak``"""
    reason: str | None
    """one line on why"""
    started_at: NotRequired[str]
    """when its start began (UTC, ``2026-07-10T12:01:02Z``)"""
    finished_at: NotRequired[str]
    """when it was decided"""
    elapsed_s: float
    """seconds from start to verdict"""
    evidence: Evidence | None
    """what the sweep kept"""
    start: NotRequired[dict[str, Any]]
    """seconds per start-up phase, the phase reached and its detail (:mod:`healthchecks.phases`)"""
    speed: NotRequired[dict[str, Any]]
    """``--bench``: output tokens/s, requests/s, TTFT p50/p99, ITL p50, the client, the host
    (:mod:`bwstack.sweep.bench`)"""
    soak: NotRequired[dict[str, Any]]
    """``--soak``: the soak's verdict and figures (:mod:`bwstack.sweep.soak`)"""
    imitated: NotRequired[str]
    """the stand-in: what it imitates"""
    scores: NotRequired[dict[str, Any]]
    """the probe's scores, nats/token: ``short``, ``long``, ``long_tokens``"""
    next_try: NotRequired[NextTry | None]
    """a failed row: the profile worth trying next"""
    quality: NotRequired[Quality]
    """a healthy row with ``--compare-to`` or ``--retrieval``: retrieval by length and the comparison"""


class Part(TypedDict):
    """One sweep of a combined report (``bwstack demo``)."""

    report: str
    """its sub-report folder"""
    source: str | None
    """its ``mode.source``"""
    stack: StackFacts
    """its stack"""
    mode: Mode
    """its mode"""


class Document(TypedDict):
    """A ``results.json`` (``schema_version`` 1): the record of one sweep, rewritten after every verdict."""

    schema_version: int
    """1"""
    generated_by: str
    """``bwstack X``"""
    started_at: str
    """when the sweep began (UTC)"""
    updated_at: str
    """when the last row was written (UTC)"""
    stack: StackFacts
    """the stack"""
    mode: Mode
    """how it ran"""
    variants: dict[str, dict[str, Any]]
    """image variant -> its ``versions.json`` manifest"""
    plan: list[str]
    """the profiles, in order"""
    results: dict[str, Row]
    """profile -> its row"""
    summary: Summary
    """counts over the plan"""
    parts: NotRequired[list[Part]]
    """a combined report: the sweeps it joins"""
    host_adjustments: NotRequired[list[str]]
    """what the sweep changed in the compose project for this host (each also printed as a warning)"""


class Seen(TypedDict):
    """One run of a profile in a merged matrix: a bundle's row with its host's facts."""

    section: str
    """``gpu``, ``cpu`` or ``standin``"""
    arch: str
    """the GPU arch, ``cpu`` for a CPU stack"""
    variant: str
    """the image variant"""
    profile: str
    """the profile"""
    expect: str | None
    """its ``expect`` in that run"""
    verdict: str
    """the verdict"""
    fast: bool
    """run with ``--fast``"""
    bundle: str
    """the bundle's id"""
    host: str
    """the host's id"""
    hostname: str | None
    """the host's name (null: redacted)"""
    driver: str | None
    """the NVIDIA driver"""
    cuda: str | None
    """the CUDA version"""
    gpu_model: str | None
    """the GPU model"""
    gpu_count: int
    """GPUs"""
    topology: str | None
    """the GPUs' topology"""
    kernel: str
    """the host kernel"""
    cpus: int
    """CPU cores"""
    image_digest: str | None
    """the image digest"""
    sglang: str | None
    """SGLang's version"""
    date: str
    """when the verdict was reached"""
    evidence: str
    """the link to its evidence"""


class Cell(TypedDict):
    """A merged cell: one profile on one arch, every run of it."""

    section: str
    """``gpu`` or ``cpu``"""
    arch: str
    """the arch"""
    variant: str
    """the image variant"""
    profile: str
    """the profile"""
    expect: list[str]
    """the ``expect`` values the runs had"""
    requested: dict[str, Any]
    """the backend fields asked for"""
    model: str | None
    """the model served"""
    verdicts: dict[str, int]
    """verdict -> runs"""
    agree: bool
    """every run reached the same verdict"""
    hosts: list[str]
    """distinct hosts' ids"""
    drivers: list[str]
    """distinct drivers"""
    image_digests: list[str]
    """distinct image digests"""
    dates: list[str]
    """first and last run"""
    differs: list[dict[str, Any]]
    """the facts that differ between runs of different verdicts"""
    seen: list[Seen]
    """the runs"""


class Merged(TypedDict):
    """A merged matrix (``merged.json``, ``bwstack report merge``; the shipped ``evidence/merged.json``)."""

    format: str
    """``bwstack-merged``"""
    format_version: int
    """1"""
    generated_at: str
    """when it was merged (UTC)"""
    bundles: dict[str, dict[str, Any]]
    """bundle id -> its file, view, host and the report it holds"""
    cells: list[Cell]
    """the cells"""
    standin_rows_left_out: int
    """stand-in rows not merged"""
